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
 * 4,000 domains.
 */
import { Session } from 'node:inspector/promises';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';

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
}

/**
 * 15 s looks; 48 MiB of growth while busy, 16 MiB once the queue has been empty for 30 s; one
 * reduction a minute at most.
 */
export const DEFAULT_MEMORY_REDUCER_POLICY: MemoryReducerPolicy = {
  checkMs: 15_000,
  growthBytes: 48 * MiB,
  minGapMs: 60_000,
  idleMs: 30_000,
  idleGrowthBytes: 16 * MiB,
};

/** What the reducer knows between looks. */
export interface ReducerState {
  /** Resident set size, bytes, after the last reduction or the lowest seen since; undefined at first. */
  floorBytes: number | undefined;
  /** Unix time, milliseconds, of the last reduction; undefined before the first. */
  lastReducedAtMs: number | undefined;
  /** Unix time, milliseconds, since which the work queue has been empty; undefined while it is not. */
  idleSinceMs: number | undefined;
}

/**
 * Whether a look that measured `rssBytes` at `nowMs` should reduce. Pure. The first look only sets
 * the floor.
 */
export function reductionDue(
  state: ReducerState,
  rssBytes: number,
  nowMs: number,
  policy: MemoryReducerPolicy,
): boolean {
  if (state.floorBytes === undefined) return false;
  if (state.lastReducedAtMs !== undefined && nowMs - state.lastReducedAtMs < policy.minGapMs) return false;
  const growth = rssBytes - state.floorBytes;
  if (growth >= policy.growthBytes) return true;
  const idle = state.idleSinceMs !== undefined && nowMs - state.idleSinceMs >= policy.idleMs;
  return idle && growth >= policy.idleGrowthBytes;
}

/** The floor after a look that measured `rssBytes` and did not reduce: it only goes down. */
export function lowerFloor(state: ReducerState, rssBytes: number): number {
  return state.floorBytes === undefined ? rssBytes : Math.min(state.floorBytes, rssBytes);
}

export interface MemoryReducerOptions {
  policy?: MemoryReducerPolicy;
  log: Logger;
  /** Counts reductions (`portico_memory_reductions_total`). */
  reductions?: Counter;
  /** Whether the work queue is empty; never, unless given. */
  isIdle?: () => boolean;
  /** The resident set size, bytes; `process.memoryUsage.rss` unless a test sets it. */
  rss?: () => number;
  now?: () => number;
}

export class MemoryReducer {
  readonly #policy: MemoryReducerPolicy;
  readonly #log: Logger;
  readonly #reductions: Counter | undefined;
  readonly #rss: () => number;
  readonly #now: () => number;
  readonly #isIdle: () => boolean;
  readonly #state: ReducerState = {
    floorBytes: undefined,
    lastReducedAtMs: undefined,
    idleSinceMs: undefined,
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
  }

  /** Starts looking every `checkMs` (the timer does not keep the process alive). */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      void this.check();
    }, this.#policy.checkMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One look: reduces when due (`reductionDue`). Resolves whether it reduced; never rejects. */
  async check(): Promise<boolean> {
    if (this.#running) return false;
    const rss = this.#rss();
    if (!this.#isIdle()) this.#state.idleSinceMs = undefined;
    else this.#state.idleSinceMs ??= this.#now();
    if (!reductionDue(this.#state, rss, this.#now(), this.#policy)) {
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
      this.#reductions?.inc();
      this.#log.info(
        {
          rssBeforeMiB: Math.round(rss / MiB),
          rssAfterMiB: Math.round(after / MiB),
          durationMs: this.#now() - startedAt,
        },
        'memory reduced after growth',
      );
      return true;
    } catch (err) {
      // Counted as a reduction for the gap, so a failing collection is not retried at every look.
      this.#state.lastReducedAtMs = this.#now();
      this.#log.warn({ err }, 'memory reduction failed');
      return false;
    } finally {
      this.#running = false;
    }
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
