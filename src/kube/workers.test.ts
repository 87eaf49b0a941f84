import { ApiException } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './work-queue.js';
import { runWorkers, type WorkerLoop } from './workers.js';

function metrics() {
  const registers = [new Registry()];
  return {
    reconcileTotal: new Counter({
      name: 't_total',
      help: 'h',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileDuration: new Histogram({ name: 't_seconds', help: 'h', labelNames: ['controller'], registers }),
    workqueueDepth: new Gauge({ name: 't_depth', help: 'h', labelNames: ['controller'], registers }),
  };
}

async function resultCounts(m: ReturnType<typeof metrics>): Promise<Record<string, number>> {
  const { values } = await m.reconcileTotal.get();
  return Object.fromEntries(values.map((v) => [String(v.labels.result), v.value]));
}

/** Runs `count` workers until `until` holds, then shuts the queue down and waits for them. */
async function run(
  queue: WorkQueue,
  loop: Omit<WorkerLoop, 'queue' | 'controller' | 'log' | 'metrics' | 'stopping'> & {
    metrics: WorkerLoop['metrics'];
  },
  until: () => boolean,
): Promise<void> {
  const workers = runWorkers(2, {
    controller: 'test',
    queue,
    log: pino({ level: 'silent' }),
    stopping: () => false,
    ...loop,
  });
  while (!until()) await new Promise((r) => setTimeout(r, 5));
  queue.shutDown();
  await Promise.all(workers);
}

describe('runWorkers', () => {
  it('waits for the caches, calls onSynced once, and reconciles each key', async () => {
    const queue = new WorkQueue(undefined, { name: 'workers-test-a' });
    const m = metrics();
    let synced = false;
    let seeded = 0;
    const seen: string[] = [];
    setTimeout(() => (synced = true), 60);
    queue.add('a/1');
    queue.add('b/2');
    await run(
      queue,
      {
        metrics: m,
        synced: () => synced,
        onSynced: () => {
          expect(synced).toBe(true);
          seeded += 1;
        },
        reconcile: (key) => {
          seen.push(key);
          return Promise.resolve(undefined);
        },
      },
      () => seen.length === 2,
    );
    expect(seeded).toBe(1);
    expect(seen.sort()).toEqual(['a/1', 'b/2']);
    expect(await resultCounts(m)).toEqual({ success: 2 });
  });

  it('re-queues after what the reconcile asked for, a conflict after 100 ms, a failure with backoff', async () => {
    const queue = new WorkQueue({ baseMs: 10, maxMs: 10 }, { name: 'workers-test-b' });
    const m = metrics();
    const calls: Record<string, number> = {};
    queue.add('ns/requeue');
    queue.add('ns/conflict');
    queue.add('ns/fail');
    await run(
      queue,
      {
        metrics: m,
        synced: () => true,
        reconcile: (key) => {
          calls[key] = (calls[key] ?? 0) + 1;
          const first = calls[key] === 1;
          if (key === 'ns/conflict' && first)
            return Promise.reject(new ApiException(409, 'Conflict', {}, {}));
          if (key === 'ns/fail' && first) return Promise.reject(new Error('boom'));
          return Promise.resolve(key === 'ns/requeue' && first ? 20 : undefined);
        },
      },
      () => calls['ns/requeue'] === 2 && calls['ns/conflict'] === 2 && calls['ns/fail'] === 2,
    );
    expect(await resultCounts(m)).toEqual({ success: 4, conflict: 1, error: 1 });
  });

  it('waits for relief before taking a key', async () => {
    const queue = new WorkQueue(undefined, { name: 'workers-test-c' });
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    let holding = true;
    const seen: string[] = [];
    queue.add('ns/a');
    const done = run(
      queue,
      {
        metrics: metrics(),
        synced: () => true,
        relief: () => (holding ? held : undefined),
        reconcile: (key) => {
          seen.push(key);
          return Promise.resolve(undefined);
        },
      },
      () => seen.length === 1,
    );
    await new Promise((r) => setTimeout(r, 30));
    expect(seen).toEqual([]);
    holding = false;
    release();
    await done;
    expect(seen).toEqual(['ns/a']);
  });
});
