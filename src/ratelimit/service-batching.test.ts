/**
 * RateLimitService with batched counts (batched-counts.ts; docs/ratelimits.md, "Checks far below
 * their limit: batched counts"), on a store in memory with the rules of both Redis scripts
 * (LocalCounterStore: the check script and the batch script), so that what reaches the store and
 * when is visible: far below the limit checks are answered without it, near the limit every check is
 * decided by it, bans stay exact, and the headers count what the replica admitted.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BATCH_SETTINGS,
  type BatchReply,
  type BatchSettings,
  type PendingBatch,
} from './batched-counts.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CompiledPolicy } from './config-schema.js';
import type { CounterOutcome } from './decision.js';
import { indexPolicy } from './limits.js';
import { LocalCounterStore } from './local-counts.js';
import { createRateLimitMetrics } from './metrics.js';
import type { PolicySnapshot } from './policy-set.js';
import type { RateLimitRequest } from './protocol.js';
import type { CounterKeys } from './redis-keys.js';
import { counterKeys } from './redis-keys.js';
import type { CheckArgs } from './redis-store.js';
import { RateLimitService } from './service.js';
import { currentWindows } from './windows.js';

/** 2026-11-22T12:34:10Z: 50 s to the end of the minute. */
const NOW = Date.parse('2026-11-22T12:34:10.000Z');
const DOMAIN = 'platform-api/public-api';

function policyWith(perMinute: number, perDay: number, ban = false): PolicySnapshot {
  const policy: CompiledPolicy = {
    domain: DOMAIN,
    uid: 'u1',
    generation: 1,
    plans: [{ name: 'free', requestsPerMinute: perMinute, requestsPerDay: perDay }],
    defaultPlan: 'free',
    overrides: [],
    ...(ban ? { ban: { afterRejectedRequests: 2, durationSeconds: 900 } } : {}),
  };
  return { byDomain: new Map([[DOMAIN, indexPolicy(policy)]]) };
}

/** The store, counting the checks it decided. */
class CountingStore extends LocalCounterStore {
  checks = 0;
  override checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    this.checks += 1;
    return super.checkAndCount(keys, args);
  }
}

/**
 * Redis as seen over one connection: each command runs when it is sent, in the order sent, and its
 * reply comes back `delayMs` later (replies in order too).
 */
class DelayedStore extends CountingStore {
  delayMs = 2;
  override checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    this.checks += 1;
    const outcome = this.checkAndCountNow(keys, args);
    return new Promise((resolve) =>
      setTimeout(() => {
        resolve(outcome);
      }, this.delayMs),
    );
  }
  override addBatch(batch: PendingBatch): Promise<BatchReply> {
    const reply = this.addBatchNow(batch);
    return new Promise((resolve) =>
      setTimeout(() => {
        resolve(reply);
      }, this.delayMs),
    );
  }
}

function setup(
  policies: PolicySnapshot,
  batching: BatchSettings | null = DEFAULT_BATCH_SETTINGS,
  makeStore: (now: () => number) => CountingStore = (now) => new CountingStore(now),
) {
  const clock = { now: NOW };
  const now = (): number => clock.now;
  const store = makeStore(now);
  const metrics = createRateLimitMetrics(now);
  const service = new RateLimitService({
    policies: () => policies,
    store,
    failureMode: 'local',
    now,
    monotonicNow: now,
    metrics,
    log: pino({ level: 'silent' }),
    ...(batching === null ? {} : { batching }),
  });
  return { clock, store, metrics, service };
}

const check = (keyId: string, hits = 1): RateLimitRequest => ({
  domain: DOMAIN,
  descriptors: [{ entries: [{ key: 'key_id', value: keyId }] }],
  hits_addend: hits,
});

const header = (r: { response_headers_to_add: { key: string; value: string }[] }, key: string) =>
  r.response_headers_to_add.find((h) => h.key === key)?.value;

/** The store's minute and day counts of `keyId` at `nowMs`, read with an empty batch's rules. */
function storeCounts(
  store: LocalCounterStore,
  keyId: string,
  nowMs: number,
): { minute: number; day: number } {
  const keys = counterKeys(DOMAIN, keyId, currentWindows(nowMs));
  const reply = store.addBatchNow({
    keys,
    minuteIndex: 0,
    dayIndex: 0,
    hits: 0,
    minuteTtlMs: 1,
    dayTtlMs: 1,
  });
  return { minute: reply.minuteUsed, day: reply.dayUsed };
}

describe('RateLimitService with batched counts', () => {
  it('answers checks far below the limit without the store, with exact headers, and sends their hits in a batch', async () => {
    const { store, service, metrics } = setup(policyWith(1_000, 100_000));
    // B = min(100, 1000 / 20) = 50.
    const first = await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(1);
    expect(header(first, 'X-RateLimit-Remaining')).toBe('999');
    const remaining: string[] = [];
    for (let i = 0; i < 10; i++)
      remaining.push(header(await service.shouldRateLimit(check('k')), 'X-RateLimit-Remaining') ?? '');
    expect(store.checks).toBe(1);
    expect(remaining).toEqual(['998', '997', '996', '995', '994', '993', '992', '991', '990', '989']);
    expect(storeCounts(store, 'k', NOW)).toEqual({ minute: 1, day: 1 });
    await service.flush();
    expect(storeCounts(store, 'k', NOW)).toEqual({ minute: 11, day: 11 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('portico_ratelimit_batched_admissions_total 10');
    expect(text).toContain('portico_ratelimit_batches_total{result="acknowledged"} 1');
  });

  it('goes back to the store after B unacknowledged hits, and sends them before that check', async () => {
    const { store, service } = setup(policyWith(1_000, 100_000));
    await service.shouldRateLimit(check('k'));
    for (let i = 0; i < 50; i++) await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(1);
    // The 51st unacknowledged hit would pass B = 50: exact, after the batch of 50.
    const r = await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(2);
    expect(header(r, 'X-RateLimit-Remaining')).toBe(String(1_000 - 52));
    expect(storeCounts(store, 'k', NOW)).toEqual({ minute: 52, day: 52 });
  });

  it('admits exactly the limit to many parallel checks, each with its own X-RateLimit-Remaining, while replies are in flight', async () => {
    const { store, service } = setup(
      policyWith(200, 100_000),
      DEFAULT_BATCH_SETTINGS,
      (now) => new DelayedStore(now),
    );
    const answers: Promise<Awaited<ReturnType<RateLimitService['shouldRateLimit']>>>[] = [];
    for (let wave = 0; wave < 60; wave++) {
      for (let i = 0; i < 10; i++) answers.push(service.shouldRateLimit(check('k-hot')));
      await sleep(1);
    }
    const all = await Promise.all(answers);
    const ok = all.filter((a) => a.overall_code === 'OK');
    expect(ok).toHaveLength(200);
    const remaining = ok.map((a) => Number(header(a, 'X-RateLimit-Remaining')));
    expect(new Set(remaining).size).toBe(200);
    expect(Math.min(...remaining)).toBe(0);
    await service.flush();
    expect(storeCounts(store, 'k-hot', NOW).minute).toBe(200);
    // Some were admitted without the store (B = 10 far below the limit of 200).
    expect(store.checks).toBeLessThan(600);
  });

  it('decides every check near the limit in the store: one replica admits exactly the limit', async () => {
    const { store, service } = setup(policyWith(100, 10_000)); // B = 5
    const codes: string[] = [];
    for (let i = 0; i < 110; i++) {
      codes.push((await service.shouldRateLimit(check('k'))).overall_code);
      if (i % 7 === 0) await service.flush();
    }
    expect(codes.filter((c) => c === 'OK')).toHaveLength(100);
    expect(codes.slice(100)).toEqual(Array.from({ length: 10 }, () => 'OVER_LIMIT'));
    await service.flush();
    expect(storeCounts(store, 'k', NOW).minute).toBe(100);
    // The last 5 admissions (95..100) and every refusal went to the store.
    expect(store.checks).toBeGreaterThanOrEqual(15);
  });

  it('never admits a key locally while a ban is known, and learns another replica’s ban from a batch reply', async () => {
    const { store, service, clock } = setup(policyWith(1_000, 100_000, true));
    await service.shouldRateLimit(check('k'));
    await service.shouldRateLimit(check('k')); // admitted locally
    // Another replica bans the key in the store.
    const keys = counterKeys(DOMAIN, 'k', currentWindows(NOW));
    const args: CheckArgs = {
      hits: 2_000,
      minuteLimit: 1_000,
      dayLimit: 100_000,
      minuteTtlMs: 110_000,
      dayTtlMs: 86_400_000,
      banThreshold: 2,
      banDurationMs: 900_000,
    };
    for (let i = 0; i < 3; i++) store.checkAndCountNow(keys, args);
    expect(store.checkAndCountNow(keys, args).kind).toBe('banned');
    await service.shouldRateLimit(check('k')); // still local: this replica does not know yet
    await service.flush(); // the batch's reply carries the ban
    const checksBefore = store.checks;
    const r = await service.shouldRateLimit(check('k'));
    expect(r.overall_code).toBe('OVER_LIMIT');
    expect(store.checks).toBe(checksBefore + 1);
    // In the next minute (counts at 0 there) the ban is still known: exact, refused.
    clock.now = NOW + 60_000;
    const next = await service.shouldRateLimit(check('k'));
    expect(next.overall_code).toBe('OVER_LIMIT');
    expect(header(next, 'Retry-After')).toBeDefined();
  });

  it('at a minute edge: counts the new minute from 0 and sends the old minute’s hits to the old minute’s key', async () => {
    const { store, service, clock } = setup(policyWith(1_000, 100_000));
    clock.now = NOW + 49_900; // 12:34:59.900
    await service.shouldRateLimit(check('k'));
    await service.shouldRateLimit(check('k')); // local, minute :34
    clock.now = NOW + 50_000; // 12:35:00.000
    const r = await service.shouldRateLimit(check('k')); // local, minute :35
    expect(store.checks).toBe(1);
    // Minute :35 holds this hit and, conservatively, the one not yet acknowledged of :34.
    expect(header(r, 'X-RateLimit-Remaining')).toBe('998');
    expect(header(r, 'X-RateLimit-Reset')).toBe(String(Date.parse('2026-11-22T12:36:00.000Z') / 1000));
    await service.flush();
    expect(storeCounts(store, 'k', NOW + 49_900)).toEqual({ minute: 2, day: 3 });
    expect(storeCounts(store, 'k', NOW + 50_000)).toEqual({ minute: 1, day: 3 });
  });

  it('admits nothing locally while the store is disconnected: the check meets the store (and its failure mode)', async () => {
    const { store, service } = setup(policyWith(1_000, 100_000), DEFAULT_BATCH_SETTINGS, (now) => {
      const s = new CountingStore(now);
      Object.defineProperty(s, 'connected', { get: () => connected.value });
      return s;
    });
    const connected = { value: true };
    await service.shouldRateLimit(check('k'));
    await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(1);
    connected.value = false;
    await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(2);
  });

  it('checks a view older than maxViewAgeMs in the store', async () => {
    const { store, service, clock } = setup(policyWith(1_000, 100_000));
    await service.shouldRateLimit(check('k'));
    clock.now += DEFAULT_BATCH_SETTINGS.maxViewAgeMs + 1;
    await service.shouldRateLimit(check('k'));
    expect(store.checks).toBe(2);
  });

  it('is exact for limits under 2 * limitDivisor, and when batching is off', async () => {
    const small = setup(policyWith(39, 1_000));
    for (let i = 0; i < 5; i++) await small.service.shouldRateLimit(check('k'));
    expect(small.store.checks).toBe(5);
    const off = setup(policyWith(1_000, 100_000), { ...DEFAULT_BATCH_SETTINGS, maxBatchHits: 0 });
    for (let i = 0; i < 5; i++) await off.service.shouldRateLimit(check('k'));
    expect(off.store.checks).toBe(5);
    const unset = setup(policyWith(1_000, 100_000), null);
    for (let i = 0; i < 5; i++) await unset.service.shouldRateLimit(check('k'));
    expect(unset.store.checks).toBe(5);
  });
});
