/**
 * The serving check (docs/routing.md, "Serving check") on the real stack: an operator of its own
 * runs with --serving-check-address pointing at a TLS server this test starts, which stands in for
 * the ingress controller (no real one in the stack): it serves, by SNI, the certificate of the
 * domain's Secret once the test loads it (as ingress-nginx loads a Secret), else its default
 * certificate, and for a routed Host the project's page, else the default backend's 404. Ready
 * follows what is served: the default certificate, the default backend, the project; after a
 * renewal, Ready only once the new certificate is served.
 */
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
  renewalWindowInThePast,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';
import {
  FAKE_CERTIFICATE_SUBJECT,
  selfSignedCertificate,
  StandInIngress,
  type CertificatePem,
} from '../support/stand-in-ingress.js';

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let ingress: StandInIngress | undefined;
/** The stand-in's `host:port`, the operator's --serving-check-address. */
let address = '';

/** `--serving-check-propagation-seconds` of this file's operator. */
const PROPAGATION_SECONDS = 10;
const PROJECT_PAGE = { status: 200, body: '<!doctype html><title>Shop</title>' };

beforeAll(async () => {
  ingress = new StandInIngress(await selfSignedCertificate(FAKE_CERTIFICATE_SUBJECT, ['ingress.local']));
  address = await ingress.listen();
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  // A 5 s interval caps the retry delay, so each change of the stand-in is seen within seconds.
  operator = await startOperator(stack, 'serving-check', {
    '--serving-check-address': address,
    '--serving-check-interval-seconds': '5',
    '--serving-check-timeout-ms': '2000',
    // The propagation grace (AwaitingServing before CertificateNotServed) shortened from 30 s.
    '--serving-check-propagation-seconds': String(PROPAGATION_SECONDS),
  });
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    async () => ingress?.close(),
    () => restartStackController(stack),
  );
});

/** The certificate and key in Secret `<name>-tls`, read from the API server. */
async function secretPem(namespace: string, name: string): Promise<CertificatePem & { serial: string }> {
  const secret = await kube().core.readNamespacedSecret({ namespace, name: `${name}-tls` });
  const certPem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
  const keyPem = Buffer.from(secret.data?.['tls.key'] ?? '', 'base64').toString('utf8');
  return { certPem, keyPem, serial: serial(new X509Certificate(certPem).serialNumber) };
}

/** A serial as the serving check's messages print it: uppercase hex, no leading zeros. */
function serial(value: string | undefined): string {
  return (value ?? '').replace(/:/g, '').toUpperCase().replace(/^0+/, '');
}

function ready(cd: CustomDomain) {
  return cd.status?.conditions?.find((c) => c.type === 'Ready');
}

describe('the serving check against a TLS server standing in for the ingress controller', () => {
  const ns = unique('serving');
  const hostname = `www.${ns}.example`;

  it('is Ready only while the stand-in serves the issued certificate and routes the hostname, a renewed one included', async () => {
    const standIn = ingress;
    if (!standIn) throw new Error('no stand-in ingress');
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });

    // Issued, routed, but the stand-in has no Secret for the hostname: its default certificate,
    // first within the propagation grace (Normal), then as the Warning.
    const awaiting = await waitForCondition(ns, 'www', 'Ready', 'False', 'AwaitingServing', 60_000);
    expect(ready(awaiting)?.message).toMatch(
      /^Waiting for the data plane to load the route and certificate it took: For .* its default certificate/,
    );
    expect(ready(awaiting)?.message).toContain(
      `Normal for up to ${PROPAGATION_SECONDS} s after the first check of this certificate`,
    );
    const notServed = await waitForCondition(ns, 'www', 'Ready', 'False', 'CertificateNotServed', 60_000);
    const issuedSerial = serial(notServed.status?.certificate?.serialNumber);
    expect(notServed.status?.conditions?.find((c) => c.type === 'CertificateReady')?.status).toBe('True');
    expect(notServed.status?.phase).toBe('Verified');
    // Named as the operator's --data-plane-name has it (the stack's: Contour), at the address checked.
    expect(ready(notServed)?.message).toContain(`For ${hostname}, Contour at ${address} serves`);
    expect(ready(notServed)?.message).toContain('its default certificate');
    expect(ready(notServed)?.message).toContain(`subject ${FAKE_CERTIFICATE_SUBJECT}, self-signed`);
    expect(ready(notServed)?.message).toContain(
      `not the certificate Portico issued (serial ${issuedSerial})`,
    );

    // The ingress controller loads the domain's Secret, but has no route for the hostname yet.
    const issued = await secretPem(ns, 'www');
    expect(issued.serial).toBe(issuedSerial);
    standIn.load(hostname, issued);
    const notReached = await waitForCondition(ns, 'www', 'Ready', 'False', 'ProjectNotReached', 30_000);
    expect(ready(notReached)?.message).toContain('default backend - 404');

    standIn.route(hostname, PROJECT_PAGE);
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 30_000);
    expect(live.status?.phase).toBe('Live');
    // What the check saw, where and when (re-checked every 5 s here, the same answer each time).
    const message = ready(live)?.message ?? '';
    expect(message).toContain(`${hostname}: served certificate ${issuedSerial} (valid until `);
    expect(message).toContain(`) at ${address}, checked `);
    expect(message).toMatch(/, checked \d{4}-\d\d-\d\dT[\d:.]+Z \(re-checked every 5 seconds\): /);
    expect(message).toMatch(
      new RegExp(`: GET https://${hostname.replace(/\./g, '\\.')}/ answered HTTP 200\\.$`),
    );
    expect(ready(live)?.message).not.toContain('serves over HTTPS');
    expect(standIn.servernames).toContain(hostname);
    // Re-checks that see the same answer leave the message, and so the status, as it was. A check
    // makes two TLS connections with the hostname as SNI; once a second re-check has begun, the
    // reconcile of the first (and its status write, if any) is over.
    const asked = (): number => standIn.servernames.filter((name) => name === hostname).length;
    const before = asked();
    await waitFor('two re-checks of the serving domain', () => (asked() > before + 2 ? true : undefined));
    const rechecked = await getCustomDomain(ns, 'www');
    expect(ready(rechecked)).toMatchObject({ status: 'True', reason: 'Live', message });

    // A renewal (the CA's ARI window moved into the past, then a verify request): the new
    // certificate is in the Secret, the stand-in still serves the old one.
    await renewalWindowInThePast(issued.certPem);
    await requestVerify(ns, 'www', `renew-${Date.now()}`);
    const renewed = await waitFor('the renewed certificate in status', async () => {
      const cd = await getCustomDomain(ns, 'www');
      const now = serial(cd.status?.certificate?.serialNumber);
      return now !== '' && now !== issuedSerial ? cd : undefined;
    });
    const renewedSerial = serial(renewed.status?.certificate?.serialNumber);
    expect(ready(renewed)?.status).toBe('False');
    const previous = await waitForCondition(ns, 'www', 'Ready', 'False', 'CertificateNotServed', 45_000);
    // Pebble's certificates have an empty subject: the message names the issuer and the serial.
    expect(ready(previous)?.message).toContain(
      'serves the certificate the renewal replaced (subject (empty), issuer CN=Pebble',
    );
    expect(ready(previous)?.message).toContain(`serial ${issuedSerial}`);
    expect(ready(previous)?.message).toContain(
      `not the certificate Portico issued (serial ${renewedSerial})`,
    );
    // Retried (every 5 s at most here): still not Ready while the old certificate is served.
    await new Promise((r) => setTimeout(r, 6_000));
    const still = await getCustomDomain(ns, 'www');
    expect([ready(still)?.status, ready(still)?.reason]).toEqual(['False', 'CertificateNotServed']);

    const renewedPem = await secretPem(ns, 'www');
    expect(renewedPem.serial).toBe(renewedSerial);
    standIn.load(hostname, renewedPem);
    const liveAgain = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 30_000);
    expect(ready(liveAgain)?.message).toContain(`served certificate ${renewedSerial} `);
    expect(serial(liveAgain.status?.certificate?.serialNumber)).toBe(renewedSerial);
  });
});
