/**
 * The CA rejects nonces and answers 5xx (docs/reliability.md, "Custom domains: faults of the parts
 * Portico depends on"): retries are bounded, the status says when the next attempt is, and other
 * domains are unaffected. And renewal orders: one per renewal, and one refused for its `replaces`
 * is placed again without it.
 *
 * The faults come from the fault proxy in front of the real Pebble, per hostname, so that one
 * domain's fault can be told from another's: `400 urn:ietf:params:acme:error:badNonce` with a
 * fresh nonce of Pebble's in `Replay-Nonce` (RFC 8555 §6.5; what Pebble's PEBBLE_WFE_NONCEREJECT
 * answers, but for every request of one name rather than a random share of all), and
 * `500 serverInternal` / `503` (RFC 8555 §6.7). The sandbox's Pebble runs with
 * PEBBLE_WFE_NONCEREJECT=0, and restarting it would lose its accounts and orders.
 *
 * With PORTICO_E2E_SLOW=1 a second test of each case also waits for the next attempt (the test's
 * operator retries a failed order first after TEST_FIRST_RETRY_SECONDS, where production waits a
 * minute) and checks that it comes no sooner than the status said and gets the certificate; without
 * it, that test is reported as skipped.
 */
import { describe, expect, it } from 'vitest';
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
import type { AcmeExchange, AcmeRequestKind } from './support/acme-fault-proxy.js';
import { sleep, useProxiedOperator } from './support/proxied-operator.js';
import { SHORT_FIRST_RETRY, TEST_FIRST_RETRY_SECONDS } from './support/stack-controller.js';

const target = sandbox.platformCnameTarget;
const SLOW = process.env.PORTICO_E2E_SLOW === '1';
/** The first retry of a failed order, as the test's operator is told (`--issuance-first-retry-seconds`). */
const FIRST_RETRY_MS = TEST_FIRST_RETRY_SECONDS * 1000;
/** Timers may fire a little early against another process's clock; never more than this, ms. */
const CLOCK_SLACK_MS = 1_000;
/** acme-client retries a badNonce answer this many times (acme-client 5, src/http.js). */
const BAD_NONCE_RETRIES = 5;
const BAD_NONCE = 'urn:ietf:params:acme:error:badNonce';
const SERVER_INTERNAL = 'urn:ietf:params:acme:error:serverInternal';

const faults = useProxiedOperator('ca-errors', SHORT_FIRST_RETRY);

/** A project with one CustomDomain per label, each CNAMEd to the target; returns the hostnames. */
async function domains(ns: string, labels: readonly string[]): Promise<Record<string, string>> {
  await createProject(ns);
  const hostnames: Record<string, string> = {};
  for (const label of labels) {
    const hostname = `${label}.${ns}.example`;
    hostnames[label] = hostname;
    await dns.setCname(hostname, target);
  }
  return hostnames;
}

function create(ns: string, label: string, hostname: string): Promise<void> {
  return createCustomDomain(ns, label, { hostname, service: { name: 'web' } });
}

function matching(kind: AcmeRequestKind, hostname: string): (x: AcmeExchange) => boolean {
  return (x) => x.kind === kind && x.hostnames.includes(hostname);
}

/** The CertificateReady message of a failed attempt, and the next attempt time it announces (epoch ms). */
function failure(cd: CustomDomain): { message: string; nextAttempt: number } {
  const message = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
  return { message, nextAttempt: Date.parse(/Next attempt at (\S+?Z)/.exec(message)?.[1] ?? '') };
}

/** 5 s, or less when the next attempt announced at `nextAttempt` (epoch ms) comes sooner. */
function beforeNext(nextAttempt: number): number {
  return Math.min(5_000, nextAttempt - CLOCK_SLACK_MS - Date.now());
}

/** What the first test of a case hands its slow second half (undefined: it did not get that far). */
interface FailedAttempt {
  ns: string;
  stop: () => void;
}

/**
 * Waits `ms` and checks that no request of `kind` for `hostname` came meanwhile: the failed
 * attempt is over and nothing is retried before its time.
 */
async function quietFor(ms: number, kind: AcmeRequestKind, hostname: string): Promise<void> {
  const before = faults.exchangesFor(hostname, kind).length;
  await sleep(Math.max(0, ms));
  expect(faults.exchangesFor(hostname, kind)).toHaveLength(before);
}

describe('the CA rejects nonces', () => {
  let failedA: (FailedAttempt & { hostname: string; firstAttempt: number; nextAttempt: number }) | undefined;

  it('retries a rejected nonce a bounded number of times, says when it tries again, and lets the others issue', async () => {
    const ns = unique('badnonce');
    const h = await domains(ns, ['a', 'b', 'c']);
    const a = h.a ?? '';
    const b = h.b ?? '';
    const c = h.c ?? '';
    const detail = 'JWS has an invalid anti-replay nonce (acme-fault-proxy)';
    const badNonce = { status: 400, type: BAD_NONCE, detail, replayNonce: true } as const;
    // A: every new-order is refused. B: the first two only (a CA that drops nonces now and then).
    const always = faults.proxy().refuse(matching('new-order', a), badNonce);
    faults.proxy().refuse(matching('new-order', b), { ...badNonce, times: 2 });
    for (const [label, hostname] of Object.entries(h)) await create(ns, label, hostname);

    // B: the rejected nonces are retried with the fresh ones, within the same attempt.
    await waitForCondition(ns, 'b', 'Ready', 'True', undefined, 50_000);
    expect(faults.exchangesFor(b, 'new-order').map((x) => x.status)).toEqual([400, 400, 201]);
    await waitForCondition(ns, 'c', 'Ready', 'True', undefined, 60_000);
    expect(faults.exchangesFor(c, 'new-order').map((x) => x.status)).toEqual([201]);

    // A: the attempt gives up after a bounded number of retries, and the status says when it
    // tries again.
    const failed = await waitForCondition(ns, 'a', 'CertificateReady', 'False', 'IssuanceFailed', 60_000);
    const { message, nextAttempt } = failure(failed);
    expect(message).toContain(detail);
    expect(nextAttempt).toBeGreaterThan(Date.now());
    await quietFor(beforeNext(nextAttempt), 'new-order', a);
    const firstAttempt = faults.exchangesFor(a, 'new-order');
    expect(firstAttempt.map((x) => x.status)).toEqual(Array<number>(1 + BAD_NONCE_RETRIES).fill(400));
    failedA = {
      ns,
      hostname: a,
      stop: () => {
        always.stop();
      },
      firstAttempt: firstAttempt.length,
      nextAttempt,
    };
  }, 300_000);

  it.skipIf(!SLOW)(
    'then, once the CA takes the nonces again, issues on the announced next attempt (slow)',
    async () => {
      if (!failedA) throw new Error('the test before this one did not see the failed attempt');
      const { ns, hostname, firstAttempt, nextAttempt } = failedA;
      failedA.stop();
      await waitForCondition(ns, 'a', 'Ready', 'True', undefined, 4 * FIRST_RETRY_MS + 60_000);
      const retried = faults.exchangesFor(hostname, 'new-order').slice(firstAttempt);
      // The retries that came while the fault still stood are all refused; the first after it, taken.
      expect(retried.at(-1)?.status).toBe(201);
      expect(retried.slice(0, -1).every((x) => x.status === 400)).toBe(true);
      expect(retried[0]?.at ?? 0).toBeGreaterThanOrEqual(nextAttempt - CLOCK_SLACK_MS);
    },
    300_000,
  );
});

describe('the CA answers 5xx', () => {
  let failed: (FailedAttempt & { nextA: number; nextB: number; a: string; b: string }) | undefined;

  it('retries a bounded number of times, says when it tries again, and lets the others issue', async () => {
    const ns = unique('ca5xx');
    const h = await domains(ns, ['a', 'b', 'c']);
    const a = h.a ?? '';
    const b = h.b ?? '';
    const c = h.c ?? '';
    // A: its finalize fails inside the CA. B: the CA is unavailable for its new orders.
    const internal = faults.proxy().refuse(matching('finalize', a), {
      status: 500,
      retryAfterSeconds: 1,
      type: SERVER_INTERNAL,
      detail: 'the CA failed to finalize (acme-fault-proxy)',
    });
    const unavailable = faults.proxy().refuse(matching('new-order', b), {
      status: 503,
      retryAfterSeconds: 1,
      type: SERVER_INTERNAL,
      detail: 'the CA is unavailable (acme-fault-proxy)',
    });
    for (const [label, hostname] of Object.entries(h)) await create(ns, label, hostname);

    await waitForCondition(ns, 'c', 'Ready', 'True', undefined, 60_000);
    expect(faults.exchangesFor(c, 'new-order').map((x) => x.status)).toEqual([201]);
    const failedA = await waitForCondition(ns, 'a', 'CertificateReady', 'False', 'IssuanceFailed', 60_000);
    const failedB = await waitForCondition(ns, 'b', 'CertificateReady', 'False', 'IssuanceFailed', 60_000);
    const nextA = failure(failedA);
    const nextB = failure(failedB);
    expect(nextA.message).toContain('the CA failed to finalize (acme-fault-proxy)');
    expect(nextB.message).toContain('the CA is unavailable (acme-fault-proxy)');
    expect(nextA.nextAttempt).toBeGreaterThan(Date.now());
    expect(nextB.nextAttempt).toBeGreaterThan(Date.now());
    await quietFor(beforeNext(Math.min(nextA.nextAttempt, nextB.nextAttempt)), 'new-order', a);
    // The answer ends the attempt: a signed request is not replayed (its nonce is spent; a real CA
    // would answer the replay badNonce and the CA's own answer would be lost).
    expect(faults.exchangesFor(a, 'new-order').map((x) => x.status)).toEqual([201]);
    expect(faults.exchangesFor(a, 'finalize').map((x) => x.status)).toEqual([500]);
    expect(faults.exchangesFor(b, 'new-order').map((x) => x.status)).toEqual([503]);
    failed = {
      ns,
      a,
      b,
      nextA: nextA.nextAttempt,
      nextB: nextB.nextAttempt,
      stop: () => {
        internal.stop();
        unavailable.stop();
      },
    };
  }, 300_000);

  it.skipIf(!SLOW)(
    'then, once the CA answers again, issues on the announced next attempts (slow)',
    async () => {
      if (!failed) throw new Error('the test before this one did not see the failed attempts');
      const { ns, a, b, nextA, nextB } = failed;
      failed.stop();
      await waitForCondition(ns, 'a', 'Ready', 'True', undefined, 4 * FIRST_RETRY_MS + 60_000);
      await waitForCondition(ns, 'b', 'Ready', 'True', undefined, 4 * FIRST_RETRY_MS + 60_000);
      const secondA = faults.exchangesFor(a, 'new-order')[1];
      const secondB = faults.exchangesFor(b, 'new-order')[1];
      expect(secondA?.at ?? 0).toBeGreaterThanOrEqual(nextA - CLOCK_SLACK_MS);
      expect(secondB?.at ?? 0).toBeGreaterThanOrEqual(nextB - CLOCK_SLACK_MS);
      // Retries that came while the fault still stood failed as the first did; the last one issued.
      const finalizes = faults.exchangesFor(a, 'finalize').map((x) => x.status);
      expect(finalizes.at(-1)).toBe(200);
      expect(finalizes.slice(0, -1).every((x) => x === 500)).toBe(true);
      const ordersB = faults.exchangesFor(b, 'new-order').map((x) => x.status);
      expect(ordersB.at(-1)).toBe(201);
      expect(ordersB.slice(0, -1).every((x) => x === 503)).toBe(true);
    },
    300_000,
  );
});

describe('renewal orders', () => {
  /** Moves the ARI window of the domain's certificate into the past and asks for a re-check. */
  async function renewNow(ns: string, label: string): Promise<CustomDomain> {
    const before = await getCustomDomain(ns, label);
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: `${label}-tls` });
    await renewalWindowInThePast(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8'));
    await requestVerify(ns, label, `renew-${Date.now()}`);
    return before;
  }

  async function renewed(ns: string, label: string, serialNumber: string | undefined): Promise<void> {
    await waitFor('a new certificate in status', async () => {
      const cd = await getCustomDomain(ns, label);
      return cd.status?.certificate?.serialNumber !== serialNumber ? cd : undefined;
    });
  }

  /** A project named after `prefix` with one Ready domain `a`; returns the namespace and hostname. */
  async function readyDomain(prefix: string): Promise<{ ns: string; a: string }> {
    const ns = unique(prefix);
    const a = (await domains(ns, ['a'])).a ?? '';
    await create(ns, 'a', a);
    await waitForCondition(ns, 'a', 'Ready', 'True', undefined, 60_000);
    return { ns, a };
  }

  it('orders one renewal, naming the certificate it replaces, and none more once it is stored', async () => {
    const { ns, a } = await readyDomain('renewonce');
    const before = await renewNow(ns, 'a');
    await renewed(ns, 'a', before.status?.certificate?.serialNumber);
    // The order settles and re-queues the domain before the Secret's watch event arrives: the
    // certificate being renewed, still in the cache, must not be renewed a second time.
    await quietFor(5_000, 'new-order', a);
    const orders = faults.exchangesFor(a, 'new-order');
    expect(orders.map((x) => x.status)).toEqual([201, 201]);
    expect(orders.map((x) => x.replaces)).toEqual([undefined, before.status?.certificate?.ari?.certId]);
  }, 120_000);

  it('places a renewal the CA refuses for its replaces again at once without it', async () => {
    const { ns, a } = await readyDomain('replaces');
    faults
      .proxy()
      .refuse((x) => x.kind === 'new-order' && x.hostnames.includes(a) && x.replaces !== undefined, {
        status: 409,
        type: 'urn:ietf:params:acme:error:alreadyReplaced',
        detail: 'the certificate already has a replacement order (acme-fault-proxy)',
      });
    const before = await renewNow(ns, 'a');
    await renewed(ns, 'a', before.status?.certificate?.serialNumber);
    const orders = faults.exchangesFor(a, 'new-order');
    expect(orders.map((x) => x.status)).toEqual([201, 409, 201]);
    expect(orders.map((x) => x.replaces)).toEqual([
      undefined,
      before.status?.certificate?.ari?.certId,
      undefined,
    ]);
    const after = await getCustomDomain(ns, 'a');
    expect(after.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  }, 120_000);
});
