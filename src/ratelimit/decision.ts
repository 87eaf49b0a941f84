/**
 * From the counters to the answer: the code, which window the headers describe, and the header
 * values (docs/ratelimits.md, "The answer"; 429 Too Many Requests and Retry-After, RFC 6585 §4).
 *
 * - OK: the headers describe the window closest to its limit, i.e. with the fewest requests left
 *   (the number a client can really still send); on a tie, the one that resets later.
 * - OVER_LIMIT: the headers describe the window that refused the request; if both refused, the one
 *   that resets later (the client must wait for both). `Retry-After` is the seconds until it resets.
 * - Banned: `X-RateLimit-Remaining` is 0 and `X-RateLimit-Reset` and `Retry-After` say when the ban
 *   ends; `X-RateLimit-Limit` is the limit of the window closest to its limit.
 *
 * `X-RateLimit-Reset` is Unix time in seconds; `Retry-After` is delay-seconds (RFC 9110 §10.2.3).
 * Pure: the clock is a parameter.
 */
import type { WindowLimits } from './limits.js';
import { secondsUntil, windowEndMs, type WindowName } from './windows.js';

/** What the Lua script found and did, for one descriptor. */
export type CounterOutcome =
  /** Admitted and counted; `*Used` include this request. */
  | { readonly kind: 'admitted'; readonly minuteUsed: number; readonly dayUsed: number }
  /** Refused by a limit; not counted. */
  | { readonly kind: 'limited'; readonly minuteUsed: number; readonly dayUsed: number }
  /** Refused, and this refusal started a ban of `banTtlMs` milliseconds. */
  | {
      readonly kind: 'bannedNow';
      readonly minuteUsed: number;
      readonly dayUsed: number;
      readonly banTtlMs: number;
    }
  /** Refused because the key is banned for `banTtlMs` more milliseconds. */
  | {
      readonly kind: 'banned';
      readonly minuteUsed: number;
      readonly dayUsed: number;
      readonly banTtlMs: number;
    };

/** One window as the headers describe it. */
export interface WindowReport {
  readonly window: WindowName;
  /** The limit of the window (requests). */
  readonly limit: number;
  /** Requests left in the window (0 when refused or banned). */
  readonly remaining: number;
  /** Unix ms when the client may send again: the window's end, or the ban's end. */
  readonly resetMs: number;
}

export interface DescriptorDecision {
  readonly code: 'OK' | 'OVER_LIMIT';
  /** Why: admitted, refused by the minute or the day window, or banned. */
  readonly reason: 'admitted' | 'minute' | 'day' | 'banned';
  readonly report: WindowReport;
  /** Seconds to wait; only for OVER_LIMIT. */
  readonly retryAfterSeconds?: number;
}

export interface HeaderValue {
  readonly key: string;
  readonly value: string;
}

export const HEADER_LIMIT = 'X-RateLimit-Limit';
export const HEADER_REMAINING = 'X-RateLimit-Remaining';
export const HEADER_RESET = 'X-RateLimit-Reset';
export const HEADER_RETRY_AFTER = 'Retry-After';

interface WindowState {
  readonly window: WindowName;
  readonly limit: number;
  readonly used: number;
  readonly resetMs: number;
}

function states(
  limits: WindowLimits,
  minuteUsed: number,
  dayUsed: number,
  nowMs: number,
): [WindowState, WindowState] {
  return [
    { window: 'minute', limit: limits.perMinute, used: minuteUsed, resetMs: windowEndMs('minute', nowMs) },
    { window: 'day', limit: limits.perDay, used: dayUsed, resetMs: windowEndMs('day', nowMs) },
  ];
}

const remainingOf = (s: WindowState): number => Math.max(0, s.limit - s.used);

/** The window with the fewest requests left; on a tie the one that resets later. */
export function closestToLimit<T extends WindowState>(windows: readonly [T, ...T[]]): T {
  let best = windows[0];
  for (let i = 1; i < windows.length; i++) {
    const s = windows[i] as T;
    const r = remainingOf(s);
    const b = remainingOf(best);
    if (r < b || (r === b && s.resetMs > best.resetMs)) best = s;
  }
  return best;
}

const report = (s: WindowState): WindowReport => ({
  window: s.window,
  limit: s.limit,
  remaining: remainingOf(s),
  resetMs: s.resetMs,
});

/**
 * The decision for one descriptor.
 *
 * @param hits the request's hits (at least 1)
 * @param nowMs Unix ms of the check (the same instant the counters' windows were chosen at)
 */
export function decide(
  limits: WindowLimits,
  outcome: CounterOutcome,
  hits: number,
  nowMs: number,
): DescriptorDecision {
  const [minute, day] = states(limits, outcome.minuteUsed, outcome.dayUsed, nowMs);
  switch (outcome.kind) {
    case 'admitted':
      return { code: 'OK', reason: 'admitted', report: report(closestToLimit([minute, day])) };
    case 'limited': {
      const refusing = [minute, day].filter((s) => s.used + hits > s.limit);
      const by = refusing.reduce((a, b) => (b.resetMs > a.resetMs ? b : a), refusing[0] ?? minute);
      return {
        code: 'OVER_LIMIT',
        reason: by.window,
        report: { ...report(by), remaining: 0 },
        retryAfterSeconds: secondsUntil(by.resetMs, nowMs),
      };
    }
    case 'banned':
    case 'bannedNow': {
      const endMs = nowMs + outcome.banTtlMs;
      const closest = closestToLimit([minute, day]);
      return {
        code: 'OVER_LIMIT',
        reason: 'banned',
        report: { window: closest.window, limit: closest.limit, remaining: 0, resetMs: endMs },
        retryAfterSeconds: secondsUntil(endMs, nowMs),
      };
    }
  }
}

/**
 * Of several descriptors' decisions, the one the response headers describe: a refusal over an
 * admission (the longest wait among refusals), else the admission with the fewest requests left
 * (on a tie, the later reset). Undefined for an empty list.
 */
export function headlineDecision(decisions: readonly DescriptorDecision[]): DescriptorDecision | undefined {
  const refused = decisions.filter((d) => d.code === 'OVER_LIMIT');
  if (refused.length > 0) {
    return refused.reduce((a, b) => ((b.retryAfterSeconds ?? 0) > (a.retryAfterSeconds ?? 0) ? b : a));
  }
  return decisions.reduce<DescriptorDecision | undefined>((a, b) => {
    if (a === undefined) return b;
    const better =
      b.report.remaining < a.report.remaining ||
      (b.report.remaining === a.report.remaining && b.report.resetMs > a.report.resetMs);
    return better ? b : a;
  }, undefined);
}

/**
 * The headers of a decision, for `response_headers_to_add`: X-RateLimit-Limit, X-RateLimit-Remaining,
 * X-RateLimit-Reset (Unix seconds, rounded up), and on OVER_LIMIT also Retry-After (seconds).
 */
export function rateLimitHeaders(decision: DescriptorDecision): HeaderValue[] {
  const headers: HeaderValue[] = [
    { key: HEADER_LIMIT, value: String(decision.report.limit) },
    { key: HEADER_REMAINING, value: String(decision.report.remaining) },
    { key: HEADER_RESET, value: String(Math.ceil(decision.report.resetMs / 1000)) },
  ];
  if (decision.code === 'OVER_LIMIT' && decision.retryAfterSeconds !== undefined) {
    headers.push({ key: HEADER_RETRY_AFTER, value: String(decision.retryAfterSeconds) });
  }
  return headers;
}
