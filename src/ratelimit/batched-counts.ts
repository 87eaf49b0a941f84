/**
 * Checks far below their limit, admitted without waiting for Redis (docs/ratelimits.md, "Checks far
 * below their limit: batched counts"). Pure: no I/O, the clock (Unix ms) is a parameter; the service
 * (`service.ts`) sends the batches and reports Redis's answers back.
 *
 * Per counter subject (the keys' hash tag: one domain and key id, or client address), a replica keeps
 * a **view**: the minute and day counts Redis last reported for it (the reply to an exact check, or to
 * a batch of counts), when, and the ban Redis reported, if any. A check is **admitted locally** (no
 * Redis round trip) when all of these hold:
 *
 * - the view is at most `maxViewAgeMs` old, and no ban is known;
 * - the limits are those the view was taken under (a changed policy or override goes to Redis);
 * - the hits this replica admitted locally and Redis has not acknowledged yet (`unacknowledged`),
 *   with this check's, are at most the batch size B (`batchSize`);
 * - in both windows, the view's count plus `unacknowledged`, the hits of the key's exact checks in
 *   flight and this check's hits leaves at least B requests of the limit:
 *   `seen + unacknowledged + exactInFlight + hits + B <= limit`.
 *
 * Every other check is **exact**: the Redis script decides it as before (`script.ts`), after this
 * replica's hits not yet sent (`beginExact`), on the same connection, so Redis counts them first.
 * Refusals and bans are therefore always decided by Redis: a check is only admitted locally far from
 * the limit. The hits admitted locally are added to Redis in batches (`takePending`, one INCRBY per
 * window and subject, the service sends them every `flushIntervalMs`); each batch's reply renews the
 * view.
 *
 * **Overshoot bound.** One replica never admits past a limit: its view plus its own unacknowledged
 * hits is Redis's count exactly, and it goes exact B requests before the limit. With N replicas, each
 * holds at most B hits Redis has not seen, and decides on a view that misses what the others admitted
 * since; a key's window admits at most `limit + N * B` requests (batched-counts.property.test.ts
 * checks it against a model of Redis with delayed, interleaved replies; it found cases over
 * `limit + (N - 1) * B`). B is at most
 * `limit / limitDivisor` of the smaller limit (5 % by default) and at most `maxBatchHits`; a limit
 * under `2 * limitDivisor` gives B = 0: every check of it is exact.
 *
 * **Headers.** A check admitted locally answers `X-RateLimit-Remaining` from `limit - (seen +
 * unacknowledged + exactInFlight + hits)` of the window closest to its limit: what this replica knows
 * Redis holds plus what it admitted or sent since (an exact check in flight counts as admitted: Redis
 * runs it before this check's batch; if Redis refuses it, this answer's Remaining is low by its
 * hits). With one replica it is exact; with several it may be high by what the others admitted
 * since this replica's view (their unacknowledged hits, at most `(N - 1) * B`, and what they sent in
 * the last flush interval).
 * `X-RateLimit-Limit` and `X-RateLimit-Reset` are exact.
 *
 * **Bans.** A key with a ban known to this replica (from an exact check or a batch reply) is always
 * exact until the ban ends. A ban another replica starts is seen here at the next batch reply: until
 * then this replica may admit at most B more hits of that key (which, far below the limit, is the only
 * state a banned key can be locally admitted in: a key is banned only after refusals at its limit).
 *
 * **Lost batches.** A batch Redis does not acknowledge (timeout, connection lost) is not sent again
 * (it may have been counted already: no double count); the subject's view is dropped, so its next
 * check is exact and meets the circuit breaker. So a Redis failure under-counts at most B hits per
 * subject.
 *
 * Memory: one view per subject seen in the last `maxViewAgeMs` (older views are useless and swept),
 * at most `maxKeys`; one pending batch per subject and minute, sent every `flushIntervalMs`.
 */
import type { CounterOutcome } from './decision.js';
import type { WindowLimits } from './limits.js';
import type { CounterKeys } from './redis-keys.js';
import type { TimeWindow } from './windows.js';

export interface BatchSettings {
  /** The largest batch size B (hits); 0: every check is exact (no local admission). */
  readonly maxBatchHits: number;
  /** B is at most the smaller limit divided by this (20: 5 % of the limit). */
  readonly limitDivisor: number;
  /** A view older than this (ms) admits nothing: the check is exact. */
  readonly maxViewAgeMs: number;
  /** How often the pending batches are sent to Redis, ms (the service's timer). */
  readonly flushIntervalMs: number;
  /** Views kept at most; beyond it the oldest written are dropped (their next check is exact). */
  readonly maxKeys: number;
}

export const DEFAULT_BATCH_SETTINGS: BatchSettings = {
  maxBatchHits: 100,
  limitDivisor: 20,
  maxViewAgeMs: 5_000,
  flushIntervalMs: 200,
  maxKeys: 100_000,
};

/** Hits admitted locally for one subject in one minute (and its day), not yet sent to Redis. */
export interface PendingBatch {
  readonly keys: CounterKeys;
  /** The windows of `keys`. */
  readonly minuteIndex: number;
  readonly dayIndex: number;
  hits: number;
  /** The TTLs a new counter gets (the script's rule), ms, as of the first hit of the batch. */
  readonly minuteTtlMs: number;
  readonly dayTtlMs: number;
}

/** Redis's answer to a batch: the counts after adding it, and the ban's time left (ms; <= 0: none). */
export interface BatchReply {
  readonly minuteUsed: number;
  readonly dayUsed: number;
  readonly banTtlMs: number;
}

interface View {
  readonly perMinute: number;
  readonly perDay: number;
  minuteIndex: number;
  minuteSeen: number;
  dayIndex: number;
  daySeen: number;
  syncedAtMs: number;
  /** Hits admitted locally that Redis has not acknowledged (pending or in flight). */
  unacknowledged: number;
  /** Unix ms; 0: no ban known. */
  bannedUntilMs: number;
}

/**
 * B for `limits`: at most `maxBatchHits`, at most the smaller limit / `limitDivisor`; 0 (exact) when
 * that is under 2.
 */
export function batchSize(limits: WindowLimits, settings: BatchSettings): number {
  const b = Math.min(
    settings.maxBatchHits,
    Math.floor(Math.min(limits.perMinute, limits.perDay) / settings.limitDivisor),
  );
  return b >= 2 ? b : 0;
}

/** The windows a check's keys were made for (`currentWindows`). */
export interface CheckWindows {
  readonly minute: TimeWindow;
  readonly day: TimeWindow;
}

export class BatchedCounts {
  readonly #settings: BatchSettings;
  /** By the subject's ban key (one per hash tag). */
  readonly #views = new Map<string, View>();
  /**
   * Hits of exact checks sent to Redis and not answered yet, by the subject's ban key (Redis may admit
   * them after the count a view holds).
   */
  readonly #exactInFlight = new Map<string, number>();
  /** By the minute key (one per subject and minute). */
  readonly #pending = new Map<string, PendingBatch>();
  #lastSweepMs = 0;

  constructor(settings: BatchSettings = DEFAULT_BATCH_SETTINGS) {
    this.#settings = settings;
  }

  get settings(): BatchSettings {
    return this.#settings;
  }

  /** Views held now. */
  get size(): number {
    return this.#views.size;
  }

  /** Pending batches (not sent yet). */
  get pendingBatches(): number {
    return this.#pending.size;
  }

  /**
   * The outcome of a check admitted locally, or undefined when the check must be exact (see the
   * module's rules). An admitted check is added to its subject's pending batch.
   *
   * @param hits the check's hits (at least 1)
   * @param ttls the TTLs a new counter would get now (`counterTtlMs`), ms
   */
  admit(
    keys: CounterKeys,
    windows: CheckWindows,
    limits: WindowLimits,
    hits: number,
    ttls: { readonly minuteTtlMs: number; readonly dayTtlMs: number },
    nowMs: number,
  ): CounterOutcome | undefined {
    const b = batchSize(limits, this.#settings);
    if (b === 0) return undefined;
    const view = this.#views.get(keys.ban);
    if (view === undefined) return undefined;
    if (view.perMinute !== limits.perMinute || view.perDay !== limits.perDay) {
      this.#views.delete(keys.ban);
      return undefined;
    }
    if (view.bannedUntilMs > nowMs) return undefined;
    if (nowMs - view.syncedAtMs > this.#settings.maxViewAgeMs) return undefined;
    if (view.unacknowledged + hits > b) return undefined;
    const minuteSeen = seenIn(view.minuteIndex, view.minuteSeen, windows.minute.index);
    const daySeen = seenIn(view.dayIndex, view.daySeen, windows.day.index);
    if (minuteSeen === undefined || daySeen === undefined) return undefined;
    // Exact checks of the key in flight count as admitted: Redis runs them before this check's
    // batch, so the counts (and X-RateLimit-Remaining) follow the order Redis will see.
    const ahead = view.unacknowledged + (this.#exactInFlight.get(keys.ban) ?? 0) + hits;
    const minuteUsed = minuteSeen + ahead;
    const dayUsed = daySeen + ahead;
    if (minuteUsed + b > limits.perMinute || dayUsed + b > limits.perDay) return undefined;
    view.unacknowledged += hits;
    const pending = this.#pending.get(keys.minute);
    if (pending === undefined) {
      this.#pending.set(keys.minute, {
        keys,
        minuteIndex: windows.minute.index,
        dayIndex: windows.day.index,
        hits,
        minuteTtlMs: ttls.minuteTtlMs,
        dayTtlMs: ttls.dayTtlMs,
      });
    } else {
      pending.hits += hits;
    }
    return { kind: 'admitted', minuteUsed, dayUsed };
  }

  /**
   * An exact check of `hits` for the subject of `keys` is about to be sent: returns the subject's
   * pending batches (every minute of it), to be sent before the check on the same connection so that
   * Redis counts them first. Until `exactDone` or `exactFailed`, the check's hits count against the
   * headroom of local admissions.
   */
  beginExact(keys: CounterKeys, hits: number): PendingBatch[] {
    this.#exactInFlight.set(keys.ban, (this.#exactInFlight.get(keys.ban) ?? 0) + hits);
    const view = this.#views.get(keys.ban);
    if (view === undefined || view.unacknowledged === 0) return [];
    const batches: PendingBatch[] = [];
    for (const [minuteKey, batch] of this.#pending) {
      if (batch.keys.ban === keys.ban) {
        batches.push(batch);
        this.#pending.delete(minuteKey);
      }
    }
    return batches;
  }

  /** The exact check of `hits` begun by `beginExact` failed (Redis did not answer): the view is dropped. */
  exactFailed(keys: CounterKeys, hits: number): void {
    this.#endExact(keys, hits);
    this.#views.delete(keys.ban);
  }

  #endExact(keys: CounterKeys, hits: number): void {
    const left = (this.#exactInFlight.get(keys.ban) ?? 0) - hits;
    if (left > 0) this.#exactInFlight.set(keys.ban, left);
    else this.#exactInFlight.delete(keys.ban);
  }

  /**
   * Redis decided a check of `hits` begun by `beginExact` (`keys`, under `limits`): its counts (which
   * include every batch of this subject sent before it) become the view.
   */
  exactDone(
    keys: CounterKeys,
    windows: CheckWindows,
    limits: WindowLimits,
    hits: number,
    outcome: CounterOutcome,
    nowMs: number,
  ): void {
    this.#sweep(nowMs);
    let view = this.#views.get(keys.ban);
    this.#endExact(keys, hits);
    if (view === undefined || view.perMinute !== limits.perMinute || view.perDay !== limits.perDay) {
      // Hits of this subject still unacknowledged were admitted under the old view; they stay
      // counted against the new one until their batch is acknowledged.
      const unacknowledged = view?.unacknowledged ?? 0;
      view = {
        perMinute: limits.perMinute,
        perDay: limits.perDay,
        minuteIndex: windows.minute.index,
        minuteSeen: 0,
        dayIndex: windows.day.index,
        daySeen: 0,
        syncedAtMs: nowMs,
        unacknowledged,
        bannedUntilMs: 0,
      };
      this.#views.delete(keys.ban);
      this.#views.set(keys.ban, view);
      this.#cap();
    }
    view.minuteIndex = windows.minute.index;
    view.minuteSeen = outcome.minuteUsed;
    view.dayIndex = windows.day.index;
    view.daySeen = outcome.dayUsed;
    view.syncedAtMs = nowMs;
    view.bannedUntilMs =
      outcome.kind === 'banned' || outcome.kind === 'bannedNow' ? nowMs + outcome.banTtlMs : 0;
  }

  /** Takes every pending batch, to be sent now. */
  takePending(): PendingBatch[] {
    const batches = [...this.#pending.values()];
    this.#pending.clear();
    return batches;
  }

  /**
   * Redis added `batch` and answered `reply`: the view is renewed (each window's count only if the
   * view is not on a later window already) and the batch's hits are no longer unacknowledged.
   */
  acknowledged(batch: PendingBatch, reply: BatchReply, nowMs: number): void {
    const view = this.#views.get(batch.keys.ban);
    if (view === undefined) return;
    view.unacknowledged = Math.max(0, view.unacknowledged - batch.hits);
    if (batch.minuteIndex >= view.minuteIndex) {
      view.minuteIndex = batch.minuteIndex;
      view.minuteSeen = reply.minuteUsed;
    }
    if (batch.dayIndex >= view.dayIndex) {
      view.dayIndex = batch.dayIndex;
      view.daySeen = reply.dayUsed;
    }
    view.syncedAtMs = nowMs;
    view.bannedUntilMs = reply.banTtlMs > 0 ? nowMs + reply.banTtlMs : 0;
  }

  /**
   * Redis did not acknowledge `batch` (it may or may not have counted it: it is not sent again). The
   * subject's view is dropped, so its next check is exact.
   */
  failed(batch: PendingBatch): void {
    this.#views.delete(batch.keys.ban);
  }

  /** Drops views too old to admit anything, at most once per `maxViewAgeMs`. */
  #sweep(nowMs: number): void {
    if (nowMs - this.#lastSweepMs < this.#settings.maxViewAgeMs) return;
    this.#lastSweepMs = nowMs;
    for (const [key, view] of this.#views) {
      if (nowMs - view.syncedAtMs > this.#settings.maxViewAgeMs && view.unacknowledged === 0) {
        this.#views.delete(key);
      }
    }
  }

  #cap(): void {
    while (this.#views.size > this.#settings.maxKeys) {
      const oldest = this.#views.keys().next();
      if (oldest.done === true) break;
      this.#views.delete(oldest.value);
    }
  }
}

/**
 * The count the view gives for the current window: the count seen when the view is of this window, 0
 * when the view is of an earlier one (a new window starts at 0 in Redis: a new key), undefined when
 * the view is of a later one (a clock that stepped back: exact).
 */
function seenIn(viewIndex: number, seen: number, currentIndex: number): number | undefined {
  if (viewIndex === currentIndex) return seen;
  return viewIndex < currentIndex ? 0 : undefined;
}
