/**
 * Several ACME issuers (`--acme-issuers`) on the real stack: two more Pebbles beside the stack's
 * own, `pebble-fa` (no binding) and `pebble-fb` (external account binding required, RFC 8555
 * §7.3.4, Pebble's `externalAccountBindingRequired` with the sandbox's EAB key), both validating
 * HTTP-01 on the stack operator's challenge port, and this file's operator configured with them,
 * while the stack's operator is stopped so only one operator reconciles. Nothing is mocked: the
 * CAs, the DNS server and the API server are the real processes.
 *
 * - A wrong EAB HMAC key: every domain's CertificateReady says ExternalAccountBindingFailed with
 *   the CA's words, and the CA is not asked again and again (one newAccount per minute at most).
 * - With PORTICO_E2E_SLOW=1 (an order that failed when its CA stopped waits for the backoff's first
 *   retry, TEST_FIRST_RETRY_SECONDS for this file's operator): `pebble-fa` stopped mid-burst, every domain Ready, those
 *   ordered after the stop issued by `pebble-fb`, named in status.certificate.acmeIssuer.
 */
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_EAB_KEY, SANDBOX_PEBBLE_PROFILES } from '../../src/sandbox/pebble.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createServingDomain,
  deleteCreatedDomains,
  domainCondition,
  getCustomDomain,
  getPebble,
  kube,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  challengePort,
  restartStackController,
  runAll,
  operatorLogLines,
  operatorMetric,
  startOperator,
  stopOperator,
  stopStackController,
  SHORT_FIRST_RETRY,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const SLOW = process.env.PORTICO_E2E_SLOW === '1';
const FIRST = 'pebble-fa';
const SECOND = 'pebble-fb';
/** The Secrets of this file's EAB HMAC keys, in the operator's namespace. */
const GOOD_HMAC_SECRET = 'failover-eab-good';
const WRONG_HMAC_SECRET = 'failover-eab-wrong';

let stack: ControllerCommand | undefined;
let first: SecondPebble | undefined;
let second: SecondPebble | undefined;
let operator: OperatorProcess | undefined;
const created: { namespace: string; name: string }[] = [];
/** Account Secrets this file's operators created (a new account per run and CA). */
const accountSecrets: string[] = [];

async function createHmacSecret(name: string, hmacKey: string): Promise<void> {
  await kube().core.createNamespacedSecret({
    namespace: OPERATOR_NAMESPACE,
    body: { metadata: { name }, stringData: { 'hmac-key': hmacKey } },
  });
}

/** Starts this file's operator with `issuers` (the `--acme-issuers` list) and the failover flags. */
async function runOperator(
  name: string,
  issuers: unknown[],
  flags: Record<string, string> = {},
): Promise<OperatorProcess> {
  if (!stack) throw new Error('the stack operator is not stopped');
  if (operator) await stopOperator(operator);
  operator = await startOperator(stack, name, { '--acme-issuers': JSON.stringify(issuers), ...flags });
  return operator;
}

/** A unique account Secret per run, so each run registers fresh accounts at the new Pebbles. */
function accountSecret(suffix: string): string {
  const name = `failover-${suffix}-${Date.now().toString(36)}`;
  accountSecrets.push(name);
  return name;
}

async function serving(prefix: string): Promise<{ ns: string; hostname: string }> {
  const domain = await createServingDomain(prefix);
  created.push({ namespace: domain.ns, name: 'www' });
  return domain;
}

/** The leaf of the domain's Secret. */
async function leafOf(namespace: string): Promise<X509Certificate> {
  const secret = await kube().core.readNamespacedSecret({ namespace, name: 'www-tls' });
  const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
  const [leafPem] = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (!leafPem) throw new Error(`no certificate in ${namespace}/www-tls`);
  return new X509Certificate(leafPem);
}

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  const httpPort = challengePort(stack);
  first = await startSecondPebble(FIRST, SANDBOX_PEBBLE_PROFILES, { httpPort });
  second = await startSecondPebble(SECOND, SANDBOX_PEBBLE_PROFILES, {
    httpPort,
    externalAccountMacKeys: { [SANDBOX_EAB_KEY.keyId]: SANDBOX_EAB_KEY.hmacKey },
  });
  await createHmacSecret(GOOD_HMAC_SECRET, SANDBOX_EAB_KEY.hmacKey);
  // Another valid base64url key of the same length: a binding the CA cannot verify.
  await createHmacSecret(
    WRONG_HMAC_SECRET,
    Buffer.from('not the key the CA gave, 32 byte').toString('base64url'),
  );
}, 120_000);

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await deleteCreatedDomains(created, 'acme-failover');
    },
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => stopSecondPebble(FIRST),
    () => stopSecondPebble(SECOND),
    async () => {
      for (const name of [GOOD_HMAC_SECRET, WRONG_HMAC_SECRET, ...accountSecrets]) {
        await kube()
          .core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name })
          .catch(() => undefined);
      }
    },
    () => restartStackController(stack),
  );
}, 180_000);

describe('several ACME issuers', () => {
  it(
    'a wrong EAB HMAC key: ExternalAccountBindingFailed on every domain, and no newAccount loop',
    { timeout: 180_000 },
    async () => {
      const op = await runOperator('acme-failover-eab', [
        {
          name: 'eab-wrong',
          directoryUrl: second?.directoryUrl,
          externalAccountBinding: {
            keyId: SANDBOX_EAB_KEY.keyId,
            hmacKeySecretRef: { name: WRONG_HMAC_SECRET, key: 'hmac-key' },
          },
          accountSecretName: accountSecret('wrong'),
        },
      ]);
      const domains = await Promise.all([serving('eabw'), serving('eabw'), serving('eabw')]);
      for (const { ns } of domains) {
        const cd = await waitForCondition(
          ns,
          'www',
          'CertificateReady',
          'False',
          'ExternalAccountBindingFailed',
          90_000,
        );
        const message = domainCondition(cd, 'CertificateReady').message ?? '';
        expect(message).toContain("refused the account's external account binding");
        expect(message).toContain(SANDBOX_EAB_KEY.keyId);
        // The published backoff, not an immediate retry.
        const next = Date.parse(cd.status?.issuance?.nextAttemptTime ?? '');
        expect(next - Date.now()).toBeGreaterThan(30_000);
        expect(cd.status?.certificate).toBeUndefined();
      }
      // One registration for the three orders, kept refused: none more over the next 15 s.
      const before = await operatorMetric(op, 'portico_acme_requests_total', { endpoint: 'newAccount' });
      await new Promise((resolve) => setTimeout(resolve, 15_000));
      const after = await operatorMetric(op, 'portico_acme_requests_total', { endpoint: 'newAccount' });
      process.stdout.write(`acme-failover: newAccount requests ${before} then ${after} 15 s later\n`);
      expect(before).toBeGreaterThanOrEqual(1);
      expect(before).toBeLessThanOrEqual(3);
      expect(after).toBe(before);
      expect(
        await operatorMetric(op, 'portico_acme_issuer_orders_total', {
          ca: 'eab-wrong',
          result: 'ca-failure',
        }),
      ).toBe(domains.length);
      // The order budget counts the three orders under the issuer's name.
      expect(await operatorMetric(op, 'portico_acme_order_budget_used', { ca: 'eab-wrong' })).toBe(
        domains.length,
      );
      await deleteCreatedDomains(created, 'acme-failover');
    },
  );

  it.runIf(SLOW)(
    'the first CA stopped mid-burst: every domain Ready, those ordered after the stop from the second (slow)',
    { timeout: 480_000 },
    async () => {
      const op = await runOperator(
        'acme-failover-burst',
        [
          {
            name: FIRST,
            directoryUrl: first?.directoryUrl,
            accountSecretName: accountSecret('first'),
            // One order at a time, so the burst is still under way when the CA stops.
            orderBudget: { maxInFlight: 1 },
          },
          {
            name: SECOND,
            directoryUrl: second?.directoryUrl,
            externalAccountBinding: {
              keyId: SANDBOX_EAB_KEY.keyId,
              hmacKeySecretRef: { name: GOOD_HMAC_SECRET, key: 'hmac-key' },
            },
            accountSecretName: accountSecret('second'),
          },
        ],
        {
          '--acme-failover-after-failures': '1',
          '--acme-failover-pass-over-seconds': '3600',
          ...SHORT_FIRST_RETRY,
        },
      );
      const domains: { ns: string; hostname: string }[] = [];
      for (let i = 0; i < 6; i++) domains.push(await serving('burst'));
      // The burst is under way at the first CA: one domain has its certificate from it.
      const early = await waitFor(
        'a first domain Ready from the first CA',
        async () => {
          for (const { ns } of domains) {
            const cd = await getCustomDomain(ns, 'www');
            if (cd.status?.certificate?.acmeIssuer === FIRST) return ns;
          }
          return undefined;
        },
        60_000,
      );
      // The CAs' issuing intermediates, read while both run: each leaf is checked against its issuer's.
      const intermediates = new Map<string, X509Certificate>([
        [FIRST, new X509Certificate(await getPebble(`${first?.managementUrl ?? ''}/intermediates/0`))],
        [SECOND, new X509Certificate(await getPebble(`${second?.managementUrl ?? ''}/intermediates/0`))],
      ]);
      await stopSecondPebble(FIRST);
      const stoppedAt = Date.now();
      const byIssuer: Record<string, number> = {};
      for (const { ns, hostname } of domains) {
        const cd = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 300_000);
        const leaf = await leafOf(ns);
        expect(leaf.checkHost(hostname)).toBe(hostname);
        const acmeIssuer = cd.status?.certificate?.acmeIssuer ?? '';
        expect([FIRST, SECOND]).toContain(acmeIssuer);
        // status names the CA whose intermediate signed the leaf.
        const intermediate = intermediates.get(acmeIssuer);
        if (!intermediate) throw new Error(`${ns}: status.certificate.acmeIssuer is "${acmeIssuer}"`);
        expect(leaf.verify(intermediate.publicKey)).toBe(true);
        byIssuer[acmeIssuer] = (byIssuer[acmeIssuer] ?? 0) + 1;
      }
      const fromSecond = byIssuer[SECOND] ?? 0;
      process.stdout.write(
        `acme-failover: ${byIssuer[FIRST] ?? 0} of ${domains.length} from ${FIRST} (${early} first), ${fromSecond} from ${SECOND}; all Ready ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s after the stop\n`,
      );
      expect(byIssuer[FIRST] ?? 0).toBeGreaterThanOrEqual(1);
      expect(fromSecond).toBeGreaterThanOrEqual(1);
      const validFromSecond = (
        await operatorLogLines(op, 'ACME order valid; certificate downloaded', (entry) =>
          // The operator also reconciles what other files left in the cluster: this file's domains only.
          domains.some((d) => d.ns === entry['namespace']),
        )
      ).filter((entry) => entry['acmeIssuer'] === SECOND);
      expect(validFromSecond).toHaveLength(fromSecond);
      expect(
        await operatorMetric(op, 'portico_acme_issuer_orders_total', { ca: SECOND, result: 'valid' }),
      ).toBeGreaterThanOrEqual(fromSecond);
      expect(await operatorMetric(op, 'portico_acme_issuer_passed_over', { ca: FIRST })).toBe(1);
      expect(await operatorMetric(op, 'portico_acme_issuer_passed_over', { ca: SECOND })).toBe(0);
      // Each issuer's own order budget, by ca: the first's one order in flight, its orders and the
      // second's counted apart.
      expect(await operatorMetric(op, 'portico_acme_orders_in_flight_limit', { ca: FIRST })).toBe(1);
      expect(await operatorMetric(op, 'portico_acme_orders_in_flight_limit', { ca: SECOND })).toBeGreaterThan(
        1,
      );
      expect(
        await operatorMetric(op, 'portico_acme_order_budget_used', { ca: FIRST }),
      ).toBeGreaterThanOrEqual(byIssuer[FIRST] ?? 0);
      expect(
        await operatorMetric(op, 'portico_acme_order_budget_used', { ca: SECOND }),
      ).toBeGreaterThanOrEqual(fromSecond);
    },
  );
});
