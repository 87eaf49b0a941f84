/**
 * Counts kept in this replica's memory, for the checks Redis cannot answer (docs/ratelimits.md,
 * "Degraded mode (Redis down)": each replica counts locally, with the same windows and limits, and
 * answers with headers from those counts). A `CounterStore` that runs the rules of the Redis script
 * (`script.ts`) on the same keys (`redis-keys.ts`) with the same TTLs, so a check answered from
 * here is decided exactly as Redis would decide it from the counts this replica has seen:
 *
 * - a banned key is refused without touching its counters;
 * - a request is admitted only if it fits both windows; then both counters grow by `hits`;
 * - a refused request of a policy with a ban adds 1 to the rejected counter, which lives until the
 *   refusing window resets; past the threshold the key is banned for the ban's duration.
 *
 * What it cannot know: what other replicas counted, and what Redis had counted before it became
 * unreachable. So while Redis is away each replica admits up to the full limit on its own (with N
 * replicas behind a balancer a key can be admitted up to N times its limit, less what it used
 * before the outage in the window that replica saw). Local counts are never written to Redis
 * afterwards (docs/ratelimits.md, "Degraded mode (Redis down)", "Never replayed").
 *
 * Memory: one entry per key (four per API key at most); expired entries are dropped by a sweep at
 * most once per SWEEP_INTERVAL_MS, and beyond `maxKeys` live keys the oldest written are dropped
 * first (their counts restart from zero). Pure apart from the clock it is given.
 */
import type { BatchReply, PendingBatch } from './batched-counts.js';
import type { CounterOutcome } from './decision.js';
import type { CounterKeys } from './redis-keys.js';
import { COUNTER_GRACE_MS } from './windows.js';
import type { CheckArgs, CounterStore } from './redis-store.js';

/** Live keys kept at most by default: 4 keys a check, so about 50,000 API keys. */
export const DEFAULT_LOCAL_MAX_KEYS = 200_000;
/** Expired keys are dropped at most this often, ms. */
export const SWEEP_INTERVAL_MS = 5_000;

interface Entry {
  value: number;
  /** Unix ms after which the key is gone (Redis's PEXPIRE). */
  expiresAtMs: number;
}

export class LocalCounterStore implements CounterStore {
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  readonly #maxKeys: number;
  #lastSweepMs = 0;

  /**
   * @param now Unix time, ms (the service's clock)
   * @param maxKeys live keys kept at most; beyond it the oldest written are dropped
   */
  constructor(now: () => number = Date.now, maxKeys = DEFAULT_LOCAL_MAX_KEYS) {
    this.#now = now;
    this.#maxKeys = maxKeys;
  }

  /** Always true: memory is always there. */
  get connected(): boolean {
    return true;
  }

  /** Keys held now (expired ones not yet swept included). */
  get size(): number {
    return this.#entries.size;
  }

  #get(key: string, nowMs: number): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAtMs <= nowMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  #set(key: string, value: number, ttlMs: number, nowMs: number): void {
    // Delete first so that the Map's order is the order of writes (the oldest written go first).
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAtMs: nowMs + ttlMs });
  }

  /** INCRBY, with PEXPIRE `ttlMs` when the key is new (the script's rule). */
  #incr(key: string, by: number, ttlMs: number, nowMs: number): number {
    const entry = this.#get(key, nowMs);
    if (entry === undefined) {
      this.#set(key, by, ttlMs, nowMs);
      return by;
    }
    entry.value += by;
    return entry.value;
  }

  /** Drops expired keys, at most once every SWEEP_INTERVAL_MS. */
  #sweep(nowMs: number): void {
    if (nowMs - this.#lastSweepMs >= SWEEP_INTERVAL_MS) {
      this.#lastSweepMs = nowMs;
      for (const [key, entry] of this.#entries) if (entry.expiresAtMs <= nowMs) this.#entries.delete(key);
    }
  }

  /** Drops the oldest written keys beyond `maxKeys`. */
  #cap(): void {
    while (this.#entries.size > this.#maxKeys) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }

  /** The Redis script's decision on this replica's counts, at once (no I/O). */
  checkAndCountNow(keys: CounterKeys, args: CheckArgs): CounterOutcome {
    const nowMs = this.#now();
    this.#sweep(nowMs);
    try {
      return this.#check(keys, args, nowMs);
    } finally {
      this.#cap();
    }
  }

  #check(keys: CounterKeys, args: CheckArgs, nowMs: number): CounterOutcome {
    const ban = this.#get(keys.ban, nowMs);
    let minute = this.#get(keys.minute, nowMs)?.value ?? 0;
    let day = this.#get(keys.day, nowMs)?.value ?? 0;
    if (ban !== undefined) {
      return { kind: 'banned', minuteUsed: minute, dayUsed: day, banTtlMs: ban.expiresAtMs - nowMs };
    }
    const minuteOver = minute + args.hits > args.minuteLimit;
    const dayOver = day + args.hits > args.dayLimit;
    if (!minuteOver && !dayOver) {
      minute = this.#incr(keys.minute, args.hits, args.minuteTtlMs, nowMs);
      day = this.#incr(keys.day, args.hits, args.dayTtlMs, nowMs);
      return { kind: 'admitted', minuteUsed: minute, dayUsed: day };
    }
    if (args.banThreshold > 0) {
      const rejected = this.#incr(keys.rejected, 1, 1, nowMs);
      // The script re-arms the TTL on every refusal: until the refusing window resets.
      // Until the refusing window's end: the counters' TTL less their grace (as the script does).
      const windowTtlMs = (dayOver ? args.dayTtlMs : args.minuteTtlMs) - COUNTER_GRACE_MS;
      this.#set(keys.rejected, rejected, Math.max(1, windowTtlMs), nowMs);
      if (rejected > args.banThreshold) {
        this.#set(keys.ban, 1, args.banDurationMs, nowMs);
        this.#entries.delete(keys.rejected);
        return { kind: 'bannedNow', minuteUsed: minute, dayUsed: day, banTtlMs: args.banDurationMs };
      }
    }
    return { kind: 'limited', minuteUsed: minute, dayUsed: day };
  }

  checkAndCount(keys: CounterKeys, args: CheckArgs): Promise<CounterOutcome> {
    return Promise.resolve(this.checkAndCountNow(keys, args));
  }

  /** The batch script's rules (`script.ts`, ADD_BATCH_LUA) on this replica's counts, at once. */
  addBatchNow(batch: PendingBatch): BatchReply {
    const nowMs = this.#now();
    this.#sweep(nowMs);
    try {
      const minuteUsed = this.#incr(batch.keys.minute, batch.hits, batch.minuteTtlMs, nowMs);
      const dayUsed = this.#incr(batch.keys.day, batch.hits, batch.dayTtlMs, nowMs);
      const ban = this.#get(batch.keys.ban, nowMs);
      return { minuteUsed, dayUsed, banTtlMs: ban === undefined ? -2 : ban.expiresAtMs - nowMs };
    } finally {
      this.#cap();
    }
  }

  addBatch(batch: PendingBatch): Promise<BatchReply> {
    return Promise.resolve(this.addBatchNow(batch));
  }

  /** Forgets every count. */
  close(): Promise<void> {
    this.#entries.clear();
    return Promise.resolve();
  }
}
