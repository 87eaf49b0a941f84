/**
 * Gives back the memory a burst of work left committed. After a bulk onboarding V8 keeps the heap
 * pages the burst grew into (and pages it freed but did not unmap): at 10,000 domains the operator
 * stayed at about 350 MiB RSS with 121 MiB of live heap, and a full garbage collection that reduces
 * the footprint, forced from outside, brought it to 247 MiB (docs/performance.md). V8's own memory
 * reducer did not: the operator is never idle for long (watch events, resyncs, scrapes).
 *
 * `MemoryReducer` looks at the resident set size every `checkMs`; when it has grown by
 * `growthBytes` over the level after the last reduction (or the lowest level seen), or by
 * `idleGrowthBytes` once the work queue has been empty for `idleMs` (a burst is over), it asks V8
 * for that collection (the inspector protocol's `HeapProfiler.collectGarbage`, in process: no port
 * is opened), at most once per `minGapMs`. A collection pauses the event loop: about 0.4–0.5 s at
 * 4,000 domains, 0.2–0.8 s at 10,000.
 *
 * A memory target (`targetBytes`, a soft limit like Go's GOMEMLIMIT) bounds the peaks between: at or
 * above it a collection is due once `targetGapMs` has passed since the last one. At 10,000 domains
 * the live heap after a collection was about 105 MiB while V8 let the heap grow to 170 MiB within
 * the minute before the next (RSS 207 -> 273 MiB, docs/performance.md). When a collection leaves
 * the resident set above `TARGET_REACHED_SHARE` of the target, what is live is too close to it for
 * collections to help: the gap doubles (up to `maxTargetGapMs`) and a warning says to raise it.
 * While collections do reach it, a resident set `targetOvershootBytes` above the target needs only
 * `urgentTargetGapMs`: in the bursts after a CA outage at 10,000 domains the resident set grew 6-15
 * MiB a second, and the 10 s gap let it reach 264-269 MiB before each collection for a 240 MiB
 * target (docs/performance.md, eighth and ninth rounds). The looks come every 0.5 s (a look costs
 * about 8 µs): with a look every 2 s a collection started up to 30 MiB past the target in those
 * bursts (tenth round).
 *
 * Collections alone cannot follow the fastest of those bursts: the resident set grew 20 MiB a
 * second after a CA restart, 28 MiB within one second as a thousand waiting domains came due
 * (tenth round). So, like a soft limit's allocation stall, a look that reads `targetOvershootBytes`
 * or more above a reachable target engages a `MemoryHold`: the reconcile workers take no new key
 * and no request leaves for the ACME CA until a look reads less or the collection due within
 * `urgentTargetGapMs` has run. The default overshoot is 0: a look that reads the target itself
 * collects or holds, since in those bursts a look 0.5 s late read up to 12 MiB more than the one
 * before (eleventh round).
 */
import { Session } from 'node:inspector/promises';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { REDUCTION_REASONS } from '../observability/metrics.js';

const MiB = 1024 * 1024;

export interface MemoryReducerPolicy {
  /** Milliseconds between two looks at the resident set size. */
  checkMs: number;
  /** Growth of the resident set size, bytes, over its floor that asks for a reduction. */
  growthBytes: number;
  /** Milliseconds at least between two reductions. */
  minGapMs: number;
  /** Milliseconds the work queue must have been empty for `idleGrowthBytes` to be enough. */
  idleMs: number;
  /** Growth, bytes, that asks for a reduction once the work is done. */
  idleGrowthBytes: number;
  /** Resident set size, bytes, to stay under (a soft limit); 0 for none. */
  targetBytes: number;
  /** Milliseconds at least between two reductions for the target, while collections bring it under. */
  targetGapMs: number;
  /** The longest that gap grows to while the target stays out of reach, milliseconds. */
  maxTargetGapMs: number;
  /** Bytes above the target from which `urgentTargetGapMs` is enough, while the target is reachable. */
  targetOvershootBytes: number;
  /** Milliseconds at least between two reductions for the target once it is overshot. */
  urgentTargetGapMs: number;
}

/**
 * A collection for the target that leaves the resident set above this share of it doubles the
 * gap: the live memory, not garbage, is what stands near the target.
 */
export const TARGET_REACHED_SHARE = 0.95;

/** Why a reduction is due: growth while busy, growth once idle, or the memory target. */
export type ReductionReason = (typeof REDUCTION_REASONS)[number];

/**
 * 0.5 s looks (a look reads the resident set size: about 8 µs); 48 MiB of growth while busy,
 * 16 MiB once the queue has been empty for 30 s, one such reduction a minute at most; no target
 * (the chart sets one); at or above it, while collections reach it, one reduction per 2 s with new
 * work held in between (no overshoot allowed); once they do not, one per 10 s, backing off to 5
 * minutes.
 */
export const DEFAULT_MEMORY_REDUCER_POLICY: MemoryReducerPolicy = {
  checkMs: 500,
  growthBytes: 48 * MiB,
  minGapMs: 60_000,
  idleMs: 30_000,
  idleGrowthBytes: 16 * MiB,
  targetBytes: 0,
  targetGapMs: 10_000,
  maxTargetGapMs: 300_000,
  targetOvershootBytes: 0,
  urgentTargetGapMs: 2_000,
};

/**
 * Holds new work while the resident set is at or over a reachable memory target (`holdsNewWork`)
 * and the reducer's collection may not run yet, until it has brought the resident set down: the reconcile workers ask `relief()` before taking
 * a key, and so do requests to the ACME CA before they are sent. Engaged and released only by the
 * reducer; a hold lasts at most about `urgentTargetGapMs` plus one collection, since a collection
 * that leaves the resident set high backs the target off and releases it.
 */
export class MemoryHold {
  #held: PromiseWithResolvers<undefined> | undefined;
  #sinceMs = 0;
  readonly #seconds: Counter | undefined;

  /** @param seconds counts the seconds held (`portico_memory_hold_seconds_total`) */
  constructor(seconds?: Counter) {
    this.#seconds = seconds;
  }

  /**
   * Undefined while new work may go ahead (no promise is made then); otherwise a promise that
   * resolves, never rejects, when the hold is released.
   */
  relief(): Promise<void> | undefined {
    return this.#held?.promise;
  }

  /** Whether the hold is engaged. */
  get engaged(): boolean {
    return this.#held !== undefined;
  }

  /** Engages the hold at `nowMs` (Unix time, milliseconds); no-op while engaged. */
  engage(nowMs: number): void {
    if (this.#held !== undefined) return;
    this.#held = Promise.withResolvers<undefined>();
    this.#sinceMs = nowMs;
  }

  /** Releases the hold at `nowMs` and counts the seconds it lasted; no-op while not engaged. */
  release(nowMs: number): void {
    const held = this.#held;
    if (held === undefined) return;
    this.#held = undefined;
    this.#seconds?.inc(Math.max(0, nowMs - this.#sinceMs) / 1000);
    held.resolve(undefined);
  }
}

/**
 * Whether a look that measured `rssBytes` holds new work: the target is set and reachable (its
 * gap has not backed off: collections bring the resident set under it) and the resident set is
 * `targetOvershootBytes` or more above it. Pure.
 */
export function holdsNewWork(state: ReducerState, rssBytes: number, policy: MemoryReducerPolicy): boolean {
  if (policy.targetBytes <= 0 || state.targetGapMs > policy.targetGapMs) return false;
  return rssBytes >= policy.targetBytes + policy.targetOvershootBytes;
}

/** What the reducer knows between looks. */
export interface ReducerState {
  /** Resident set size, bytes, after the last reduction or the lowest seen since; undefined at first. */
  floorBytes: number | undefined;
  /** Unix time, milliseconds, of the last reduction; undefined before the first. */
  lastReducedAtMs: number | undefined;
  /** Unix time, milliseconds, since which the work queue has been empty; undefined while it is not. */
  idleSinceMs: number | undefined;
  /** The gap now required before a reduction for the target, milliseconds (see `targetGapAfter`). */
  targetGapMs: number;
}

/**
 * Whether a look that measured `rssBytes` at `nowMs` should reduce, and why; undefined when not.
 * Pure. The first look only sets the floor, unless the resident set is at the target already.
 */
export function reductionDue(
  state: ReducerState,
  rssBytes: number,
  nowMs: number,
  policy: MemoryReducerPolicy,
): ReductionReason | undefined {
  const sinceLast = state.lastReducedAtMs === undefined ? Infinity : nowMs - state.lastReducedAtMs;
  if (policy.targetBytes > 0 && rssBytes >= policy.targetBytes) {
    if (sinceLast >= state.targetGapMs) return 'target';
    // Overshot while collections still reach the target (the gap has not backed off): sooner.
    const reachable = state.targetGapMs <= policy.targetGapMs;
    const overshot = rssBytes >= policy.targetBytes + policy.targetOvershootBytes;
    if (reachable && overshot && sinceLast >= policy.urgentTargetGapMs) return 'target';
  }
  if (state.floorBytes === undefined || sinceLast < policy.minGapMs) return undefined;
  const growth = rssBytes - state.floorBytes;
  if (growth >= policy.growthBytes) return 'growth';
  const idle = state.idleSinceMs !== undefined && nowMs - state.idleSinceMs >= policy.idleMs;
  return idle && growth >= policy.idleGrowthBytes ? 'idle' : undefined;
}

/**
 * The gap required before the next reduction for the target, after one that left `afterBytes`:
 * the policy's when the collection brought the resident set under `TARGET_REACHED_SHARE` of the
 * target, else twice the current one (at most `maxTargetGapMs`). Pure.
 */
export function targetGapAfter(state: ReducerState, afterBytes: number, policy: MemoryReducerPolicy): number {
  if (afterBytes < policy.targetBytes * TARGET_REACHED_SHARE) return policy.targetGapMs;
  return Math.min(policy.maxTargetGapMs, state.targetGapMs * 2);
}

/** The floor after a look that measured `rssBytes` and did not reduce: it only goes down. */
export function lowerFloor(state: ReducerState, rssBytes: number): number {
  return state.floorBytes === undefined ? rssBytes : Math.min(state.floorBytes, rssBytes);
}

export interface MemoryReducerOptions {
  policy?: MemoryReducerPolicy;
  log: Logger;
  /** Counts reductions by `reason` (`portico_memory_reductions_total`). */
  reductions?: Counter;
  /** Whether the work queue is empty; never, unless given. */
  isIdle?: () => boolean;
  /** The resident set size, bytes; `process.memoryUsage.rss` unless a test sets it. */
  rss?: () => number;
  /** Engaged while the resident set is at or over a reachable target (`holdsNewWork`); none unless given. */
  hold?: MemoryHold;
  now?: () => number;
}

export class MemoryReducer {
  readonly #policy: MemoryReducerPolicy;
  readonly #log: Logger;
  readonly #reductions: Counter | undefined;
  readonly #rss: () => number;
  readonly #now: () => number;
  readonly #isIdle: () => boolean;
  readonly #hold: MemoryHold | undefined;
  readonly #state: ReducerState = {
    floorBytes: undefined,
    lastReducedAtMs: undefined,
    idleSinceMs: undefined,
    targetGapMs: 0,
  };
  #timer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(options: MemoryReducerOptions) {
    this.#policy = options.policy ?? DEFAULT_MEMORY_REDUCER_POLICY;
    this.#log = options.log;
    this.#reductions = options.reductions;
    this.#rss = options.rss ?? (() => process.memoryUsage.rss());
    this.#now = options.now ?? Date.now;
    this.#isIdle = options.isIdle ?? (() => false);
    this.#hold = options.hold;
    this.#state.targetGapMs = this.#policy.targetGapMs;
  }

  /** Starts looking every `checkMs` (the timer does not keep the process alive). */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      void this.check();
    }, this.#policy.checkMs);
    this.#timer.unref();
  }

  /** Stops looking and releases the hold, if engaged. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#hold?.release(this.#now());
  }

  /** One look: reduces when due (`reductionDue`). Resolves whether it reduced; never rejects. */
  async check(): Promise<boolean> {
    if (this.#running) return false;
    const rss = this.#rss();
    if (!this.#isIdle()) this.#state.idleSinceMs = undefined;
    else this.#state.idleSinceMs ??= this.#now();
    this.#holdIf(holdsNewWork(this.#state, rss, this.#policy));
    const reason = reductionDue(this.#state, rss, this.#now(), this.#policy);
    if (reason === undefined) {
      this.#state.floorBytes = lowerFloor(this.#state, rss);
      return false;
    }
    this.#running = true;
    try {
      const startedAt = this.#now();
      await collectAllAvailableGarbage();
      const after = this.#rss();
      this.#state.floorBytes = after;
      this.#state.lastReducedAtMs = this.#now();
      this.#reductions?.inc({ reason });
      const fields = {
        reason,
        rssBeforeMiB: Math.round(rss / MiB),
        rssAfterMiB: Math.round(after / MiB),
        durationMs: this.#now() - startedAt,
      };
      if (reason === 'target') {
        const gapMs = targetGapAfter(this.#state, after, this.#policy);
        if (gapMs > this.#policy.targetGapMs) {
          this.#log.warn(
            { ...fields, targetMiB: Math.round(this.#policy.targetBytes / MiB), nextInSeconds: gapMs / 1000 },
            'memory target out of reach: what is live is close to it; raise the memory target (--memory-target-mib) and the memory limit (docs/install.md, "Sizing")',
          );
        }
        this.#state.targetGapMs = gapMs;
      }
      this.#log.info(fields, 'memory reduced');
      // Released unless the collection left it far above a target still reachable.
      this.#holdIf(holdsNewWork(this.#state, after, this.#policy));
      return true;
    } catch (err) {
      // Counted as a reduction for the gap, so a failing collection is not retried at every look.
      this.#state.lastReducedAtMs = this.#now();
      this.#log.warn({ err }, 'memory reduction failed');
      this.#holdIf(false);
      return false;
    } finally {
      this.#running = false;
    }
  }

  #holdIf(hold: boolean): void {
    if (hold) this.#hold?.engage(this.#now());
    else this.#hold?.release(this.#now());
  }
}

/**
 * A full collection that reduces the footprint: V8's CollectAllAvailableGarbage (several
 * mark-compacts until nothing more is freed; unused pages are released to the system), reached
 * through an in-process inspector session.
 */
async function collectAllAvailableGarbage(): Promise<void> {
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.collectGarbage');
  } finally {
    session.disconnect();
  }
}
