import { describe, expect, it } from 'vitest';
import { parseRedisTime, RedisClockOffset, REPLY_MARGIN_MS, scriptBudgetMs } from './redis-clock.js';

/** A node whose clock is `offsetMs` ahead of the local monotonic clock, measured over `sentMs..receivedMs`. */
const sample = (offsetMs: number, sentMs: number, receivedMs: number, executedMs = sentMs) => ({
  sentMs,
  receivedMs,
  redisMs: executedMs + offsetMs,
});

describe('RedisClockOffset', () => {
  it('knows nothing before a measurement', () => {
    const clock = new RedisClockOffset();
    expect(clock.lowerBoundMs).toBeUndefined();
    expect(clock.toRedisMs(1000)).toBeUndefined();
    clock.update([undefined]);
    expect(clock.lowerBoundMs).toBeUndefined();
  });

  it('never puts a deadline later than the true one, whatever the skew', () => {
    for (const skew of [-3_600_000, -1500, 0, 250, 1_700_000_000_000]) {
      const clock = new RedisClockOffset();
      // TIME sent at 100, run by Redis at 102, its reply read at 105.
      clock.update([sample(skew, 100, 105, 102)]);
      const deadline = clock.toRedisMs(1000) ?? Number.NaN;
      // The true instant in Redis's clock is 1000 + skew; the deadline is early by the reply's 3 ms.
      expect(deadline).toBeLessThanOrEqual(1000 + skew);
      expect(deadline).toBe(1000 + skew - 3);
    }
  });

  it('takes the slowest clock of a cluster, and only lowers the estimate when a node did not answer', () => {
    const clock = new RedisClockOffset();
    clock.update([sample(500, 0, 1), sample(200, 0, 1), sample(900, 0, 1)]);
    expect(clock.lowerBoundMs).toBe(199);
    // A complete round replaces the estimate.
    clock.update([sample(600, 10, 11), sample(400, 10, 11), sample(900, 10, 11)]);
    expect(clock.lowerBoundMs).toBe(399);
    // A node missing: the lower of the old estimate and what answered.
    clock.update([sample(600, 20, 21), undefined, sample(900, 20, 21)]);
    expect(clock.lowerBoundMs).toBe(399);
    clock.update([sample(100, 30, 31), undefined, sample(900, 30, 31)]);
    expect(clock.lowerBoundMs).toBe(99);
  });

  it('rounds the deadline down', () => {
    const clock = new RedisClockOffset();
    clock.update([{ sentMs: 0.2, receivedMs: 0.7, redisMs: 1000 }]);
    expect(clock.toRedisMs(10.9)).toBe(1010);
  });
});

describe('parseRedisTime', () => {
  it('reads seconds and microseconds as Unix ms', () => {
    expect(parseRedisTime(['1764000000', '123999'])).toBe(1_764_000_000_123);
  });

  it('refuses anything else', () => {
    expect(() => parseRedisTime('OK')).toThrow(TypeError);
    expect(() => parseRedisTime(['1', 'x'])).toThrow(/TIME/);
  });
});

describe('scriptBudgetMs', () => {
  it('leaves the reply margin, at most half the timeout', () => {
    expect(scriptBudgetMs(500)).toBe(500 - REPLY_MARGIN_MS);
    expect(scriptBudgetMs(60)).toBe(30);
  });
});
