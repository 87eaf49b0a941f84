/**
 * A keyed work queue with the semantics of client-go's workqueue: a key is queued at most once
 * however often it is added; a key being processed is never handed to a second worker, and if it is
 * added meanwhile it is queued again when the first worker calls `done`. Failed keys are re-added
 * after an exponential backoff that `forget` resets.
 */
import { backoffDelayMs, type BackoffPolicy } from './backoff.js';

export class WorkQueue {
  readonly #queue: string[] = [];
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  readonly #waiters: ((key: string | undefined) => void)[] = [];
  readonly #policy: BackoffPolicy;
  #shuttingDown = false;

  constructor(policy: BackoffPolicy = { baseMs: 500, maxMs: 300_000 }) {
    this.#policy = policy;
  }

  /** Keys waiting to be processed. */
  get length(): number {
    return this.#queue.length;
  }

  /** Queues `key` unless it is already queued. */
  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#dirty.delete(key);
      this.#processing.add(key);
      waiter(key);
    } else {
      this.#queue.push(key);
    }
  }

  /** Queues `key` after `delayMs` milliseconds; an earlier pending timer for the key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.#timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  /** Re-queues `key` after its next backoff delay. Returns the delay in milliseconds. */
  addRateLimited(key: string): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    const delay = backoffDelayMs(this.#policy, failures);
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets the backoff of `key` after a success. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Drops every trace of `key`: queued entry, timer, backoff (the object is gone). */
  remove(key: string): void {
    this.#failures.delete(key);
    this.#dirty.delete(key);
    const index = this.#queue.indexOf(key);
    if (index >= 0) this.#queue.splice(index, 1);
    const pending = this.#timers.get(key);
    if (pending) clearTimeout(pending.timer);
    this.#timers.delete(key);
  }

  /** The next key to process, or undefined once the queue shuts down. Call `done` after. */
  async get(): Promise<string | undefined> {
    const key = this.#queue.shift();
    if (key !== undefined) {
      this.#dirty.delete(key);
      this.#processing.add(key);
      return key;
    }
    if (this.#shuttingDown) return undefined;
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Marks `key` processed; if it was added meanwhile, it is queued again. */
  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      this.#dirty.delete(key);
      this.add(key);
    }
  }

  /** Stops handing out keys: waiting `get` calls resolve undefined, timers are cleared. */
  shutDown(): void {
    this.#shuttingDown = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }
}
