import { describe, expect, it } from 'vitest';
import { SlidingWindow, checkWindow, formatDuration, slotTimeMs } from './order-limits.js';

const S = 1_000;

describe('SlidingWindow', () => {
  it('counts the events in (now - window, now], oldest first, whatever order they were added in', () => {
    const window = new SlidingWindow(60 * S);
    window.add(10 * S);
    window.add(0);
    window.add(20 * S);
    expect(window.count(30 * S)).toBe(3);
    expect([window.at(0), window.at(1), window.at(2)]).toEqual([0, 10 * S, 20 * S]);
    // The event at 0 leaves the window at 60 s exactly; the one at 10 s at 70 s.
    expect(window.count(60 * S)).toBe(2);
    expect(window.at(0)).toBe(10 * S);
    expect(window.count(80 * S)).toBe(0);
    expect(window.at(0)).toBeUndefined();
  });
});

describe('slotTimeMs (when a place in line gets room)', () => {
  // 3 per minute; 2 events held (at 0 and 10 s); now 20 s: room for one now.
  const limit = { limit: 3, windowMs: 60 * S };
  const window = new SlidingWindow(limit.windowMs);
  window.add(0);
  window.add(10 * S);
  const now = 20 * S;

  it('is now while the window has room, then as each held event leaves, then one window later per `limit` places', () => {
    expect(slotTimeMs(1, limit, window, 0, now)).toBe(now);
    expect(slotTimeMs(2, limit, window, 0, now)).toBe(60 * S);
    expect(slotTimeMs(3, limit, window, 0, now)).toBe(70 * S);
    expect(slotTimeMs(4, limit, window, 0, now)).toBe(now + 60 * S);
  });

  it('counts events not yet in the window (orders in flight) as entering it now', () => {
    expect(slotTimeMs(1, limit, window, 1, now)).toBe(60 * S);
  });
});

describe('the limits as the messages name them, and their checks', () => {
  it('names a duration by the largest unit that divides it', () => {
    expect(formatDuration(3 * 3_600 * S)).toBe('3 hours');
    expect(formatDuration(3_600 * S)).toBe('hour');
    expect(formatDuration(7 * 86_400 * S)).toBe('7 days');
    expect(formatDuration(1_500)).toBe('1500 milliseconds');
  });

  it('refuses a limit that is not a positive integer, or a window that is not a positive, finite number of ms', () => {
    expect(() => checkWindow('accountOrders', { limit: 0, windowMs: 1 })).toThrow(RangeError);
    expect(() => checkWindow('accountOrders', { limit: 1.5, windowMs: 1 })).toThrow(RangeError);
    expect(() => checkWindow('accountOrders', { limit: 1, windowMs: 0 })).toThrow(RangeError);
    expect(() => checkWindow('accountOrders', { limit: 1, windowMs: Infinity })).toThrow(
      'OrderBudget: accountOrders.windowMs must be a positive, finite number of milliseconds, got Infinity',
    );
    expect(checkWindow('accountOrders', { limit: 2, windowMs: 5 })).toEqual({ limit: 2, windowMs: 5 });
  });
});
