/**
 * Keys already over their limit, or banned, answered from memory until their window or ban ends, so
 * an abusive key costs no Redis round trip (docs/ratelimits.md, "Keys over their limit, answered
 * from memory"; envoyproxy/ratelimit's local cache, `LOCAL_CACHE_SIZE_IN_BYTES`, does the same for
 * keys over the limit).
 *
 * What is kept, per rate-limit domain and counter subject (key id or address):
 * - a ban: until it ends (Redis said how long it has left);
 * - a refusal with a window full (`used >= limit`, so no request of any `hits_addend` fits) of a
 *   policy **without** a ban: until that window ends. With a ban, refusals are counted in Redis toward
 *   it (`afterRejectedRequests`), so they must reach Redis and are not kept.
 *
 * An entry holds the limits it was decided under; a check whose limits differ (a policy changed, an
 * override added) goes to Redis. Never wrong in the refusing direction beyond what Redis said: a
 * window's count only grows until the window ends, and a ban only ends when its time is up. (A hand
 * `DEL` in Redis is not seen until then.)
 *
 * Memory: at most `maxEntries` (oldest written dropped first); expired entries go when read or swept.
 * Pure: the clock (Unix ms) is a parameter.
 */
import type { CounterOutcome } from './decision.js';
import type { WindowLimits } from './limits.js';
import { windowEndMs } from './windows.js';

/** Entries kept at most by default. */
export const DEFAULT_OVER_LIMIT_CACHE_ENTRIES = 100_000;

interface Entry {
  readonly perMinute: number;
  readonly perDay: number;
  readonly outcome: CounterOutcome;
  /** Unix ms. */
  readonly untilMs: number;
  /** Unix ms of the ban's end, for `banned` entries. */
  readonly banEndMs?: number;
}

export class OverLimitCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;

  constructor(maxEntries = DEFAULT_OVER_LIMIT_CACHE_ENTRIES) {
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The outcome to answer `key` with from memory, or undefined to ask Redis.
   *
   * @param key the counters' hash tag (domain and subject)
   * @param nowMs Unix ms
   */
  get(key: string, limits: WindowLimits, nowMs: number): CounterOutcome | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.untilMs <= nowMs || entry.perMinute !== limits.perMinute || entry.perDay !== limits.perDay) {
      this.#entries.delete(key);
      return undefined;
    }
    if (entry.banEndMs !== undefined) {
      return {
        kind: 'banned',
        minuteUsed: entry.outcome.minuteUsed,
        dayUsed: entry.outcome.dayUsed,
        banTtlMs: entry.banEndMs - nowMs,
      };
    }
    return entry.outcome;
  }

  /**
   * Keeps what Redis answered for `key` if it will refuse every request until a known time: a ban,
   * or (for a policy without a ban, `banThreshold` 0) a full window.
   */
  remember(
    key: string,
    limits: WindowLimits,
    outcome: CounterOutcome,
    banThreshold: number,
    nowMs: number,
  ): void {
    let untilMs: number | undefined;
    let banEndMs: number | undefined;
    if (outcome.kind === 'banned' || outcome.kind === 'bannedNow') {
      banEndMs = nowMs + outcome.banTtlMs;
      untilMs = banEndMs;
    } else if (outcome.kind === 'limited' && banThreshold === 0) {
      const dayFull = outcome.dayUsed >= limits.perDay;
      const minuteFull = outcome.minuteUsed >= limits.perMinute;
      if (dayFull) untilMs = windowEndMs('day', nowMs);
      else if (minuteFull) untilMs = windowEndMs('minute', nowMs);
    }
    if (untilMs === undefined) return;
    this.#entries.delete(key);
    this.#entries.set(key, {
      perMinute: limits.perMinute,
      perDay: limits.perDay,
      outcome,
      untilMs,
      ...(banEndMs === undefined ? {} : { banEndMs }),
    });
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }
}
