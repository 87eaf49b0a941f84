import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { lowerFloor, MemoryReducer, reductionDue, type MemoryReducerPolicy } from './memory-reducer.js';

const MiB = 1024 * 1024;
const policy: MemoryReducerPolicy = {
  checkMs: 15_000,
  growthBytes: 48 * MiB,
  minGapMs: 60_000,
  idleMs: 30_000,
  idleGrowthBytes: 16 * MiB,
};
const busy = { idleSinceMs: undefined };

describe('reductionDue', () => {
  it('only sets the floor at the first look', () => {
    expect(
      reductionDue({ floorBytes: undefined, lastReducedAtMs: undefined, ...busy }, 900 * MiB, 0, policy),
    ).toBe(false);
    expect(lowerFloor({ floorBytes: undefined, lastReducedAtMs: undefined, ...busy }, 120 * MiB)).toBe(
      120 * MiB,
    );
  });

  it('asks once the resident set grew by growthBytes over the floor, not sooner', () => {
    const state = { floorBytes: 120 * MiB, lastReducedAtMs: undefined, ...busy };
    expect(reductionDue(state, 167 * MiB, 0, policy)).toBe(false);
    expect(reductionDue(state, 168 * MiB, 0, policy)).toBe(true);
  });

  it('waits minGapMs after a reduction, however much it grew', () => {
    const state = { floorBytes: 120 * MiB, lastReducedAtMs: 1_000_000, ...busy };
    expect(reductionDue(state, 400 * MiB, 1_059_999, policy)).toBe(false);
    expect(reductionDue(state, 400 * MiB, 1_060_000, policy)).toBe(true);
  });

  it('asks for less growth once the work queue has been empty for idleMs', () => {
    const idle = { floorBytes: 120 * MiB, lastReducedAtMs: undefined, idleSinceMs: 0 };
    expect(reductionDue(idle, 136 * MiB, 29_999, policy)).toBe(false);
    expect(reductionDue(idle, 136 * MiB, 30_000, policy)).toBe(true);
    expect(reductionDue(idle, 135 * MiB, 30_000, policy)).toBe(false);
    expect(reductionDue({ ...idle, ...busy }, 136 * MiB, 30_000, policy)).toBe(false);
  });

  it('lowers the floor, never raises it', () => {
    expect(lowerFloor({ floorBytes: 150 * MiB, lastReducedAtMs: undefined, ...busy }, 130 * MiB)).toBe(
      130 * MiB,
    );
    expect(lowerFloor({ floorBytes: 150 * MiB, lastReducedAtMs: undefined, ...busy }, 300 * MiB)).toBe(
      150 * MiB,
    );
  });
});

describe('MemoryReducer', () => {
  it('runs a real collection when due, counts it, and measures from the level after it', async () => {
    const registry = new Registry();
    const reductions = new Counter({ name: 'reductions', help: 'x', registers: [registry] });
    let rss = 120 * MiB;
    let now = 0;
    const reducer = new MemoryReducer({
      policy,
      log: pino({ level: 'silent' }),
      reductions,
      rss: () => rss,
      now: () => now,
    });
    expect(await reducer.check()).toBe(false); // the floor: 120 MiB
    rss = 160 * MiB;
    expect(await reducer.check()).toBe(false);
    rss = 170 * MiB;
    expect(await reducer.check()).toBe(true);
    expect((await reductions.get()).values[0]?.value).toBe(1);
    // The floor is now 170 MiB (the fake RSS did not move): 200 MiB is not 48 MiB of growth.
    now = 120_000;
    rss = 200 * MiB;
    expect(await reducer.check()).toBe(false);
    rss = 218 * MiB;
    expect(await reducer.check()).toBe(true);
    expect((await reductions.get()).values[0]?.value).toBe(2);
  });

  it('reduces after a burst once the queue has been empty for idleMs, with less growth', async () => {
    let rss = 200 * MiB;
    let now = 0;
    let idle = false;
    const reducer = new MemoryReducer({
      policy,
      log: pino({ level: 'silent' }),
      rss: () => rss,
      now: () => now,
      isIdle: () => idle,
    });
    expect(await reducer.check()).toBe(false); // the floor: 200 MiB
    rss = 230 * MiB;
    now = 15_000;
    expect(await reducer.check()).toBe(false); // busy: 30 MiB is not 48
    idle = true;
    now = 30_000;
    expect(await reducer.check()).toBe(false); // empty since 30 s, not for 30 s yet
    now = 60_000;
    expect(await reducer.check()).toBe(true);
  });
});
