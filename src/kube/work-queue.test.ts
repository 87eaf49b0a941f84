import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from './backoff.js';
import { WorkQueue } from './work-queue.js';

describe('WorkQueue', () => {
  it('de-duplicates keys that are queued', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('a');
    q.add('b');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands a key in process to a second worker, and re-queues it on done', async () => {
    const q = new WorkQueue();
    q.add('a');
    const first = await q.get();
    q.add('a');
    expect(q.length).toBe(0);
    q.done(first ?? '');
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('a');
  });

  it('wakes a waiting worker', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.add('x');
    expect(await waiting).toBe('x');
  });

  it('adds after a delay, keeping the earliest timer', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 40);
    q.addAfter('a', 5_000);
    expect(q.length).toBe(0);
    await new Promise((r) => setTimeout(r, 80));
    expect(q.length).toBe(1);
  });

  it('grows the backoff per failure and forgets it', () => {
    const q = new WorkQueue({ baseMs: 100, maxMs: 1_000 });
    const d1 = q.addRateLimited('a');
    const d2 = q.addRateLimited('a');
    const d3 = q.addRateLimited('a');
    expect(d1).toBeLessThanOrEqual(100);
    expect(d2).toBeGreaterThanOrEqual(100);
    expect(d3).toBeGreaterThanOrEqual(200);
    q.forget('a');
    expect(q.addRateLimited('a')).toBeLessThanOrEqual(100);
    q.shutDown();
  });

  it('resolves waiters with undefined on shutdown and drops removed keys', async () => {
    const q = new WorkQueue();
    q.add('gone');
    q.remove('gone');
    expect(q.length).toBe(0);
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
  });
});

describe('backoffDelayMs', () => {
  it('stays within [cap/2, cap] and under the maximum', () => {
    const policy = { baseMs: 1_000, maxMs: 8_000 };
    expect(backoffDelayMs(policy, 1, () => 0)).toBe(500);
    expect(backoffDelayMs(policy, 1, () => 1)).toBe(1_000);
    expect(backoffDelayMs(policy, 3, () => 1)).toBe(4_000);
    expect(backoffDelayMs(policy, 50, () => 1)).toBe(8_000);
  });
});
