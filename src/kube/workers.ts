/**
 * The worker loop of a controller, the same for every controller in the operator (client-go's
 * `processNextWorkItem`): each worker waits until the controller's caches have listed, then takes a
 * key from the work queue, reconciles it, and tells the queue how it went. A success forgets the
 * key's backoff and re-queues it after what the reconcile asked for; a write conflict (HTTP 409: the
 * object changed since it was read) re-queues it after 100 ms, quietly; any other failure re-queues
 * it with the queue's exponential backoff and logs at error level. A key is never handed to two
 * workers at once (work-queue.ts), so a failure on one key never blocks another.
 *
 * Metrics, labelled with the controller's name: `portico_reconcile_total` by result (`success`,
 * `conflict`, `error`), `portico_reconcile_duration_seconds`, and the queue's depth each time a key
 * is taken.
 */
import type { Logger } from 'pino';
import type { Counter, Gauge, Histogram } from 'prom-client';
import { isConflict } from './errors.js';
import type { WorkQueue } from './work-queue.js';

/** How often a worker looks whether the caches have listed, milliseconds. */
const SYNC_POLL_MS = 50;

/** Re-queue delay after a write conflict, milliseconds. */
const CONFLICT_REQUEUE_MS = 100;

export interface WorkerLoop {
  /** The `controller` label of the metrics. */
  readonly controller: string;
  readonly queue: Pick<WorkQueue, 'get' | 'done' | 'forget' | 'addAfter' | 'addRateLimited' | 'length'>;
  readonly metrics: {
    readonly reconcileTotal: Pick<Counter<'controller' | 'result'>, 'inc'>;
    readonly reconcileDuration: Pick<Histogram<'controller'>, 'startTimer'>;
    readonly workqueueDepth: Pick<Gauge<'controller'>, 'set'>;
  };
  readonly log: Logger;
  /**
   * Reconciles `key`; resolves to the milliseconds after which to reconcile it again, or undefined
   * for not at all (until an event or the resync adds it). A rejection is retried with backoff.
   */
  reconcile(key: string): Promise<number | undefined>;
  /** True once every cache the reconcile reads has listed. */
  synced(): boolean;
  /** True once the controller is stopping: workers waiting for the caches give up. */
  stopping(): boolean;
  /** Called once, by the first worker to see the caches synced (unless stopping). */
  onSynced?(): void;
  /**
   * Before each key: a promise to wait for while the process must take no new work (the memory
   * hold of src/controller/memory-reducer.ts), or undefined.
   */
  relief?(): Promise<void> | undefined;
}

/**
 * Starts `count` workers over `loop.queue`; each resolves when the queue is shut down (its `get`
 * resolves undefined) after finishing the key it holds. Never rejects: a reconcile's failure is
 * handled as described in the module comment.
 */
export function runWorkers(count: number, loop: WorkerLoop): Promise<void>[] {
  let seeded = false;
  const work = async (): Promise<void> => {
    while (!loop.synced() && !loop.stopping()) await new Promise((r) => setTimeout(r, SYNC_POLL_MS));
    if (!seeded && !loop.stopping()) {
      seeded = true;
      loop.onSynced?.();
    }
    for (;;) {
      const held = loop.relief?.();
      if (held) await held;
      const key = await loop.queue.get();
      if (key === undefined) return;
      loop.metrics.workqueueDepth.set({ controller: loop.controller }, loop.queue.length);
      await processKey(loop, key);
      loop.queue.done(key);
    }
  };
  return Array.from({ length: count }, () => work());
}

async function processKey(loop: WorkerLoop, key: string): Promise<void> {
  const { controller, queue, metrics } = loop;
  const end = metrics.reconcileDuration.startTimer({ controller });
  try {
    const requeueAfterMs = await loop.reconcile(key);
    queue.forget(key);
    if (requeueAfterMs !== undefined) queue.addAfter(key, requeueAfterMs);
    metrics.reconcileTotal.inc({ controller, result: 'success' });
  } catch (err) {
    if (isConflict(err)) {
      // Someone wrote the object since it was read: read it again, quietly.
      metrics.reconcileTotal.inc({ controller, result: 'conflict' });
      queue.addAfter(key, CONFLICT_REQUEUE_MS);
    } else {
      const retryInMs = queue.addRateLimited(key);
      metrics.reconcileTotal.inc({ controller, result: 'error' });
      loop.log.error({ err, key, retryInMs }, 'reconcile failed; retrying with backoff');
    }
  } finally {
    end();
  }
}
