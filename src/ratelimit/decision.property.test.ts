/**
 * Properties of the rate-limit decision and its headers (src/ratelimit/decision.ts;
 * docs/ratelimits.md, "The answer"; RFC 9110 §10.2.3 for Retry-After), over generated limits,
 * counters, clocks and bans. Read-only use of the module.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  HEADER_LIMIT,
  HEADER_REMAINING,
  HEADER_RESET,
  HEADER_RETRY_AFTER,
  decide,
  headlineDecision,
  rateLimitHeaders,
  type CounterOutcome,
  type DescriptorDecision,
} from './decision.js';
import { windowEndMs } from './windows.js';

const limits = fc.record({
  perMinute: fc.integer({ min: 1, max: 1_000 }),
  perDay: fc.integer({ min: 1, max: 100_000 }),
});
/** Unix ms between 2020 and 2040. */
const nowMs = fc.integer({ min: 1_577_836_800_000, max: 2_208_988_800_000 });
const hits = fc.integer({ min: 1, max: 5 });

/** Counters after an admitted request: within both limits. */
const admitted = limits.chain((l) =>
  fc.tuple(
    fc.constant(l),
    fc.record({
      kind: fc.constant('admitted' as const),
      minuteUsed: fc.integer({ min: 0, max: l.perMinute }),
      dayUsed: fc.integer({ min: 0, max: l.perDay }),
    }),
  ),
);

/** Counters of a refused request: `hits` more would pass at least one limit. */
const limited = fc.tuple(limits, hits).chain(([l, h]) =>
  fc
    .record({
      kind: fc.constant('limited' as const),
      minuteUsed: fc.integer({ min: 0, max: l.perMinute + 10 }),
      dayUsed: fc.integer({ min: 0, max: l.perDay + 10 }),
    })
    .filter((o) => o.minuteUsed + h > l.perMinute || o.dayUsed + h > l.perDay)
    .map((o) => [l, h, o] as const),
);

const banned = fc.tuple(
  limits,
  fc.record({
    kind: fc.constantFrom('banned' as const, 'bannedNow' as const),
    minuteUsed: fc.nat({ max: 2_000 }),
    dayUsed: fc.nat({ max: 200_000 }),
    banTtlMs: fc.integer({ min: 1, max: 86_400_000 }),
  }),
);

/** Retry-After is whole seconds, at least 1, and waiting it is enough but not a second more. */
function expectRetryAfterReaches(decision: DescriptorDecision, now: number): void {
  const seconds = decision.retryAfterSeconds ?? Number.NaN;
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeGreaterThanOrEqual(1);
  expect(now + seconds * 1000).toBeGreaterThanOrEqual(decision.report.resetMs);
  if (seconds > 1) expect(now + (seconds - 1) * 1000).toBeLessThan(decision.report.resetMs);
}

describe('decide properties', () => {
  it('admits with the fewest requests left of the two windows, and a reset in the future', () => {
    fc.assert(
      fc.property(admitted, hits, nowMs, ([l, outcome], h, now) => {
        const d = decide(l, outcome, h, now);
        expect(d.code).toBe('OK');
        expect(d.retryAfterSeconds).toBeUndefined();
        const left = Math.min(l.perMinute - outcome.minuteUsed, l.perDay - outcome.dayUsed);
        expect(d.report.remaining).toBe(left);
        expect(d.report.limit).toBe(d.report.window === 'minute' ? l.perMinute : l.perDay);
        expect(d.report.resetMs).toBe(windowEndMs(d.report.window, now));
        expect(d.report.resetMs).toBeGreaterThan(now);
      }),
    );
  });

  it('refuses naming a window that the request would pass, with nothing left and a Retry-After that reaches its reset', () => {
    fc.assert(
      fc.property(limited, nowMs, ([l, h, outcome], now) => {
        const d = decide(l, outcome, h, now);
        expect(d.code).toBe('OVER_LIMIT');
        expect(d.report.remaining).toBe(0);
        const used = d.reason === 'minute' ? outcome.minuteUsed : outcome.dayUsed;
        const limit = d.reason === 'minute' ? l.perMinute : l.perDay;
        expect(used + h).toBeGreaterThan(limit);
        expect(d.report.limit).toBe(limit);
        expectRetryAfterReaches(d, now);
      }),
    );
  });

  it('refuses a banned key until the ban ends', () => {
    fc.assert(
      fc.property(banned, hits, nowMs, ([l, outcome], h, now) => {
        const d = decide(l, outcome, h, now);
        expect(d).toMatchObject({ code: 'OVER_LIMIT', reason: 'banned' });
        expect(d.report.resetMs).toBe(now + outcome.banTtlMs);
        expect(d.report.remaining).toBe(0);
        expectRetryAfterReaches(d, now);
      }),
    );
  });
});

describe('headers and headline properties', () => {
  const decision = fc.oneof(
    fc.tuple(admitted, hits, nowMs).map(([[l, o], h, now]) => decide(l, o, h, now)),
    fc.tuple(limited, nowMs).map(([[l, h, o], now]) => decide(l, o, h, now)),
    fc.tuple(banned, hits, nowMs).map(([[l, o], h, now]) => decide(l, o as CounterOutcome, h, now)),
  );

  it('writes the three X-RateLimit headers as non-negative integers, and Retry-After only on OVER_LIMIT', () => {
    fc.assert(
      fc.property(decision, (d) => {
        const headers = new Map(rateLimitHeaders(d).map((h) => [h.key, h.value]));
        for (const value of headers.values()) expect(value).toMatch(/^\d+$/);
        expect(headers.get(HEADER_LIMIT)).toBe(String(d.report.limit));
        expect(headers.get(HEADER_REMAINING)).toBe(String(d.report.remaining));
        // Unix seconds, rounded up: a client that waits until then is past the reset.
        const reset = Number(headers.get(HEADER_RESET));
        expect(reset * 1000).toBeGreaterThanOrEqual(d.report.resetMs);
        expect((reset - 1) * 1000).toBeLessThan(d.report.resetMs);
        expect(headers.has(HEADER_RETRY_AFTER)).toBe(d.code === 'OVER_LIMIT');
      }),
    );
  });

  it('headlines a refusal with the longest wait, else the admission with the fewest left, in any order', () => {
    fc.assert(
      fc.property(fc.array(decision, { minLength: 1, maxLength: 5 }), fc.nat(), (decisions, seed) => {
        const h = headlineDecision(decisions);
        expect(h).toBeDefined();
        if (h === undefined) return;
        const refused = decisions.filter((d) => d.code === 'OVER_LIMIT');
        if (refused.length > 0) {
          expect(h.code).toBe('OVER_LIMIT');
          expect(h.retryAfterSeconds).toBe(Math.max(...refused.map((d) => d.retryAfterSeconds ?? 0)));
        } else {
          expect(h.report.remaining).toBe(Math.min(...decisions.map((d) => d.report.remaining)));
        }
        const rotated = decisions.map(
          (_, i) => decisions[(i + seed) % decisions.length] as DescriptorDecision,
        );
        const again = headlineDecision(rotated);
        expect([again?.code, again?.retryAfterSeconds, again?.report.remaining]).toEqual([
          h.code,
          h.retryAfterSeconds,
          h.report.remaining,
        ]);
      }),
    );
  });

  it('has no headline for no descriptor', () => {
    expect(headlineDecision([])).toBeUndefined();
  });
});
