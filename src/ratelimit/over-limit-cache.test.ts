import { describe, expect, it } from 'vitest';
import { OverLimitCache } from './over-limit-cache.js';

/** 2026-11-22T12:34:10Z: 50 s to the end of the minute. */
const NOW = Date.parse('2026-11-22T12:34:10.000Z');
const MINUTE_END = Date.parse('2026-11-22T12:35:00.000Z');
const LIMITS = { perMinute: 60, perDay: 1000 };

describe('OverLimitCache', () => {
  it('keeps a full minute of a policy without a ban until the minute ends', () => {
    const cache = new OverLimitCache();
    cache.remember('k', LIMITS, { kind: 'limited', minuteUsed: 60, dayUsed: 70 }, 0, NOW);
    expect(cache.get('k', LIMITS, NOW + 1_000)).toEqual({ kind: 'limited', minuteUsed: 60, dayUsed: 70 });
    expect(cache.get('k', LIMITS, MINUTE_END)).toBeUndefined();
  });

  it('does not keep a refusal that a smaller request could pass, nor one of a policy with a ban', () => {
    const cache = new OverLimitCache();
    cache.remember('partial', LIMITS, { kind: 'limited', minuteUsed: 58, dayUsed: 70 }, 0, NOW);
    cache.remember('banning', LIMITS, { kind: 'limited', minuteUsed: 60, dayUsed: 70 }, 20, NOW);
    cache.remember('admitted', LIMITS, { kind: 'admitted', minuteUsed: 60, dayUsed: 70 }, 0, NOW);
    expect(cache.size).toBe(0);
  });

  it('keeps a ban until it ends, with the time left', () => {
    const cache = new OverLimitCache();
    cache.remember(
      'b',
      LIMITS,
      { kind: 'bannedNow', minuteUsed: 60, dayUsed: 70, banTtlMs: 900_000 },
      20,
      NOW,
    );
    expect(cache.get('b', LIMITS, NOW + 100_000)).toMatchObject({ kind: 'banned', banTtlMs: 800_000 });
    expect(cache.get('b', LIMITS, NOW + 900_000)).toBeUndefined();
  });

  it('asks Redis again when the limits changed', () => {
    const cache = new OverLimitCache();
    cache.remember('k', LIMITS, { kind: 'limited', minuteUsed: 60, dayUsed: 70 }, 0, NOW);
    expect(cache.get('k', { perMinute: 300, perDay: 1000 }, NOW)).toBeUndefined();
  });

  it('keeps at most maxEntries', () => {
    const cache = new OverLimitCache(2);
    for (const k of ['a', 'b', 'c']) {
      cache.remember(k, LIMITS, { kind: 'limited', minuteUsed: 60, dayUsed: 70 }, 0, NOW);
    }
    expect(cache.size).toBe(2);
    expect(cache.get('a', LIMITS, NOW)).toBeUndefined();
  });
});
