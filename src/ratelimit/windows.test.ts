import { describe, expect, it } from 'vitest';
import { COUNTER_GRACE_MS, counterTtlMs, currentWindows, secondsUntil, windowAt } from './windows.js';

const at = (iso: string): number => Date.parse(iso);

describe('windows', () => {
  it('aligns the minute to the clock and the day to UTC midnight', () => {
    const now = at('2026-11-22T12:34:56.789Z');
    const { minute, day } = currentWindows(now);
    expect(new Date(minute.startMs).toISOString()).toBe('2026-11-22T12:34:00.000Z');
    expect(new Date(minute.endMs).toISOString()).toBe('2026-11-22T12:35:00.000Z');
    expect(new Date(day.startMs).toISOString()).toBe('2026-11-22T00:00:00.000Z');
    expect(new Date(day.endMs).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(minute.index).toBe(Math.floor(now / 60_000));
  });

  it('puts the last millisecond of a window in it and the next one in the next window', () => {
    const end = at('2026-11-22T12:35:00.000Z');
    expect(windowAt('minute', end - 1).endMs).toBe(end);
    expect(windowAt('minute', end).startMs).toBe(end);
    expect(windowAt('day', at('2026-11-22T23:59:59.999Z')).index + 1).toBe(
      windowAt('day', at('2026-11-23T00:00:00.000Z')).index,
    );
  });

  it('keeps a counter until its window ends plus the grace', () => {
    const now = at('2026-11-22T12:34:50.000Z');
    expect(counterTtlMs(windowAt('minute', now), now)).toBe(10_000 + COUNTER_GRACE_MS);
  });

  it('rounds seconds-until up, at least 1', () => {
    expect(secondsUntil(60_000, 10_300)).toBe(50);
    expect(secondsUntil(60_000, 59_999)).toBe(1);
    expect(secondsUntil(60_000, 60_000)).toBe(1);
  });
});
