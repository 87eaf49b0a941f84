/**
 * A keyed work queue with the semantics of client-go's workqueue: a key is queued at most once
 * however often it is added; a key being processed is never handed to a second worker, and if it is
 * added meanwhile it is queued again when the first worker calls `done`. Failed keys are re-added
 * after an exponential backoff that `forget` resets.
 *
 * Three priorities, each handed out before the next: `high` (work that finishes what a user waits
 * for, such as storing an issued certificate's status), `normal` (watch events, timed re-checks,
 * retries) and `low` (the periodic resync), so a changed object never waits behind a full resync
 * and a domain whose certificate has arrived never waits behind a bulk onboarding. Within a
 * priority, keys are handed out round-robin across namespaces (the part of a `namespace/name` key
 * before the first '/'; keys without a '/' share one group) and first-in first-out within a
 * namespace, so one tenant with thousands of keys cannot starve another with a few.
 *
 * Every operation is O(1) amortized but `addAfter` and the timer's firing (O(log n) in the delayed
 * keys): the queues are intrusive doubly-linked lists, so removing or promoting a queued key unlinks
 * it in place. Per-key state lives only while the key is queued, in process, delayed, or backing
 * off, and a namespace with nothing queued leaves no entry behind.
 *
 * Delayed keys (`addAfter`) share one Node timer, armed for the earliest: a binary heap of due times
 * (tinyqueue) and a map of each key's due time. A timer per key cost a `Timeout` and, as delays
 * differ, a `TimersList` of its own: about 2.8 MiB in a heap snapshot of a 10,000-domain ramp
 * (docs/performance.md).
 *
 * Metrics: until `shutDown`, `portico_workqueue_depth_by_priority` reads the queue's depth at each
 * scrape, and every key handed out records how long it waited in
 * `portico_workqueue_queue_duration_seconds`, both labelled with the queue's `name`.
 */
import TinyQueue from 'tinyqueue';
import { sharedMetrics, workQueues } from '../observability/shared-metrics.js';
import { backoffDelayMs, type BackoffPolicy } from './backoff.js';

/** `high`: `addHighPriority`. `normal`: watch events, `addAfter`, `addRateLimited`. `low`: the periodic resync. */
export type WorkPriority = 'high' | 'normal' | 'low';

/** Lower is handed out first. */
const RANK: Record<WorkPriority, number> = { high: 0, normal: 1, low: 2 };

/** The fields an item needs to sit in a `LinkedList`; an item is in at most one list at a time. */
interface Links<T> {
  prev: T | undefined;
  next: T | undefined;
}

/** An intrusive doubly-linked FIFO: `push`, `shift` and unlinking any member are O(1). */
class LinkedList<T extends Links<T>> {
  #head: T | undefined;
  #tail: T | undefined;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  get first(): T | undefined {
    return this.#head;
  }

  /** Appends `item`, which must not be in any list. */
  push(item: T): void {
    item.prev = this.#tail;
    item.next = undefined;
    if (this.#tail) this.#tail.next = item;
    else this.#head = item;
    this.#tail = item;
    this.#size++;
  }

  /** Unlinks `item`, which must be a member of this list. */
  unlink(item: T): void {
    if (item.prev) item.prev.next = item.next;
    else this.#head = item.next;
    if (item.next) item.next.prev = item.prev;
    else this.#tail = item.prev;
    item.prev = undefined;
    item.next = undefined;
    this.#size--;
  }

  /** Removes and returns the first item. */
  shift(): T | undefined {
    const item = this.#head;
    if (item) this.unlink(item);
    return item;
  }

  /** Forgets every member in O(1); the items themselves are left to the garbage collector. */
  clear(): void {
    this.#head = undefined;
    this.#tail = undefined;
    this.#size = 0;
  }
}

/** The keys one namespace has queued at one priority; a member of its level's round-robin turns. */
interface NamespaceQueue extends Links<NamespaceQueue> {
  readonly namespace: string;
  readonly priority: WorkPriority;
  readonly keys: LinkedList<KeyState>;
}

/**
 * What the queue knows of a key that is queued or in process; there is none otherwise. One record
 * per key serves both phases, so a key moves between them without map look-ups.
 */
interface KeyState extends Links<KeyState> {
  readonly key: string;
  /** While queued: the namespace queue it waits in. Undefined while in process. */
  queue: NamespaceQueue | undefined;
  /** While in process: the highest priority it was added with meanwhile, if it was. */
  readded: WorkPriority | undefined;
  /** While queued: when it was queued (the `now` clock, ms); a promotion keeps it. */
  queuedAtMs: number;
}

interface Waiter extends Links<Waiter> {
  readonly resolve: (key: string | undefined) => void;
}

function byDueTime(a: DueKey, b: DueKey): number {
  return a.atMs - b.atMs;
}

/** The group of `key` for fairness: the text before the first '/', or '' when there is none. */
function namespaceOf(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? '' : key.slice(0, slash);
}

/**
 * The keys queued at one priority: round-robin across namespaces, FIFO within a namespace. A
 * namespace that becomes non-empty joins the end of the round.
 */
class FairLevel {
  readonly #byNamespace = new Map<string, NamespaceQueue>();
  readonly #turns = new LinkedList<NamespaceQueue>();
  #size = 0;

  constructor(readonly priority: WorkPriority) {}

  get size(): number {
    return this.#size;
  }

  /** Appends `state`, which must not be queued, to its namespace's queue. */
  push(state: KeyState): void {
    const namespace = namespaceOf(state.key);
    let queue = this.#byNamespace.get(namespace);
    if (!queue) {
      queue = {
        namespace,
        priority: this.priority,
        keys: new LinkedList(),
        prev: undefined,
        next: undefined,
      };
      this.#byNamespace.set(namespace, queue);
      this.#turns.push(queue);
    }
    queue.keys.push(state);
    state.queue = queue;
    this.#size++;
  }

  /** Unlinks `state`, which must be queued at this level, dropping its namespace if now empty. */
  delete(state: KeyState): void {
    const queue = state.queue;
    if (!queue) return;
    queue.keys.unlink(state);
    state.queue = undefined;
    this.#size--;
    if (queue.keys.size === 0) this.#drop(queue);
  }

  /** The first key of the namespace whose turn it is; that namespace then goes to the end. */
  shift(): KeyState | undefined {
    const queue = this.#turns.first;
    const state = queue?.keys.shift();
    if (!queue || !state) return undefined;
    state.queue = undefined;
    this.#size--;
    if (queue.keys.size === 0) {
      this.#drop(queue);
    } else {
      this.#turns.unlink(queue);
      this.#turns.push(queue);
    }
    return state;
  }

  clear(): void {
    this.#byNamespace.clear();
    this.#turns.clear();
    this.#size = 0;
  }

  #drop(queue: NamespaceQueue): void {
    this.#turns.unlink(queue);
    this.#byNamespace.delete(queue.namespace);
  }
}

/** The longest delay setTimeout honours, in milliseconds (a longer one fires after 1 ms). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delayed key in the heap: due at `atMs` (Unix time, ms) unless its due time has changed since. */
interface DueKey {
  readonly atMs: number;
  readonly key: string;
}

/** Heap entries beyond the live delayed keys (left by `remove` and earlier due times) before it is rebuilt. */
const STALE_DUE_SLACK = 1_024;

/** Records how long a key waited in the queue before a worker took it: seconds, and the priority it was taken at. */
export type QueueWaitObserver = (priority: WorkPriority, seconds: number) => void;

export interface WorkQueueOptions {
  /**
   * The controller the queue feeds (`customdomain`, `ratelimitpolicy`): the `controller` label of
   * its metrics. Default `''`: the metrics carry no controller label.
   */
  readonly name?: string;
  /** Where each key's wait is recorded; default `portico_workqueue_queue_duration_seconds`. */
  readonly observeWait?: QueueWaitObserver;
  /** A monotonic clock in milliseconds for the waits; default `performance.now`. */
  readonly now?: () => number;
}

export class WorkQueue {
  readonly #levels = {
    high: new FairLevel('high'),
    normal: new FairLevel('normal'),
    low: new FairLevel('low'),
  };
  /** Keys queued or in process (handed out by `get`, not yet `done`). */
  readonly #states = new Map<string, KeyState>();
  readonly #failures = new Map<string, number>();
  /** Each delayed key's due time (Unix time, ms); the heap may hold older entries for it too. */
  readonly #dueAt = new Map<string, number>();
  #dueOrder = new TinyQueue<DueKey>([], byDueTime);
  /** The one timer, armed for `#timerAtMs` (the earliest due time when it was armed). */
  #timer: NodeJS.Timeout | undefined;
  #timerAtMs = Infinity;
  readonly #waiters = new LinkedList<Waiter>();
  readonly #policy: BackoffPolicy;
  readonly #name: string;
  readonly #observeWait: QueueWaitObserver;
  readonly #now: () => number;
  #shuttingDown = false;

  /**
   * @param policy the backoff of `addRateLimited`, in milliseconds
   * @param options the queue's name for its metrics, and where its waits are recorded
   */
  constructor(policy: BackoffPolicy = { baseMs: 500, maxMs: 300_000 }, options: WorkQueueOptions = {}) {
    this.#policy = policy;
    this.#name = options.name ?? '';
    const controller = this.#name;
    const histogram = sharedMetrics.workQueueDuration;
    // Label sets resolved once: a wait is recorded on every `get`.
    const byPriority = {
      high: histogram.labels({ controller, priority: 'high' }),
      normal: histogram.labels({ controller, priority: 'normal' }),
      low: histogram.labels({ controller, priority: 'low' }),
    };
    this.#observeWait =
      options.observeWait ??
      ((priority, seconds) => {
        byPriority[priority].observe(seconds);
      });
    this.#now = options.now ?? (() => performance.now());
    workQueues.add(this);
  }

  /** The controller the queue feeds, as given to the constructor (`''` when none was). */
  get name(): string {
    return this.#name;
  }

  /** Keys waiting to be processed, at either priority (keys in process or on a timer not counted). */
  get length(): number {
    return this.#levels.high.size + this.#levels.normal.size + this.#levels.low.size;
  }

  /** Keys waiting to be processed, by priority; for a queue-depth metric. */
  get lengthByPriority(): Record<WorkPriority, number> {
    return { high: this.#levels.high.size, normal: this.#levels.normal.size, low: this.#levels.low.size };
  }

  /**
   * Queues `key` at normal priority, for a watch event: handed out before any low-priority key.
   * A key already queued stays in its place, except that a key queued at low priority moves to
   * the end of its namespace's normal-priority queue (still queued once). Ignored after `shutDown`.
   */
  add(key: string): void {
    this.#add(key, 'normal');
  }

  /**
   * Queues `key` at high priority, ahead of every normal and low one: for work that completes what
   * a user waits for (an ACME order settled: its certificate is stored, the domain can go Live; a
   * domain's turn for an order slot came, so the slot is not left unused behind a backlog). A
   * key queued at a lower priority moves up (still queued once). Ignored after `shutDown`.
   */
  addHighPriority(key: string): void {
    this.#add(key, 'high');
  }

  /**
   * Queues `key` at low priority, for the periodic resync: handed out only when no normal-priority
   * key waits, so a full resync never delays a changed object. A key already queued (at either
   * priority) or in process is not demoted. Ignored after `shutDown`.
   */
  addLowPriority(key: string): void {
    this.#add(key, 'low');
  }

  /**
   * Queues `key` at normal priority after `delayMs` milliseconds (at once if `delayMs` <= 0). An
   * earlier pending timer for the key wins; a later one replaces it. Ignored after `shutDown`. A
   * delay beyond Node's timer limit (2^31 - 1 ms, about 24.8 days) fires at the limit instead of at
   * once (Node would fire it after 1 ms), and the reconcile then schedules the rest.
   */
  addAfter(key: string, requestedDelayMs: number): void {
    if (this.#shuttingDown) return;
    const delayMs = Math.min(requestedDelayMs, MAX_TIMER_MS);
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const atMs = Date.now() + delayMs;
    const pending = this.#dueAt.get(key);
    if (pending !== undefined && pending <= atMs) return;
    this.#dueAt.set(key, atMs);
    this.#dueOrder.push({ atMs, key });
    if (this.#dueOrder.length > 2 * this.#dueAt.size + STALE_DUE_SLACK) this.#rebuildDueOrder();
    if (atMs < this.#timerAtMs) this.#armTimer();
  }

  /**
   * Re-queues `key` at normal priority after its next backoff delay (see `backoffDelayMs`), which
   * grows with each call until `forget`. Returns the delay in milliseconds.
   */
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

  /**
   * Drops every trace of `key` (the object is gone): its queued entry, its timer, its backoff, and
   * a re-add made while it is in process. A worker processing it still calls `done`.
   */
  remove(key: string): void {
    this.#failures.delete(key);
    const state = this.#states.get(key);
    if (state?.queue) {
      this.#levels[state.queue.priority].delete(state);
      this.#states.delete(key);
    } else if (state) {
      state.readded = undefined;
    }
    // Its heap entry stays until it is due or the heap is rebuilt; firing skips it.
    this.#dueAt.delete(key);
  }

  /**
   * The next key to process: any high-priority key first, then normal, then low; within a
   * priority, round-robin across namespaces and FIFO within one. Waits while the queue is empty.
   * Resolves undefined at once after `shutDown`, whatever is still queued. Call `done` after.
   */
  async get(): Promise<string | undefined> {
    if (this.#shuttingDown) return undefined;
    for (const level of [this.#levels.high, this.#levels.normal, this.#levels.low]) {
      const next = level.shift();
      if (next === undefined) continue;
      this.#observeWait(level.priority, Math.max(0, this.#now() - next.queuedAtMs) / 1000);
      return next.key;
    }
    return new Promise((resolve) => {
      this.#waiters.push({ resolve, prev: undefined, next: undefined });
    });
  }

  /** Marks `key` processed; if it was added meanwhile, it is queued again at the priority it was added with. */
  done(key: string): void {
    const state = this.#states.get(key);
    if (!state || state.queue) return;
    const priority = state.readded;
    if (priority === undefined || this.#shuttingDown) {
      this.#states.delete(key);
      return;
    }
    state.readded = undefined;
    this.#enqueue(state, priority);
  }

  /**
   * Stops handing out keys: the backlog and timers are dropped, waiting and later `get` calls
   * resolve undefined, and adds are ignored. Keys in process finish; their `done` queues nothing.
   */
  shutDown(): void {
    this.#shuttingDown = true;
    workQueues.delete(this);
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAtMs = Infinity;
    this.#dueAt.clear();
    this.#dueOrder = new TinyQueue<DueKey>([], byDueTime);
    this.#levels.high.clear();
    this.#levels.normal.clear();
    this.#levels.low.clear();
    this.#states.clear();
    for (let waiter = this.#waiters.shift(); waiter; waiter = this.#waiters.shift())
      waiter.resolve(undefined);
  }

  #add(key: string, priority: WorkPriority): void {
    if (this.#shuttingDown) return;
    const state = this.#states.get(key);
    if (!state) {
      const fresh: KeyState = {
        key,
        queue: undefined,
        readded: undefined,
        queuedAtMs: 0,
        prev: undefined,
        next: undefined,
      };
      this.#states.set(key, fresh);
      this.#enqueue(fresh, priority);
    } else if (!state.queue) {
      if (state.readded === undefined || RANK[priority] < RANK[state.readded]) state.readded = priority;
    } else if (RANK[priority] < RANK[state.queue.priority]) {
      this.#levels[state.queue.priority].delete(state);
      this.#levels[priority].push(state);
    }
  }

  /** (Re-)arms the one timer for the earliest due time, or clears it when no key is delayed. */
  #armTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAtMs = Infinity;
    const next = this.#dueOrder.peek();
    if (!next) return;
    this.#timerAtMs = next.atMs;
    this.#timer = setTimeout(
      () => {
        this.#fireDue();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, next.atMs - Date.now())),
    );
    this.#timer.unref();
  }

  /** Queues every key now due (skipping heap entries no longer current), then re-arms the timer. */
  #fireDue(): void {
    const nowMs = Date.now();
    for (let next = this.#dueOrder.peek(); next && next.atMs <= nowMs; next = this.#dueOrder.peek()) {
      this.#dueOrder.pop();
      if (this.#dueAt.get(next.key) !== next.atMs) continue;
      this.#dueAt.delete(next.key);
      this.add(next.key);
    }
    this.#armTimer();
  }

  /** Drops the heap's stale entries: one entry per delayed key, at its current due time. */
  #rebuildDueOrder(): void {
    const live = [...this.#dueAt].map(([key, atMs]) => ({ atMs, key }));
    this.#dueOrder = new TinyQueue(live, byDueTime);
  }

  /** Hands `state`, which is not queued, to a waiting worker, or queues it at `priority`. */
  #enqueue(state: KeyState, priority: WorkPriority): void {
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#observeWait(priority, 0);
      waiter.resolve(state.key);
      return;
    }
    state.queuedAtMs = this.#now();
    this.#levels[priority].push(state);
  }
}
