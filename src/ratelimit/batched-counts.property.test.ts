/**
 * The overshoot bound of batched counts (src/ratelimit/batched-counts.ts; docs/ratelimits.md, "Checks
 * far below their limit: batched counts"): N replicas, each with its own BatchedCounts, against one
 * model of Redis's script (one minute window), with every command and reply delayed and interleaved
 * at random; each replica's commands run in the order it sent them (one connection), as Redis does.
 * A window admits at most `limit + N * B`; one replica never admits past the limit.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  batchSize,
  BatchedCounts,
  type BatchReply,
  type BatchSettings,
  type PendingBatch,
} from './batched-counts.js';
import type { CounterOutcome } from './decision.js';
import type { WindowLimits } from './limits.js';
import { counterKeys } from './redis-keys.js';
import { currentWindows } from './windows.js';

const NOW = Date.parse('2026-11-22T12:34:10.000Z');
const WINDOWS = currentWindows(NOW);
const KEYS = counterKeys('ns/p', 'k', WINDOWS);
const TTLS = { minuteTtlMs: 110_000, dayTtlMs: 86_400_000 };

/** Redis as the script and the batch script see it: one subject, minute and day counts. */
class ModelRedis {
  minute = 0;
  day = 0;
  admitted = 0;
  constructor(readonly limits: WindowLimits) {}
  check(hits: number): CounterOutcome {
    if (this.minute + hits > this.limits.perMinute || this.day + hits > this.limits.perDay) {
      return { kind: 'limited', minuteUsed: this.minute, dayUsed: this.day };
    }
    this.minute += hits;
    this.day += hits;
    this.admitted += hits;
    return { kind: 'admitted', minuteUsed: this.minute, dayUsed: this.day };
  }
  add(hits: number): BatchReply {
    this.minute += hits;
    this.day += hits;
    return { minuteUsed: this.minute, dayUsed: this.day, banTtlMs: -2 };
  }
}

type Command = { kind: 'check'; hits: number } | { kind: 'batch'; batch: PendingBatch };
type Reply =
  | { kind: 'check'; hits: number; outcome: CounterOutcome }
  | { kind: 'batch'; batch: PendingBatch; reply: BatchReply };

class Replica {
  readonly counts: BatchedCounts;
  readonly outgoing: Command[] = [];
  readonly incoming: Reply[] = [];
  locallyAdmitted = 0;
  constructor(settings: BatchSettings) {
    this.counts = new BatchedCounts(settings);
  }
  check(limits: WindowLimits, hits: number): void {
    const local = this.counts.admit(KEYS, WINDOWS, limits, hits, TTLS, NOW);
    if (local !== undefined) {
      this.locallyAdmitted += hits;
      return;
    }
    for (const batch of this.counts.beginExact(KEYS, hits)) this.outgoing.push({ kind: 'batch', batch });
    this.outgoing.push({ kind: 'check', hits });
  }
  flush(): void {
    for (const batch of this.counts.takePending()) this.outgoing.push({ kind: 'batch', batch });
  }
  deliver(redis: ModelRedis): void {
    const command = this.outgoing.shift();
    if (command === undefined) return;
    this.incoming.push(
      command.kind === 'check'
        ? { kind: 'check', hits: command.hits, outcome: redis.check(command.hits) }
        : { kind: 'batch', batch: command.batch, reply: redis.add(command.batch.hits) },
    );
  }
  receive(limits: WindowLimits): void {
    const reply = this.incoming.shift();
    if (reply === undefined) return;
    if (reply.kind === 'check') this.counts.exactDone(KEYS, WINDOWS, limits, reply.hits, reply.outcome, NOW);
    else this.counts.acknowledged(reply.batch, reply.reply, NOW);
  }
}

const SETTINGS: BatchSettings = {
  maxBatchHits: 10,
  limitDivisor: 20,
  maxViewAgeMs: 1_000,
  flushIntervalMs: 100,
  maxKeys: 1_000,
};

const action = (replicas: number) =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('check' as const),
        replica: fc.nat(replicas - 1),
        hits: fc.integer({ min: 1, max: 3 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('flush' as const), replica: fc.nat(replicas - 1) }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ kind: fc.constant('deliver' as const), replica: fc.nat(replicas - 1) }),
    },
    {
      weight: 3,
      arbitrary: fc.record({ kind: fc.constant('receive' as const), replica: fc.nat(replicas - 1) }),
    },
  );

/** Runs `actions`, then lets every command and reply through; the total admitted in the window. */
function simulate(
  replicaCount: number,
  limits: WindowLimits,
  actions: readonly { kind: string; replica: number; hits?: number }[],
): { total: number; redis: ModelRedis; b: number; replicas: Replica[] } {
  const redis = new ModelRedis(limits);
  const replicas = Array.from({ length: replicaCount }, () => new Replica(SETTINGS));
  for (const a of actions) {
    const r = replicas[a.replica] as Replica;
    if (a.kind === 'check') r.check(limits, a.hits ?? 1);
    else if (a.kind === 'flush') r.flush();
    else if (a.kind === 'deliver') r.deliver(redis);
    else r.receive(limits);
  }
  for (const r of replicas) r.flush();
  for (const r of replicas) {
    while (r.outgoing.length > 0) r.deliver(redis);
    while (r.incoming.length > 0) r.receive(limits);
  }
  const total = redis.admitted + replicas.reduce((s, r) => s + r.locallyAdmitted, 0);
  return { total, redis, b: batchSize(limits, SETTINGS), replicas };
}

const limitsArb = fc.record({
  perMinute: fc.integer({ min: 40, max: 400 }),
  perDay: fc.integer({ min: 40, max: 4_000 }),
});

describe('BatchedCounts across replicas (model of Redis, delayed and interleaved replies)', () => {
  it('one replica never admits past a limit', () => {
    fc.assert(
      fc.property(limitsArb, fc.array(action(1), { minLength: 50, maxLength: 1_500 }), (limits, actions) => {
        const { total, redis } = simulate(1, limits, actions);
        expect(total).toBeLessThanOrEqual(Math.min(limits.perMinute, limits.perDay));
        // Every hit admitted locally reached Redis: its counts are what was admitted.
        expect(redis.minute).toBe(total);
      }),
      { numRuns: 1_000 },
    );
  });

  it('N replicas admit at most limit + N * B in a window (limit + (N - 1) * B does not hold)', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 2, max: 5 })
          .chain((n) =>
            fc.tuple(fc.constant(n), limitsArb, fc.array(action(n), { minLength: 50, maxLength: 2_000 })),
          ),
        ([n, limits, actions]) => {
          const { total, b } = simulate(n, limits, actions);
          expect(total).toBeLessThanOrEqual(Math.min(limits.perMinute, limits.perDay) + n * b);
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it('admits locally at all: far below the limit most checks cost no round trip', () => {
    const limits = { perMinute: 10_000, perDay: 100_000 };
    const actions = [
      { kind: 'check', replica: 0, hits: 1 },
      { kind: 'deliver', replica: 0 },
      { kind: 'receive', replica: 0 },
      ...Array.from({ length: 9 }, () => ({ kind: 'check', replica: 0, hits: 1 })),
    ];
    const { replicas, redis } = simulate(1, limits, actions);
    expect(replicas[0]?.locallyAdmitted).toBe(9);
    expect(redis.minute).toBe(10);
  });
});
