import { describe, expect, it } from 'vitest';
import { LocalCounterStore } from './local-counts.js';
import { counterKeys } from './redis-keys.js';
import type { CheckArgs } from './redis-store.js';
import { counterTtlMs, currentWindows } from './windows.js';

/** 2026-11-22T12:34:10Z: 50 s to the end of the minute. */
const NOW = Date.parse('2026-11-22T12:34:10.000Z');

function argsAt(nowMs: number, extra: Partial<CheckArgs> = {}): CheckArgs {
  const w = currentWindows(nowMs);
  return {
    hits: 1,
    minuteLimit: 3,
    dayLimit: 5,
    minuteTtlMs: counterTtlMs(w.minute, nowMs),
    dayTtlMs: counterTtlMs(w.day, nowMs),
    banThreshold: 0,
    banDurationMs: 0,
    ...extra,
  };
}

describe('LocalCounterStore', () => {
  it('admits up to the minute limit, refuses without counting, and starts again in the next minute', () => {
    let now = NOW;
    const store = new LocalCounterStore(() => now);
    const keysAt = (t: number) => counterKeys('ns/p', 'k', currentWindows(t));
    const outcomes = Array.from({ length: 4 }, () => store.checkAndCountNow(keysAt(now), argsAt(now)).kind);
    expect(outcomes).toEqual(['admitted', 'admitted', 'admitted', 'limited']);
    now += 50_000; // the next minute
    expect(store.checkAndCountNow(keysAt(now), argsAt(now))).toEqual({
      kind: 'admitted',
      minuteUsed: 1,
      dayUsed: 4,
    });
    // The day (5) refuses before the minute does.
    store.checkAndCountNow(keysAt(now), argsAt(now));
    expect(store.checkAndCountNow(keysAt(now), argsAt(now))).toEqual({
      kind: 'limited',
      minuteUsed: 2,
      dayUsed: 5,
    });
  });

  it('bans past the threshold for the ban duration, then is back to its windows', () => {
    let now = NOW;
    const store = new LocalCounterStore(() => now);
    const keys = counterKeys('ns/p', 'b', currentWindows(now));
    const args = argsAt(now, { minuteLimit: 1, banThreshold: 2, banDurationMs: 5_000 });
    const kinds = Array.from({ length: 5 }, () => store.checkAndCountNow(keys, args).kind);
    expect(kinds).toEqual(['admitted', 'limited', 'limited', 'bannedNow', 'banned']);
    now += 4_000;
    expect(store.checkAndCountNow(keys, args)).toMatchObject({ kind: 'banned', banTtlMs: 1_000 });
    now += 1_000;
    expect(store.checkAndCountNow(keys, args).kind).toBe('limited');
  });

  it('forgets refusals at the end of the window that refused them (not its counters, which keep a grace)', () => {
    let now = NOW; // 50 s left in the minute
    const store = new LocalCounterStore(() => now);
    const keysAt = (t: number) => counterKeys('ns/p', 'w', currentWindows(t));
    const argsNow = (t: number) => argsAt(t, { minuteLimit: 1, banThreshold: 2, banDurationMs: 60_000 });
    // Minute N: the limit, then two refusals (as many as allowed without a ban).
    const first = [0, 1, 2].map(() => store.checkAndCountNow(keysAt(now), argsNow(now)).kind);
    expect(first).toEqual(['admitted', 'limited', 'limited']);
    // Minute N+1: two refusals more are allowed again; the third within this window bans.
    now += 50_500;
    const next = [0, 1, 2, 3].map(() => store.checkAndCountNow(keysAt(now), argsNow(now)).kind);
    expect(next).toEqual(['admitted', 'limited', 'limited', 'bannedNow']);
  });

  it('keeps at most maxKeys keys, dropping the oldest written first', () => {
    const store = new LocalCounterStore(() => NOW, 8);
    for (let i = 0; i < 10; i++) {
      store.checkAndCountNow(counterKeys('ns/p', `k${i}`, currentWindows(NOW)), argsAt(NOW));
    }
    expect(store.size).toBeLessThanOrEqual(8);
    // k0 was dropped: it starts from zero; k9 kept its count.
    expect(store.checkAndCountNow(counterKeys('ns/p', 'k0', currentWindows(NOW)), argsAt(NOW))).toMatchObject(
      {
        minuteUsed: 1,
      },
    );
    expect(store.checkAndCountNow(counterKeys('ns/p', 'k9', currentWindows(NOW)), argsAt(NOW))).toMatchObject(
      {
        minuteUsed: 2,
      },
    );
  });
});
