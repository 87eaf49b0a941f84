import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  holdsNewWork,
  lowerFloor,
  MemoryHold,
  MemoryReducer,
  reductionDue,
  targetGapAfter,
  type MemoryReducerPolicy,
} from './memory-reducer.js';

const MiB = 1024 * 1024;
const policy: MemoryReducerPolicy = {
  checkMs: 15_000,
  growthBytes: 48 * MiB,
  minGapMs: 60_000,
  idleMs: 30_000,
  idleGrowthBytes: 16 * MiB,
  targetBytes: 0,
  targetGapMs: 10_000,
  maxTargetGapMs: 300_000,
  targetOvershootBytes: 8 * MiB,
  urgentTargetGapMs: 3_000,
};
const busy = { idleSinceMs: undefined, targetGapMs: 10_000 };
const withTarget: MemoryReducerPolicy = { ...policy, targetBytes: 240 * MiB };

describe('reductionDue', () => {
  it('only sets the floor at the first look', () => {
    expect(
      reductionDue({ floorBytes: undefined, lastReducedAtMs: undefined, ...busy }, 900 * MiB, 0, policy),
    ).toBeUndefined();
    expect(lowerFloor({ floorBytes: undefined, lastReducedAtMs: undefined, ...busy }, 120 * MiB)).toBe(
      120 * MiB,
    );
  });

  it('asks once the resident set grew by growthBytes over the floor, not sooner', () => {
    const state = { floorBytes: 120 * MiB, lastReducedAtMs: undefined, ...busy };
    expect(reductionDue(state, 167 * MiB, 0, policy)).toBeUndefined();
    expect(reductionDue(state, 168 * MiB, 0, policy)).toBe('growth');
  });

  it('waits minGapMs after a reduction, however much it grew', () => {
    const state = { floorBytes: 120 * MiB, lastReducedAtMs: 1_000_000, ...busy };
    expect(reductionDue(state, 400 * MiB, 1_059_999, policy)).toBeUndefined();
    expect(reductionDue(state, 400 * MiB, 1_060_000, policy)).toBe('growth');
  });

  it('asks for less growth once the work queue has been empty for idleMs', () => {
    const idle = { floorBytes: 120 * MiB, lastReducedAtMs: undefined, idleSinceMs: 0, targetGapMs: 10_000 };
    expect(reductionDue(idle, 136 * MiB, 29_999, policy)).toBeUndefined();
    expect(reductionDue(idle, 136 * MiB, 30_000, policy)).toBe('idle');
    expect(reductionDue(idle, 135 * MiB, 30_000, policy)).toBeUndefined();
    expect(reductionDue({ ...idle, ...busy }, 136 * MiB, 30_000, policy)).toBeUndefined();
  });

  it('asks at the memory target once targetGapMs has passed, however little it grew', () => {
    const state = { floorBytes: 230 * MiB, lastReducedAtMs: 1_000_000, ...busy };
    expect(reductionDue(state, 239 * MiB, 1_010_000, withTarget)).toBeUndefined();
    expect(reductionDue(state, 240 * MiB, 1_009_999, withTarget)).toBeUndefined();
    expect(reductionDue(state, 240 * MiB, 1_010_000, withTarget)).toBe('target');
    // Before any reduction, and before the first look has set a floor.
    expect(
      reductionDue({ ...state, floorBytes: undefined, lastReducedAtMs: undefined }, 250 * MiB, 0, withTarget),
    ).toBe('target');
    // No target: the same look waits for growth.
    expect(reductionDue(state, 250 * MiB, 1_010_000, policy)).toBeUndefined();
  });

  it('asks after urgentTargetGapMs once the target is overshot by targetOvershootBytes, unless the gap backed off', () => {
    const state = { floorBytes: 200 * MiB, lastReducedAtMs: 1_000_000, ...busy };
    expect(reductionDue(state, 247 * MiB, 1_003_000, withTarget)).toBeUndefined();
    expect(reductionDue(state, 248 * MiB, 1_002_999, withTarget)).toBeUndefined();
    expect(reductionDue(state, 248 * MiB, 1_003_000, withTarget)).toBe('target');
    // The target out of reach (the gap doubled): overshooting does not shorten it.
    const backedOff = { ...state, targetGapMs: 20_000 };
    expect(reductionDue(backedOff, 300 * MiB, 1_019_999, withTarget)).toBeUndefined();
    expect(reductionDue(backedOff, 300 * MiB, 1_020_000, withTarget)).toBe('target');
  });

  it('doubles the gap for the target while collections leave the resident set near it, and resets it once they do not', () => {
    const state = { floorBytes: undefined, lastReducedAtMs: undefined, ...busy };
    // 95 % of 240 MiB is 228 MiB.
    expect(targetGapAfter(state, 227 * MiB, withTarget)).toBe(10_000);
    expect(targetGapAfter(state, 228 * MiB, withTarget)).toBe(20_000);
    expect(targetGapAfter({ ...state, targetGapMs: 160_000 }, 230 * MiB, withTarget)).toBe(300_000);
    expect(targetGapAfter({ ...state, targetGapMs: 300_000 }, 200 * MiB, withTarget)).toBe(10_000);
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

/**
 * A reducer with the memory target (`withTarget`) whose RSS is read from a script: `look(at, ...rss)`
 * sets the clock to `at` (ms), queues the readings `rss` (MiB; the reducer reads one per look and one
 * more after each collection) and looks once; `readings` holds what it has not read yet.
 */
function scriptedReducer(hold?: MemoryHold): {
  readings: number[];
  look: (at: number, ...rss: number[]) => Promise<boolean>;
} {
  const readings: number[] = [];
  let now = 0;
  const reducer = new MemoryReducer({
    policy: withTarget,
    log: pino({ level: 'silent' }),
    rss: () => readings.shift() ?? Number.NaN,
    now: () => now,
    ...(hold === undefined ? {} : { hold }),
  });
  const look = (at: number, ...rss: number[]): Promise<boolean> => {
    now = at;
    readings.push(...rss.map((r) => r * MiB));
    return reducer.check();
  };
  return { readings, look };
}

describe('MemoryReducer', () => {
  it('runs a real collection when due, counts it, and measures from the level after it', async () => {
    const registry = new Registry();
    const reductions = new Counter({
      name: 'reductions',
      help: 'x',
      labelNames: ['reason'],
      registers: [registry],
    });
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
    expect((await reductions.get()).values).toEqual([{ labels: { reason: 'growth' }, value: 1 }]);
    // The floor is now 170 MiB (the fake RSS did not move): 200 MiB is not 48 MiB of growth.
    now = 120_000;
    rss = 200 * MiB;
    expect(await reducer.check()).toBe(false);
    rss = 218 * MiB;
    expect(await reducer.check()).toBe(true);
    expect((await reductions.get()).values).toEqual([{ labels: { reason: 'growth' }, value: 2 }]);
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

  it('keeps under the memory target with real collections, backing off while they cannot', async () => {
    const scripted = scriptedReducer();
    // Each look reads exactly the readings it was given.
    const look = async (at: number, ...rss: number[]): Promise<boolean> => {
      const reduced = await scripted.look(at, ...rss);
      expect(scripted.readings).toEqual([]);
      return reduced;
    };
    expect(await look(0, 200)).toBe(false); // the floor: 200 MiB
    // 41 MiB is not 48 of growth, but the target is passed; the collection leaves 230 MiB, above
    // 95 % of the target: the gap doubles to 20 s.
    expect(await look(2_000, 241, 230)).toBe(true);
    expect(await look(12_000, 241)).toBe(false);
    expect(await look(21_999, 241)).toBe(false);
    expect(await look(22_000, 241, 235)).toBe(true); // and again, to 40 s
    expect(await look(61_999, 241)).toBe(false);
    // A collection that brings it under 95 % of the target restores the 10 s gap.
    expect(await look(62_000, 241, 190)).toBe(true);
    expect(await look(71_999, 245)).toBe(false);
    expect(await look(72_000, 245, 190)).toBe(true);
  });

  it('holds new work from a look far above a reachable target until a collection brings it down', async () => {
    const registry = new Registry();
    const seconds = new Counter({ name: 'held', help: 'x', registers: [registry] });
    const hold = new MemoryHold(seconds);
    const { look } = scriptedReducer(hold);
    expect(await look(0, 200)).toBe(false);
    expect(await look(1_000, 241, 200)).toBe(true); // at the target: collected, no hold
    expect(hold.relief()).toBeUndefined();
    // 249 MiB, 1.5 s after that collection: under the 3 s urgent gap, nothing collects yet, and
    // new work waits.
    expect(await look(2_500, 249)).toBe(false);
    const relief = hold.relief();
    expect(relief).toBeInstanceOf(Promise);
    let released = false;
    void relief?.then(() => (released = true));
    expect(await look(3_000, 250)).toBe(false);
    await Promise.resolve();
    expect(released).toBe(false);
    // The urgent gap has passed: the collection brings it to 200 MiB and releases the hold.
    expect(await look(4_000, 250, 200)).toBe(true);
    await relief;
    expect(released).toBe(true);
    expect(hold.relief()).toBeUndefined();
    expect((await seconds.get()).values[0]?.value).toBe(1.5);
  });

  it('releases the hold when the collection leaves the target out of reach, and at stop', async () => {
    const hold = new MemoryHold();
    const { look } = scriptedReducer(hold);
    // First look: the target is passed, a collection runs at once and leaves 249 MiB: what is live
    // is near the target, the gap backs off, and holding would only stall the work.
    expect(await look(0, 250, 249)).toBe(true);
    expect(hold.engaged).toBe(false);
    expect(await look(1_000, 260)).toBe(false);
    expect(hold.engaged).toBe(false);

    const other = new MemoryHold();
    const stopped = new MemoryReducer({
      policy: withTarget,
      log: pino({ level: 'silent' }),
      rss: () => 250 * MiB,
      now: () => 1_000,
      hold: other,
    });
    other.engage(0);
    const relief = other.relief();
    stopped.stop();
    await relief;
    expect(other.engaged).toBe(false);
  });
});

describe('holdsNewWork', () => {
  const state = { floorBytes: 200 * MiB, lastReducedAtMs: 0, idleSinceMs: undefined, targetGapMs: 10_000 };
  it('holds from targetOvershootBytes above a reachable target, not below it, nor without a target', () => {
    expect(holdsNewWork(state, 248 * MiB - 1, withTarget)).toBe(false);
    expect(holdsNewWork(state, 248 * MiB, withTarget)).toBe(true);
    expect(holdsNewWork(state, 400 * MiB, policy)).toBe(false);
    expect(holdsNewWork({ ...state, targetGapMs: 20_000 }, 400 * MiB, withTarget)).toBe(false);
  });
});
