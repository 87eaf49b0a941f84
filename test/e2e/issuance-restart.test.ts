/**
 * The backoff after a failed certificate attempt survives a restart (docs/customdomains.md,
 * "Issuance state"): the CA refuses a domain's order, the status records the failure as structured
 * fields (status.issuance), the operator is SIGKILLed (a crash, or a failover to another replica)
 * and a new one starts with nothing in memory, and no order for the domain reaches the CA before
 * the recorded next attempt. The orders are counted at the fault proxy in front of the real Pebble
 * (support/acme-fault-proxy.ts), which Pebble's own log could not tell apart per hostname.
 *
 * Before, the failure count, the backoff and the CA's Retry-After lived only in the operator's
 * memory: the new operator placed an order in its first reconcile, and this test fails so.
 *
 * The first retry comes 1 minute after a failure (docs/customdomains.md, "Schedules"); the test's
 * operators are told TEST_FIRST_RETRY_SECONDS instead, so the CA's Retry-After (30 s) is the later
 * of the two and sets the recorded next attempt. The first test watches until that time; with
 * PORTICO_E2E_SLOW=1 a second one waits for the attempt: one order after it, the domain Ready and
 * status.issuance removed (without it, that test is reported as skipped).
 */
import { describe, expect, it } from 'vitest';
import type { CustomDomain, IssuanceStatus } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  customDomainApi,
  dns,
  getCustomDomain,
  kube,
  sandbox,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { sleep, uniqueHostname, useProxiedOperator } from './support/proxied-operator.js';
import { SHORT_FIRST_RETRY, TEST_FIRST_RETRY_SECONDS } from './support/stack-controller.js';

const target = sandbox.platformCnameTarget;
const SLOW = process.env.PORTICO_E2E_SLOW === '1';
/** The first retry of a failed order, as the test's operators are told (`--issuance-first-retry-seconds`). */
const FIRST_RETRY_MS = TEST_FIRST_RETRY_SECONDS * 1000;
/** Timers may fire a little early against another process's clock; never more than this, ms. */
const CLOCK_SLACK_MS = 1_000;

/** A short Lease, so that the next operator takes over the SIGKILLed one's within seconds. */
const LEADER_ELECTION = {
  '--leader-election-lease-duration-seconds': '6',
  '--leader-election-renew-deadline-seconds': '4',
  '--leader-election-retry-period-seconds': '1',
};

const faults = useProxiedOperator('issuance-restart', { ...LEADER_ELECTION, ...SHORT_FIRST_RETRY });

function certificateReadyMessage(cd: CustomDomain): string {
  return cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
}

/** Changes the domain's spec without changing what it means (port 80 is the default): a new generation. */
async function bumpGeneration(namespace: string, name: string): Promise<number> {
  const patched = (await kube().custom.patchNamespacedCustomObject({
    ...customDomainApi,
    namespace,
    name,
    body: [{ op: 'add', path: '/spec/service/port', value: 80 }],
  })) as CustomDomain;
  return patched.metadata.generation ?? 0;
}

describe('a restart during the backoff', () => {
  let recorded: { ns: string; hostname: string; nextAttempt: number } | undefined;

  it('records the failure in status, and the new operator places no order before the recorded next attempt', async () => {
    const { ns, hostname } = uniqueHostname('restart');
    const retryAfterSeconds = 30;
    const detail = 'too many new orders recently (acme-fault-proxy)';
    await createProject(ns);
    await dns.setCname(hostname, target);
    const newOrders = (): number => faults.exchangesFor(hostname, 'new-order').length;
    // One refusal: the CA would take the next order, so only the backoff keeps it away.
    faults.proxy().refuse((x) => x.kind === 'new-order' && x.hostnames.includes(hostname), {
      retryAfterSeconds,
      detail,
      times: 1,
    });
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });

    const failed = await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CARateLimited', 60_000);
    const refused = faults.exchangesFor(hostname, 'new-order')[0];
    if (!refused?.answeredAt) throw new Error('the refused order is not in the proxy log');
    const issuance = failed.status?.issuance;
    if (!issuance) throw new Error(`no status.issuance: ${JSON.stringify(failed.status)}`);
    // The structured fields: one failure, when and why, the CA's Retry-After, the next attempt.
    expect(issuance).toEqual({
      failedAttempts: 1,
      lastFailureTime: expect.any(String) as string,
      lastFailureReason: 'CARateLimited',
      lastFailureMessage: expect.stringContaining(detail) as string,
      nextAttemptTime: expect.any(String) as string,
      retryAfter: expect.any(String) as string,
    } satisfies Record<keyof IssuanceStatus, unknown>);
    const failedAt = Date.parse(issuance.lastFailureTime);
    const nextAttempt = Date.parse(issuance.nextAttemptTime);
    const retryAfter = Date.parse(issuance.retryAfter ?? '');
    expect(failedAt).toBeGreaterThanOrEqual(refused.answeredAt - CLOCK_SLACK_MS);
    expect(retryAfter).toBeGreaterThanOrEqual(refused.answeredAt + retryAfterSeconds * 1000 - CLOCK_SLACK_MS);
    // The later of the backoff (FIRST_RETRY_MS after the first failure) and the CA's Retry-After.
    expect(nextAttempt).toBe(Math.max(failedAt + FIRST_RETRY_MS, retryAfter));
    expect(certificateReadyMessage(failed)).toContain(`Next attempt at ${issuance.nextAttemptTime}`);
    expect(newOrders()).toBe(1);

    // A crash (or a failover): the next operator knows nothing of the failure but what status says.
    await faults.replace({ kill: true });
    // A spec change that means the same: once observedGeneration shows it, the new operator has
    // reconciled the domain, certificate part included.
    const generation = await bumpGeneration(ns, 'www');
    const seen = await waitFor(
      'the new operator to reconcile the domain',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        return cd.status?.observedGeneration === generation ? cd : undefined;
      },
      30_000,
    );
    expect(seen.status?.issuance).toEqual(issuance);
    expect(certificateReadyMessage(seen)).toContain(`Next attempt at ${issuance.nextAttemptTime}`);

    const quietUntil = nextAttempt - CLOCK_SLACK_MS;
    while (Date.now() < quietUntil) {
      expect(newOrders(), 'an order reached the CA before the recorded next attempt').toBe(1);
      await sleep(Math.min(250, Math.max(0, quietUntil - Date.now())));
    }
    expect(newOrders()).toBe(1);
    recorded = { ns, hostname, nextAttempt };
  }, 180_000);

  it.skipIf(!SLOW)(
    'then places one order at the recorded next attempt and clears the failure (slow)',
    async () => {
      if (!recorded) throw new Error('the test before this one did not get to the recorded next attempt');
      const { ns, hostname, nextAttempt } = recorded;
      // The recorded next attempt comes: one order, the certificate, and the failure state cleared.
      const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
      const orders = faults.exchangesFor(hostname, 'new-order');
      expect(orders.map((x) => x.status)).toEqual([429, 201]);
      expect(orders[1]?.at ?? 0).toBeGreaterThanOrEqual(nextAttempt - CLOCK_SLACK_MS);
      expect(live.status?.issuance).toBeUndefined();
    },
    180_000,
  );
});
