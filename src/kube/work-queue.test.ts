import { afterEach, describe, expect, it, vi } from 'vitest';
import { backoffDelayMs } from './backoff.js';
import { WorkQueue } from './work-queue.js';

/** Takes `n` keys off the queue, marking each done at once. */
async function drain(q: WorkQueue, n: number): Promise<(string | undefined)[]> {
  const keys: (string | undefined)[] = [];
  for (let i = 0; i < n; i++) {
    const key = await q.get();
    keys.push(key);
    if (key !== undefined) q.done(key);
  }
  return keys;
}

/** True if `get` has nothing to hand out now (it would wait). */
async function isEmpty(q: WorkQueue): Promise<boolean> {
  const pending = Symbol('pending');
  const next = q.get();
  const first = await Promise.race([next, Promise.resolve(pending)]);
  return first === pending;
}

describe('WorkQueue', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

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
    expect(await isEmpty(q)).toBe(true);
    q.done(first ?? '');
    expect(q.length).toBe(0); // handed at once to the get waiting in isEmpty
  });

  it('re-queues a key added during processing at the priority it was added with', async () => {
    const q = new WorkQueue();
    q.add('ns/a');
    expect(await q.get()).toBe('ns/a');
    q.addLowPriority('ns/a');
    q.addLowPriority('ns/a');
    expect(q.length).toBe(0);
    q.done('ns/a');
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 0, low: 1 });

    expect(await q.get()).toBe('ns/a');
    q.addLowPriority('ns/a');
    q.add('ns/a');
    q.addLowPriority('ns/a');
    q.done('ns/a');
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 1, low: 0 });
  });

  it('wakes a waiting worker', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.add('x');
    expect(await waiting).toBe('x');
    expect(q.length).toBe(0);
  });

  it('adds after a delay (milliseconds), keeping the earliest timer', () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    q.addAfter('a', 40);
    q.addAfter('a', 5_000);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(39);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 1, low: 0 });
    vi.advanceTimersByTime(10_000);
    expect(q.length).toBe(1);
  });

  it('queues delayed keys at their due times from one timer, earlier delays replacing later ones', async () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    q.addAfter('ns/c', 300);
    q.addAfter('ns/a', 100);
    q.addAfter('ns/b', 200);
    q.addAfter('ns/c', 150); // earlier: replaces 300
    q.addAfter('ns/b', 250); // later: ignored
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(99);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(await drain(q, 1)).toEqual(['ns/a']);
    vi.advanceTimersByTime(50);
    expect(await drain(q, 1)).toEqual(['ns/c']);
    vi.advanceTimersByTime(50);
    expect(await drain(q, 1)).toEqual(['ns/b']);
    // ns/c's replaced due time (300) queues nothing more, and no timer is left.
    vi.advanceTimersByTime(1_000);
    expect(q.length).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps its delayed keys right through many removals and re-adds (the heap is rebuilt)', async () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    // Each round leaves 500 stale heap entries: past round 5 the heap outgrows its bound and is rebuilt.
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 1_000; i++) q.addAfter(`ns/${i}`, 10_000 + i);
      for (let i = 0; i < 1_000; i++) if (i % 2 === 1) q.remove(`ns/${i}`);
    }
    vi.advanceTimersByTime(10_000 + 1_000);
    const handedOut = await drain(q, q.length);
    expect(handedOut).toEqual(Array.from({ length: 500 }, (_, i) => `ns/${2 * i}`));
    expect(vi.getTimerCount()).toBe(0);
  });

  it('fires a delay beyond the timer limit at the limit, not at once', () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    q.addAfter('ns/far', 40 * 24 * 3_600_000);
    vi.advanceTimersByTime(1_000);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(2 ** 31 - 1 - 1_000);
    expect(q.length).toBe(1);
  });

  it('grows the backoff per failure and forgets it', () => {
    vi.useFakeTimers();
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

  it('drops the backlog on shutdown: get resolves undefined at once, the key in process just finishes', async () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    for (let i = 0; i < 1_000; i++) q.add(`ns/${i}`);
    q.addLowPriority('other/low');
    q.addAfter('ns/timed', 10);
    const inProcess = await q.get();
    expect(inProcess).toBe('ns/0');
    q.add('ns/0');

    q.shutDown();
    expect(q.length).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(await q.get()).toBeUndefined();
    q.add('ns/late');
    q.addLowPriority('ns/late');
    q.done('ns/0');
    vi.advanceTimersByTime(1_000);
    expect(q.length).toBe(0);
    expect(await q.get()).toBeUndefined();
  });

  it('hands out every normal-priority key before any low-priority one', async () => {
    const q = new WorkQueue();
    q.addLowPriority('a/1');
    q.addLowPriority('b/1');
    q.add('c/1');
    q.addLowPriority('a/2');
    q.add('a/3');
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 2, low: 3 });
    expect(await drain(q, 5)).toEqual(['c/1', 'a/3', 'a/1', 'b/1', 'a/2']);
  });

  it('a normal-priority key added while low-priority keys are being handed out jumps ahead of them', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 100; i++) q.addLowPriority(`resync/${i}`);
    expect(await drain(q, 2)).toEqual(['resync/0', 'resync/1']);
    q.add('tenant/new');
    expect(await q.get()).toBe('tenant/new');
  });

  it('hands out high-priority keys first, promotes to high once, and re-queues at high after done', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 5; i++) q.add(`bulk/${i}`);
    q.addLowPriority('ns/resync');
    q.addHighPriority('other/issued');
    q.addHighPriority('bulk/3'); // queued at normal: moves up, still once
    expect(q.lengthByPriority).toEqual({ high: 2, normal: 4, low: 1 });
    expect(await drain(q, 1)).toEqual(['other/issued']);
    expect(await q.get()).toBe('bulk/3');
    q.addHighPriority('bulk/3'); // in process: queued again at high on done
    q.add('bulk/3'); // a lower priority does not lower the re-add
    q.done('bulk/3');
    expect(await drain(q, 2)).toEqual(['bulk/3', 'bulk/0']);
    expect(await drain(q, 4)).toEqual(['bulk/1', 'bulk/2', 'bulk/4', 'ns/resync']);
    expect(await isEmpty(q)).toBe(true);
  });

  it('promotes a low-priority key to normal once, without queuing it twice', async () => {
    const q = new WorkQueue();
    q.addLowPriority('ns/a');
    q.addLowPriority('ns/b');
    q.addLowPriority('ns/c');
    q.add('ns/b');
    q.add('ns/b');
    q.addLowPriority('ns/b'); // no demotion
    expect(q.length).toBe(3);
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 1, low: 2 });
    expect(await drain(q, 3)).toEqual(['ns/b', 'ns/a', 'ns/c']);
    expect(q.length).toBe(0);
    expect(await isEmpty(q)).toBe(true);
  });

  it('hands out keys round-robin across namespaces, FIFO within each', async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 1_500; i++) q.add(`big/${i}`);
    for (let i = 0; i < 3; i++) q.add(`small/${i}`);
    const first = await drain(q, 6);
    expect(first.filter((k) => k?.startsWith('small/'))).toEqual(['small/0', 'small/1', 'small/2']);
    expect(first).toEqual(['big/0', 'small/0', 'big/1', 'small/1', 'big/2', 'small/2']);
    const rest = await drain(q, 1_497);
    expect(rest).toEqual(Array.from({ length: 1_497 }, (_, i) => `big/${i + 3}`));
    expect(q.length).toBe(0);
  });

  it('applies round-robin within the low priority too, and a namespace that empties rejoins at the end', async () => {
    const q = new WorkQueue();
    q.addLowPriority('a/1');
    q.addLowPriority('a/2');
    q.addLowPriority('b/1');
    q.addLowPriority('c/1');
    expect(await drain(q, 2)).toEqual(['a/1', 'b/1']);
    q.addLowPriority('b/2'); // b emptied, so it rejoins behind c and a
    expect(await drain(q, 3)).toEqual(['c/1', 'a/2', 'b/2']);
  });

  it('groups keys without a slash together', async () => {
    const q = new WorkQueue();
    q.add('config');
    q.add('other');
    q.add('ns/a');
    expect(await drain(q, 3)).toEqual(['config', 'ns/a', 'other']);
  });

  it('removes a queued key without disturbing the order of the others', async () => {
    const q = new WorkQueue();
    q.add('a/1');
    q.add('a/2');
    q.add('a/3');
    q.add('b/1');
    q.addLowPriority('c/1');
    q.remove('a/2');
    q.remove('b/1');
    q.remove('c/1');
    q.remove('never/queued');
    expect(q.lengthByPriority).toEqual({ high: 0, normal: 2, low: 0 });
    expect(await drain(q, 2)).toEqual(['a/1', 'a/3']);
    expect(await isEmpty(q)).toBe(true);
  });

  it('remove cancels the timer, the backoff and a re-add made during processing', async () => {
    vi.useFakeTimers();
    const q = new WorkQueue({ baseMs: 100, maxMs: 1_000 });
    q.addRateLimited('ns/a');
    q.addRateLimited('ns/a');
    q.remove('ns/a');
    vi.advanceTimersByTime(10_000);
    expect(q.length).toBe(0);
    expect(q.addRateLimited('ns/a')).toBeLessThanOrEqual(100);
    vi.advanceTimersByTime(100);
    expect(await q.get()).toBe('ns/a');
    q.add('ns/a');
    q.remove('ns/a');
    q.done('ns/a');
    expect(q.length).toBe(0);
  });

  it('promotes, removes and hands out every key of a 100,000-key queue once, by priority', async () => {
    // Its speed as the queue grows (linear, not quadratic) is measured by test/bench/work-queue.ts,
    // not here: a timed assertion fails on a loaded machine.
    const n = 100_000;
    const keys = Array.from({ length: n }, (_, i) => `ns${i % 1_000}/${i}`);
    const q = new WorkQueue();
    for (const key of keys) q.addLowPriority(key);
    expect(q.length).toBe(n);
    for (let i = 0; i < n; i += 2) q.add(keys[i] ?? '');
    for (let i = 1; i < n; i += 4) q.remove(keys[i] ?? '');
    expect(q.lengthByPriority).toEqual({ high: 0, normal: n / 2, low: n / 4 });
    const handedOut: string[] = [];
    while (q.length > 0) {
      const key = await q.get();
      if (key !== undefined) {
        handedOut.push(key);
        q.done(key);
      }
    }
    expect(handedOut).toHaveLength((n * 3) / 4);
    expect(new Set(handedOut).size).toBe(handedOut.length);
    // The promoted (even) keys first, then the low-priority ones left (i ≡ 3 mod 4).
    expect(handedOut.slice(0, n / 2).every((k) => Number(k.split('/')[1]) % 2 === 0)).toBe(true);
    expect(handedOut.slice(n / 2).every((k) => Number(k.split('/')[1]) % 4 === 3)).toBe(true);
  }, 60_000);
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

describe('WorkQueue waits', () => {
  it('records how long each key waited, at the priority it was taken at; a promotion keeps its queued time', async () => {
    let clock = 1_000;
    const waits: [string, number][] = [];
    const q = new WorkQueue(undefined, {
      name: 'test',
      now: () => clock,
      observeWait: (priority, seconds) => waits.push([priority, seconds]),
    });
    q.addLowPriority('a/1');
    clock += 2_000;
    q.add('b/1');
    clock += 500;
    // Promoted from low to high: still queued since t=1000.
    q.addHighPriority('a/1');
    clock += 1_500;
    expect(await q.get()).toBe('a/1');
    expect(await q.get()).toBe('b/1');
    q.done('a/1');
    q.done('b/1');
    // A worker already waiting takes a key at once: a wait of 0.
    const next = q.get();
    clock += 10_000;
    q.add('c/1');
    expect(await next).toBe('c/1');
    expect(waits).toEqual([
      ['high', 4],
      ['normal', 2],
      ['normal', 0],
    ]);
    expect(q.name).toBe('test');
    q.shutDown();
  });
});
