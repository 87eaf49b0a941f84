/**
 * `--acme-profile` on the real stack: the operator's orders name the ACME profile
 * (draft-ietf-acme-profiles), and the certificate follows it. Pebble picks a random profile for an
 * order that names none, so the stack's own Pebble offers one 90-day profile; this file starts a
 * second Pebble offering `default` (90 days) and `shortlived` (160 hours, like Let's Encrypt's), and
 * its own operator pointed at it with `--acme-profile shortlived`, while the stack's operator is
 * stopped so only one operator reconciles. Nothing is mocked: the CA, the DNS server and the API
 * server are the real processes.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Agent } from 'node:https';
import * as acme from 'acme-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNT_KEY_FIELD } from '../../src/acme/account.js';
import { CERTIFICATE_VALIDITY_SECONDS, type PebbleProfile } from '../../src/sandbox/pebble.js';
import { httpGet } from '../../src/sandbox/readiness.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getPebble,
  kube,
  sandbox,
  unique,
  waitForCondition,
  deleteCreatedDomains,
} from './support/cluster.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  restartStackController,
  operatorLogLines,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
  runAll,
} from './support/stack-controller.js';

/** Validity of the `shortlived` profile, in seconds: 160 hours. */
const SHORTLIVED_SECONDS = 160 * 60 * 60;
const PROFILES: Record<string, PebbleProfile> = {
  default: { description: '90-day certificates', validityPeriod: CERTIFICATE_VALIDITY_SECONDS },
  shortlived: { description: '160-hour certificates', validityPeriod: SHORTLIVED_SECONDS },
};
const PEBBLE_NAME = 'pebble-profiles';

let stack: ControllerCommand | undefined;
let pebble: SecondPebble | undefined;
let operator: OperatorProcess | undefined;
/** CustomDomains to delete (while an operator runs to clear their finalizers) before the stack operator returns. */
const created: { namespace: string; name: string }[] = [];

/** Starts this file's operator on the second Pebble with `--acme-profile profile`, stopping any previous one. */
async function runOperator(name: string, profile: string): Promise<OperatorProcess> {
  if (!stack || !pebble)
    throw new Error('the stack operator is not stopped or the second Pebble not started');
  if (operator) await stopOperator(operator);
  operator = await startOperator(stack, name, {
    '--acme-directory-url': pebble.directoryUrl,
    '--acme-profile': profile,
    '--http01-listen-address': `127.0.0.1:${pebble.httpPort}`,
    '--http01-self-check-port': String(pebble.httpPort),
  });
  return operator;
}

/** A project with a CNAME to the platform and a CustomDomain `www` for `www.<namespace>.example`. */
async function domainFor(prefix: string): Promise<{ namespace: string; hostname: string }> {
  const namespace = unique(prefix);
  const hostname = `www.${namespace}.example`;
  await createProject(namespace);
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(namespace, 'www', { hostname, service: { name: 'web' } });
  created.push({ namespace, name: 'www' });
  return { namespace, hostname };
}

/** The certificates of a PEM chain, leaf first. */
function splitPem(chain: string): X509Certificate[] {
  return (chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (pem) => new X509Certificate(pem),
  );
}

/**
 * The order at `orderUrl` as the CA holds it (POST-as-GET, RFC 8555 §6.3), read with the operator's
 * own account key from its Secret. acme-client's HTTP client gets the sandbox's Pebble listener CA
 * for the duration of the call.
 */
async function orderAtCa(directoryUrl: string, orderUrl: string): Promise<acme.Order & { profile?: string }> {
  const secret = await kube().core.readNamespacedSecret({
    namespace: OPERATOR_NAMESPACE,
    name: 'portico-acme-account',
  });
  const accountKey = Buffer.from(secret.data?.[ACCOUNT_KEY_FIELD] ?? '', 'base64');
  const previous: unknown = acme.axios.defaults.httpsAgent;
  acme.axios.defaults.httpsAgent = new Agent({ ca: await readFile(sandbox.acmeCaBundle) });
  try {
    const client = new acme.Client({ directoryUrl, accountKey });
    await client.createAccount({ onlyReturnExisting: true });
    return await client.getOrder({ url: orderUrl } as acme.Order);
  } finally {
    acme.axios.defaults.httpsAgent = previous;
  }
}

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  pebble = await startSecondPebble(PEBBLE_NAME, PROFILES);
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await deleteCreatedDomains(created, 'acme-profile');
    },
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => stopSecondPebble(PEBBLE_NAME),
    () => restartStackController(stack),
  );
});

describe('--acme-profile shortlived', () => {
  it("lists both profiles in the second Pebble's directory", async () => {
    const answer = await httpGet(pebble?.directoryUrl ?? '', { ca: await readFile(sandbox.acmeCaBundle) });
    expect(answer.status).toBe(200);
    const directory = JSON.parse(answer.body) as { meta?: { profiles?: Record<string, string> } };
    expect(Object.keys(directory.meta?.profiles ?? {}).sort()).toEqual(['default', 'shortlived']);
  });

  it(
    'orders with profile shortlived and stores a certificate that lasts 160 hours, not 90 days',
    { timeout: 300_000 },
    async () => {
      const op = await runOperator('acme-profile', 'shortlived');
      const { namespace, hostname } = await domainFor('profile');
      const cd = await waitForCondition(namespace, 'www', 'Ready', 'True', undefined, 180_000);
      expect(cd.status?.phase).toBe('Live');

      const secret = await kube().core.readNamespacedSecret({ namespace, name: 'www-tls' });
      const [leaf, ...intermediates] = splitPem(
        Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8'),
      );
      if (!leaf) throw new Error('no certificate in tls.crt');
      expect(leaf.checkHost(hostname)).toBe(hostname);
      // RFC 5280 §4.1.2.5: the validity period includes both notBefore and notAfter, hence the second.
      const validitySeconds = (Date.parse(leaf.validTo) - Date.parse(leaf.validFrom)) / 1000 + 1;
      expect(validitySeconds).toBe(SHORTLIVED_SECONDS);
      expect(validitySeconds).toBeLessThan(CERTIFICATE_VALIDITY_SECONDS / 10);
      expect(Date.parse(cd.status?.certificate?.notAfter ?? '')).toBe(Date.parse(leaf.validTo));
      expect(cd.status?.certificate?.serialNumber).toBe(leaf.serialNumber);
      process.stdout.write(
        `acme-profile: leaf ${leaf.serialNumber} notBefore ${leaf.validFrom} notAfter ${leaf.validTo} (${validitySeconds} s)\n`,
      );

      // Issued by the second Pebble: the chain ends at its root, not at the stack Pebble's.
      const root = new X509Certificate(await getPebble(`${pebble?.managementUrl ?? ''}/roots/0`));
      const stackRoot = new X509Certificate(await getPebble(`${sandbox.acmeMgmtUrl}/roots/0`));
      const links = [leaf, ...intermediates];
      for (let i = 0; i < links.length - 1; i++) {
        expect(links[i]?.verify(links[i + 1]?.publicKey ?? root.publicKey)).toBe(true);
      }
      expect(links.at(-1)?.verify(root.publicKey)).toBe(true);
      expect(links.at(-1)?.verify(stackRoot.publicKey)).toBe(false);

      // The operator logged the profile it asked for and the one the CA put on the order, and the
      // CA's order object says the same.
      const [orderLine] = await operatorLogLines(op, 'ACME order created', (l) => l['hostname'] === hostname);
      expect(orderLine?.['profileRequested']).toBe('shortlived');
      expect(orderLine?.['profile']).toBe('shortlived');
      const orderUrl = String(orderLine?.['orderUrl']);
      expect(orderUrl.startsWith(new URL(pebble?.directoryUrl ?? '').origin)).toBe(true);
      const order = await orderAtCa(pebble?.directoryUrl ?? '', orderUrl);
      expect(order.profile).toBe('shortlived');
      expect(order.status).toBe('valid');
      expect(order.identifiers).toEqual([{ type: 'dns', value: hostname }]);
    },
  );

  it(
    'reports a profile the CA does not offer as IssuanceFailed, naming the profile',
    { timeout: 240_000 },
    async () => {
      await runOperator('acme-profile-unknown', 'nosuch');
      const { namespace } = await domainFor('noprofile');
      const cd = await waitForCondition(
        namespace,
        'www',
        'CertificateReady',
        'False',
        'IssuanceFailed',
        120_000,
      );
      expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.status).toBe('True');
      const message = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
      expect(message).toContain('"nosuch"');
      process.stdout.write(`acme-profile: unknown profile message: ${message}\n`);
    },
  );
});
