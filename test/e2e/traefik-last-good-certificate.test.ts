/**
 * A Secret that cannot serve is never served in place of the last good certificate
 * (docs/customdomains.md, "The last good certificate"), seen through a real Traefik: the domain's
 * Secret is overwritten as a tenant or a tool would (garbage over its data; another domain's real
 * certificate, written as a new object without Portico's labels) and deleted, and each time a TLS
 * handshake with the hostname as SNI must present the last good serial again, with no new order.
 * How long each took, and what Traefik presented meanwhile, is printed, not asserted.
 *
 * What this file starts, and stops in `afterAll` (the stack is left as found): a Traefik of its own
 * and an operator of its own on the stack's Pebble with the `traefik` flavor and the serving check
 * on Traefik (the stack's operator is stopped meanwhile), a real backend for the project's Service,
 * and its namespace. Cases Pebble cannot produce (an issued certificate with a broken chain, for
 * another name, with the wrong key, expired) are unit tests: src/certificates/secret-problem.test.ts
 * and src/controllers/customdomain/phases/issuance.test.ts.
 */
import { X509Certificate } from 'node:crypto';
import type { Server } from 'node:http';
import type { CoreV1Event, V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { closeServer, startProjectBackend } from '../../src/sandbox/project-backend.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  traefikOperatorFlags,
  TRAEFIK_INGRESS_CLASS,
  type StartedTraefik,
} from '../../src/data-planes/traefik/sandbox-process.js';
import { lastGoodSecretName } from '../../src/controllers/customdomain/last-good-certificates.js';
import {
  createCustomDomain,
  domainEvents,
  deleteCreatedDomains,
  GARBAGE_TLS_DATA,
  overwriteSecretData,
  dns,
  getCustomDomain,
  kube,
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
  createProjectWithBackend,
  pebbleRoot,
  startStackTraefik,
  stopStackTraefik,
  tlsHandshake,
} from './support/traefik.js';

const LOG = 'traefik-last-good-certificate';
const ns = unique('lastgood');
const primary = `www.${ns}.example`;
const other = `other.${ns}.example`;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let traefik: StartedTraefik | undefined;
let backend: Server | undefined;
let root = '';
let goodSerial = '';
const created: { namespace: string; name: string }[] = [];

function https(): string {
  if (!traefik) throw new Error('Traefik did not start');
  return traefik.httpsAddr;
}

/** A serial as status writes it: uppercase hex without leading zeros. */
function serialOf(value: string | undefined): string {
  return (value ?? '').toUpperCase().replace(/^0+/, '');
}

/** The serial of the leaf in `secret`'s tls.crt, or what is there instead. */
function secretSerial(secret: V1Secret | undefined): string {
  if (!secret) return '(no Secret)';
  try {
    const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    return serialOf(new X509Certificate(pem).serialNumber);
  } catch {
    return '(not a certificate)';
  }
}

async function readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
  try {
    return await kube().core.readNamespacedSecret({ namespace, name });
  } catch {
    return undefined;
  }
}

/** What Traefik presents for SNI `primary`: the serial, or the subject of a certificate that is not the issued one. */
async function presented(): Promise<string> {
  try {
    const handshake = await tlsHandshake(https(), primary, root);
    const serial = serialOf(handshake.certificate.serialNumber);
    return serial === goodSerial ? serial : `${serial} (CN=${String(handshake.certificate.subject.CN)})`;
  } catch (err) {
    return `no handshake: ${(err as Error).message}`;
  }
}

/**
 * Runs `tamper` on the domain's Secret, then samples what Traefik presents by SNI (every 50 ms)
 * until both the Secret and the handshake hold the last good serial again; prints how long each
 * took and every other answer seen meanwhile. Resolves the CertificateRestored Event recorded since.
 */
async function tamperAndWatch(what: string, tamper: () => Promise<void>): Promise<CoreV1Event> {
  const before = new Set((await domainEvents(ns, 'www')).map((e) => e.metadata?.uid));
  const seen: string[] = [];
  const started = Date.now();
  await tamper();
  let secretBackMs: number | undefined;
  await waitFor(
    `${primary}'s Secret and Traefik's handshake to hold serial ${goodSerial} again after ${what}`,
    async () => {
      if (secretBackMs === undefined && secretSerial(await readSecret(ns, 'www-tls')) === goodSerial)
        secretBackMs = Date.now() - started;
      const now = await presented();
      if (now !== goodSerial && seen.at(-1)?.endsWith(now) !== true)
        seen.push(`${Date.now() - started} ms: ${now}`);
      return secretBackMs !== undefined && now === goodSerial ? true : undefined;
    },
    60_000,
    50,
  );
  process.stdout.write(
    `${LOG}: ${what}: Secret holds serial ${goodSerial} again after ${secretBackMs} ms; Traefik presents it by SNI after ${Date.now() - started} ms; meanwhile presented: ${seen.length === 0 ? 'only the last good certificate' : seen.join('; ')}\n`,
  );
  return waitFor(
    `a CertificateRestored Event on www after ${what}`,
    async () =>
      (await domainEvents(ns, 'www')).find(
        (e) => !before.has(e.metadata?.uid) && e.reason === 'CertificateRestored',
      ),
    20_000,
  );
}

beforeAll(async () => {
  const started = await startProjectBackend(ns);
  backend = started.server;
  traefik = await startStackTraefik();
  root = await pebbleRoot();
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, LOG, traefikOperatorFlags(TRAEFIK_INGRESS_CLASS, traefik.httpsAddr));
  await createProjectWithBackend(ns, started.port);
  for (const [name, hostname] of [
    ['www', primary],
    ['other', other],
  ] as const) {
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, name, { hostname, service: { name: 'web', port: 80 } });
    created.push({ namespace: ns, name });
  }
  for (const name of ['www', 'other']) await waitForCondition(ns, name, 'Ready', 'True', undefined, 180_000);
  goodSerial = serialOf((await getCustomDomain(ns, 'www')).status?.certificate?.serialNumber);
  await waitFor(`Traefik to present ${goodSerial} for ${primary}`, async () =>
    (await presented()) === goodSerial ? true : undefined,
  );
}, 300_000);

afterAll(async () => {
  await runAll(
    () => deleteCreatedDomains(created, LOG),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
    () => stopStackTraefik(),
    async () => {
      if (backend) await closeServer(backend);
    },
    () =>
      kube()
        .core.deleteNamespace({ name: ns })
        .then(() => undefined),
  );
}, 180_000);

describe('the last good certificate, kept where the tenant cannot write', () => {
  it("is a copy of the issued certificate in the operator's namespace, named by the domain's uid", async () => {
    const cd = await getCustomDomain(ns, 'www');
    const copy = await readSecret(OPERATOR_NAMESPACE, lastGoodSecretName(cd.metadata.uid ?? ''));
    expect(copy?.type).toBe('kubernetes.io/tls');
    expect(secretSerial(copy)).toBe(goodSerial);
    expect(copy?.metadata?.labels?.['portico.dev/last-good-certificate']).toBe('true');
    expect(copy?.metadata?.annotations?.['portico.dev/last-good-certificate-of']).toBe(`${ns}/www`);
  });
});

describe('a Secret that cannot serve is given the last good certificate back (through Traefik, by SNI)', () => {
  it('garbage written over tls.crt and tls.key, labels kept (an edit by hand)', async () => {
    const event = await tamperAndWatch('garbage over the data', () =>
      overwriteSecretData(ns, 'www-tls', GARBAGE_TLS_DATA),
    );
    expect(event.type).toBe('Warning');
    expect(event.message).toContain(
      'Secret www-tls has no tls.crt and tls.key that parse as a certificate and its key: restored the last good certificate',
    );
    // The Event writes the serial as the certificate holds it, a leading zero kept; goodSerial has none.
    expect(event.message).toMatch(new RegExp(`\\(serial 0*${goodSerial}, valid until `));
    expect(event.message).toContain(`in Secret ${OPERATOR_NAMESPACE}/portico-last-good-`);
  });

  it("another domain's real certificate and key, written as a new object without Portico's labels (a tool)", async () => {
    const otherSecret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'other-tls' });
    const otherSerial = secretSerial(otherSecret);
    expect(otherSerial).not.toBe(goodSerial);
    const event = await tamperAndWatch(`${other}'s certificate (serial ${otherSerial})`, async () => {
      await kube().core.replaceNamespacedSecret({
        namespace: ns,
        name: 'www-tls',
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'www-tls', namespace: ns },
          type: 'kubernetes.io/tls',
          data: otherSecret.data ?? {},
        },
      });
    });
    expect(event.message).toContain(`Secret www-tls holds a certificate for ${other}, not ${primary}`);
    const restored = await readSecret(ns, 'www-tls');
    expect(restored?.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('portico');
  });

  it('the Secret deleted', async () => {
    const event = await tamperAndWatch('the Secret deleted', async () => {
      await kube().core.deleteNamespacedSecret({ namespace: ns, name: 'www-tls' });
    });
    expect(event.message).toContain('Secret www-tls was deleted: restored the last good certificate');
  });

  it('was restored, not re-issued: the status still names the same certificate, and no order failed or started', async () => {
    const cd = await getCustomDomain(ns, 'www');
    expect(serialOf(cd.status?.certificate?.serialNumber)).toBe(goodSerial);
    expect(cd.status?.conditions?.find((c) => c.type === 'CertificateReady')).toMatchObject({
      status: 'True',
      reason: 'Issued',
    });
    const reissuing = (await domainEvents(ns, 'www')).filter((e) => e.reason === 'Reissuing');
    expect(reissuing).toEqual([]);
    expect(await presented()).toBe(goodSerial);
  });
});
