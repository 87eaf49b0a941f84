/**
 * The CA's order rate limits as Portico counts them: sliding windows (at most `limit` events in any
 * `windowMs`), Let's Encrypt's published figures as the defaults, and the window arithmetic that
 * tells when a place in line gets room. Pure: every time is in milliseconds and passed in.
 *
 * Let's Encrypt computes its limits with token buckets that hold `limit` tokens and refill them over
 * `windowMs` (https://letsencrypt.org/docs/rate-limits/); a sliding window with the same figures
 * never admits more than such a bucket would, so counting with it keeps the account clear of those
 * limits as long as every order the account places is counted.
 */

export const SECOND_MS = 1_000;
export const MINUTE_MS = 60 * SECOND_MS;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;

/** At most `limit` events in any window of `windowMs` milliseconds (a sliding window). */
export interface WindowLimit {
  /** A positive integer. */
  readonly limit: number;
  /** Milliseconds; positive and finite. */
  readonly windowMs: number;
}

export interface OrderBudgetLimits {
  /** New orders the account places (each admission counts one). */
  readonly accountOrders: WindowLimit;
  /** Valid certificates per registered domain (orders in flight for it count too, on the safe side). */
  readonly certificatesPerRegisteredDomain: WindowLimit;
  /** Failed validations per hostname (an order in flight for it counts too, on the safe side). */
  readonly failedValidationsPerHostname: WindowLimit;
  /** Orders in flight at once: admitted and not yet settled. A positive integer. */
  readonly maxInFlight: number;
}

/**
 * The defaults: Let's Encrypt's published limits (https://letsencrypt.org/docs/rate-limits/, as of
 * 2025): "New Orders per Account": 300 per 3 hours; "Certificates per Registered Domain": 50 per
 * 7 days; "Authorization Failures per Hostname per Account" (the Failed Validation limit): 5 per
 * hour. The in-flight cap is Portico's own, not the CA's: it bounds the concurrent challenges and
 * the CA connections. Let's Encrypt exempts renewals of the same set of names from the first two
 * limits; this budget counts them anyway, on the safe side.
 */
export const LETS_ENCRYPT_ORDER_LIMITS: OrderBudgetLimits = Object.freeze({
  accountOrders: Object.freeze({ limit: 300, windowMs: 3 * HOUR_MS }),
  certificatesPerRegisteredDomain: Object.freeze({ limit: 50, windowMs: 7 * DAY_MS }),
  failedValidationsPerHostname: Object.freeze({ limit: 5, windowMs: HOUR_MS }),
  maxInFlight: 50,
});

/** The default `typicalOrderMs`: one minute. */
export const DEFAULT_TYPICAL_ORDER_MS = MINUTE_MS;

/** The default `staleAfterMs`: one hour. */
export const DEFAULT_STALE_AFTER_MS = HOUR_MS;

/** Event times (ms) inside a sliding window, oldest first; older ones are dropped as the clock passes. */
export class SlidingWindow {
  readonly #windowMs: number;
  /**
   * A window of one event holds an array of one (`[atMs]`): a push onto an empty array would
   * allocate room for 17 (152 bytes), kept for a week per registered domain (docs/performance.md).
   */
  #times: number[] = [];
  #head = 0;

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  get size(): number {
    return this.#times.length - this.#head;
  }

  add(atMs: number): void {
    const times = this.#times;
    if (this.size === 0) {
      this.#times = [atMs];
      this.#head = 0;
      return;
    }
    if ((times.at(-1) ?? -Infinity) <= atMs) {
      times.push(atMs);
      return;
    }
    let lo = this.#head;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((times[mid] ?? Infinity) <= atMs) lo = mid + 1;
      else hi = mid;
    }
    times.splice(lo, 0, atMs);
  }

  /** The events in the window (nowMs - windowMs, nowMs]: older ones are forgotten. */
  count(nowMs: number): number {
    const cutoff = nowMs - this.#windowMs;
    const times = this.#times;
    while (this.#head < times.length && (times[this.#head] ?? Infinity) <= cutoff) this.#head++;
    if (this.#head === times.length && this.#head > 0) {
      this.#times = [];
      this.#head = 0;
    } else if (this.#head > 0 && this.#head * 2 >= times.length) {
      times.splice(0, this.#head);
      this.#head = 0;
    }
    return this.size;
  }

  /** The time of the i-th oldest event held (0-based), ms. */
  at(i: number): number | undefined {
    return i < 0 ? undefined : this.#times[this.#head + i];
  }
}

/**
 * When the `position`-th request (1-based) in line for a windowed limit gets room, ms. Room comes
 * now while the window has some, then as each event held leaves the window (events not in the
 * window yet, `extra`, such as orders in flight, are assumed to enter it now); each admission in
 * turn enters the window and leaves it `windowMs` later, so the times repeat one window later for
 * every `limit` positions.
 */
export function slotTimeMs(
  position: number,
  { limit, windowMs }: WindowLimit,
  window: SlidingWindow,
  extra: number,
  nowMs: number,
): number {
  const held = window.count(nowMs);
  const free = limit - held - extra;
  const index = Math.max(0, position - 1);
  const cycle = Math.floor(index / limit);
  const place = index % limit;
  let baseMs = nowMs;
  if (place >= free) {
    const event = place - free;
    baseMs = event < held ? (window.at(event) ?? nowMs) + windowMs : nowMs + windowMs;
  }
  return Math.max(nowMs, baseMs + cycle * windowMs);
}

const UNITS: readonly (readonly [number, string])[] = [
  [DAY_MS, 'day'],
  [HOUR_MS, 'hour'],
  [MINUTE_MS, 'minute'],
  [SECOND_MS, 'second'],
  [1, 'millisecond'],
];

/** "3 hours", "7 days", "hour" (for "per hour"): the largest unit that divides `ms`. */
export function formatDuration(ms: number): string {
  for (const [size, name] of UNITS) {
    if (ms >= size && ms % size === 0) {
      const n = ms / size;
      return n === 1 ? name : `${n} ${name}s`;
    }
  }
  return `${ms} milliseconds`;
}

export function validMs(date: Date, name: string): number {
  const ms = date instanceof Date ? date.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new RangeError(`OrderBudget: ${name} must be a valid Date`);
  return ms;
}

export function checkCount(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`OrderBudget: ${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

export function checkWindow(name: string, value: WindowLimit): WindowLimit {
  checkCount(`${name}.limit`, value.limit);
  if (!Number.isFinite(value.windowMs) || value.windowMs <= 0) {
    throw new RangeError(
      `OrderBudget: ${name}.windowMs must be a positive, finite number of milliseconds, got ${String(value.windowMs)}`,
    );
  }
  return Object.freeze({ limit: value.limit, windowMs: value.windowMs });
}
