import { describe, expect, it } from 'vitest';
import type { WindowName } from './windows.js';
import { closestToLimit, decide, headlineDecision, rateLimitHeaders } from './decision.js';

const FREE = { perMinute: 60, perDay: 1000 };
/** 2026-11-22T12:34:10Z: 50 s to the end of the minute. */
const NOW = Date.parse('2026-11-22T12:34:10.000Z');
const MINUTE_END_S = Date.parse('2026-11-22T12:35:00.000Z') / 1000;
const DAY_END_S = Date.parse('2026-11-23T00:00:00.000Z') / 1000;

const headers = (h: { key: string; value: string }[]): Record<string, string> =>
  Object.fromEntries(h.map((x) => [x.key, x.value]));

describe('decide', () => {
  it('reports the minute window when it has fewer requests left', () => {
    const d = decide(FREE, { kind: 'admitted', minuteUsed: 1, dayUsed: 1 }, 1, NOW);
    expect(d.code).toBe('OK');
    expect(headers(rateLimitHeaders(d))).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '59',
      'X-RateLimit-Reset': String(MINUTE_END_S),
    });
  });

  it('reports the day window once it is closer to its limit', () => {
    const d = decide(FREE, { kind: 'admitted', minuteUsed: 5, dayUsed: 990 }, 1, NOW);
    expect(headers(rateLimitHeaders(d))).toEqual({
      'X-RateLimit-Limit': '1000',
      'X-RateLimit-Remaining': '10',
      'X-RateLimit-Reset': String(DAY_END_S),
    });
  });

  it('refuses the 61st request of a minute with the four headers', () => {
    const d = decide(FREE, { kind: 'limited', minuteUsed: 60, dayUsed: 60 }, 1, NOW);
    expect(d).toMatchObject({ code: 'OVER_LIMIT', reason: 'minute', retryAfterSeconds: 50 });
    expect(headers(rateLimitHeaders(d))).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(MINUTE_END_S),
      'Retry-After': '50',
    });
  });

  it('names the day window when the day is spent, even with minute quota left', () => {
    const d = decide(FREE, { kind: 'limited', minuteUsed: 3, dayUsed: 1000 }, 1, NOW);
    expect(d.reason).toBe('day');
    expect(d.retryAfterSeconds).toBe(DAY_END_S - NOW / 1000);
  });

  it('when both windows refuse, waits for the later reset', () => {
    const d = decide(FREE, { kind: 'limited', minuteUsed: 60, dayUsed: 1000 }, 1, NOW);
    expect(d.reason).toBe('day');
  });

  it('refuses hits that do not fit although requests are left', () => {
    const d = decide(FREE, { kind: 'limited', minuteUsed: 58, dayUsed: 58 }, 5, NOW);
    expect(d).toMatchObject({ code: 'OVER_LIMIT', reason: 'minute' });
  });

  it('says when a ban ends', () => {
    const d = decide(FREE, { kind: 'banned', minuteUsed: 60, dayUsed: 80, banTtlMs: 899_500 }, 1, NOW);
    expect(headers(rateLimitHeaders(d))).toEqual({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil((NOW + 899_500) / 1000)),
      'Retry-After': '900',
    });
  });
});

describe('closestToLimit and headlineDecision', () => {
  it('breaks a tie of remaining by the later reset', () => {
    const a = { window: 'minute' as WindowName, limit: 10, used: 10, resetMs: 1 };
    const b = { window: 'day' as WindowName, limit: 10, used: 10, resetMs: 2 };
    expect(closestToLimit([a, b])).toBe(b);
  });

  it('prefers a refusal, the longest wait among refusals', () => {
    const ok = decide(FREE, { kind: 'admitted', minuteUsed: 59, dayUsed: 59 }, 1, NOW);
    const minute = decide(FREE, { kind: 'limited', minuteUsed: 60, dayUsed: 60 }, 1, NOW);
    const day = decide(FREE, { kind: 'limited', minuteUsed: 1, dayUsed: 1000 }, 1, NOW);
    expect(headlineDecision([ok, minute, day])).toBe(day);
    expect(headlineDecision([ok])).toBe(ok);
    expect(headlineDecision([])).toBeUndefined();
  });
});
