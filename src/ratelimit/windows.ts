/**
 * Fixed windows aligned to the clock, for a plan's requests per minute and per day: the minute from
 * :00.000 to :59.999 and the UTC day from 00:00 UTC (docs/ratelimits.md, "Degraded mode (Redis
 * down)", the paragraph on `X-RateLimit-Reset`).
 *
 * All times are Unix time in milliseconds (`Date.now()`); a Unix day is exactly 86 400 s (Unix time
 * has no leap seconds), so the UTC day starts at a multiple of 86 400 000 ms. Pure: the clock is a
 * parameter.
 */

export type WindowName = 'minute' | 'day';

/** Window lengths, milliseconds. */
export const WINDOW_MS: Readonly<Record<WindowName, number>> = { minute: 60_000, day: 86_400_000 };

/**
 * How long a counter outlives its window, milliseconds. The key names the window, so a late expiry is
 * harmless; it lets a replica whose clock runs a little behind still see the count of the window it
 * believes is current.
 */
export const COUNTER_GRACE_MS = 60_000;

/** One window instance, e.g. the minute 12:34:00.000–12:34:59.999 UTC. */
export interface TimeWindow {
  readonly name: WindowName;
  /** The window's number since the Unix epoch (start / length); part of the Redis key. */
  readonly index: number;
  /** Unix ms of the first instant in the window. */
  readonly startMs: number;
  /** Unix ms of the first instant after the window: when its counter resets. */
  readonly endMs: number;
}

/** The window of kind `name` that contains `nowMs` (Unix ms). */
export function windowAt(name: WindowName, nowMs: number): TimeWindow {
  const size = WINDOW_MS[name];
  const index = Math.floor(nowMs / size);
  return { name, index, startMs: index * size, endMs: (index + 1) * size };
}

/** Unix ms of the end of the window of kind `name` that contains `nowMs`: `windowAt(name, nowMs).endMs`. */
export function windowEndMs(name: WindowName, nowMs: number): number {
  const size = WINDOW_MS[name];
  return (Math.floor(nowMs / size) + 1) * size;
}

/** The minute and the UTC day that contain `nowMs` (Unix ms). */
export function currentWindows(nowMs: number): { minute: TimeWindow; day: TimeWindow } {
  return { minute: windowAt('minute', nowMs), day: windowAt('day', nowMs) };
}

/** The TTL to give a new counter of `window` at `nowMs`: until the window ends, plus the grace. Ms. */
export function counterTtlMs(window: TimeWindow, nowMs: number): number {
  return Math.max(1, window.endMs - nowMs) + COUNTER_GRACE_MS;
}

/**
 * Whole seconds from `nowMs` until `untilMs` (both Unix ms), rounded up and at least 1, so a client
 * that waits this long is past `untilMs` (the value of `Retry-After`, RFC 9110 §10.2.3 delay-seconds).
 */
export function secondsUntil(untilMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((untilMs - nowMs) / 1000));
}
