import { describe, expect, it } from 'vitest';
import {
  currentIssuanceSignal,
  IssuanceTracker,
  ORDER_ABANDONED,
  outsideIssuance,
  SHUTTING_DOWN,
} from './issuance-tracker.js';
import { rateLimitOf } from './rate-limit.js';

/** A tracker whose `onSettled` calls can be awaited one by one with `next()`. */
function tracker(): { tracker: IssuanceTracker; next: () => Promise<string> } {
  const waiting: ((key: string) => void)[] = [];
  return {
    tracker: new IssuanceTracker((key) => {
      waiting.shift()?.(key);
    }),
    next: () => new Promise<string>((resolve) => waiting.push(resolve)),
  };
}

describe('IssuanceTracker', () => {
  it('runs one order per key at a time', async () => {
    const { tracker: t, next } = tracker();
    let finish!: () => void;
    const done = next();
    expect(t.start('ns/a', 'a.example', () => new Promise<void>((r) => (finish = r)))).toBe(true);
    expect(t.start('ns/a', 'a.example', () => Promise.resolve())).toBe(false);
    expect(t.inFlight('ns/a')?.hostname).toBe('a.example');
    finish();
    expect(await done).toBe('ns/a');
    expect(t.inFlight('ns/a')).toBeUndefined();
    expect(t.lastOutcome('ns/a')?.state).toBe('succeeded');
  });

  it('gives work started with outsideIssuance no run signal, inside a run or not', async () => {
    const { tracker: t, next } = tracker();
    const seen: (AbortSignal | undefined)[] = [];
    const done = next();
    t.start('ns/a', 'a.example', async (signal) => {
      expect(currentIssuanceSignal()).toBe(signal);
      seen.push(
        await outsideIssuance(async () => {
          await Promise.resolve();
          return currentIssuanceSignal();
        }),
      );
      seen.push(currentIssuanceSignal());
    });
    await done;
    expect(seen[0]).toBeUndefined();
    expect(seen[1]).toBeInstanceOf(AbortSignal);
    expect(outsideIssuance(() => 42)).toBe(42);
  });

  it('hands the run its signal through the async chain, and cancel fires it', async () => {
    const { tracker: t } = tracker();
    const seen: (AbortSignal | undefined)[] = [];
    let resume!: () => void;
    const paused = new Promise<void>((r) => (resume = r));
    t.start('ns/a', 'a.example', async (signal) => {
      seen.push(currentIssuanceSignal());
      await paused;
      await Promise.resolve();
      seen.push(currentIssuanceSignal());
      expect(currentIssuanceSignal()).toBe(signal);
    });
    expect(currentIssuanceSignal()).toBeUndefined();
    t.cancel('ns/a');
    resume();
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toHaveLength(2);
    expect(seen[0]?.aborted).toBe(true);
    expect(seen[1]).toBe(seen[0]);
    // Cancelled: no outcome is kept and nothing is re-queued.
    expect(t.lastOutcome('ns/a')).toBeUndefined();
    expect(t.inFlight('ns/a')).toBeUndefined();
  });

  it('records a failure with its reason, count and the CA’s Retry-After time', async () => {
    const { tracker: t, next } = tracker();
    const now = new Date();
    const limited = rateLimitOf(429, { detail: 'slow down' }, '120', now);
    let settledKey = next();
    t.start('ns/a', 'a.example', () => Promise.reject(limited ?? new Error('no error')));
    await settledKey;
    const first = t.lastOutcome('ns/a');
    expect(first).toMatchObject({ state: 'failed', reason: 'CARateLimited', failures: 1 });
    expect(first?.state === 'failed' ? first.retryAfter?.getTime() : undefined).toBe(now.getTime() + 120_000);

    settledKey = next();
    t.start('ns/a', 'a.example', () => Promise.reject(new Error('boom')));
    await settledKey;
    const second = t.lastOutcome('ns/a');
    expect(second).toMatchObject({ state: 'failed', reason: 'IssuanceFailed', failures: 2, message: 'boom' });
    expect(second && 'retryAfter' in second).toBe(false);
  });

  it('counts prior failures from status only when it has no outcome of its own (a restarted operator)', async () => {
    const { tracker: t, next } = tracker();
    let settledKey = next();
    // A fresh process: status recorded 3 failures in a row, so this one is the 4th.
    t.start('ns/a', 'a.example', () => Promise.reject(new Error('boom')), 3);
    await settledKey;
    expect(t.lastOutcome('ns/a')).toMatchObject({ state: 'failed', failures: 4 });

    // Memory wins over what the caller read from a status that may lag by one write.
    settledKey = next();
    t.start('ns/a', 'a.example', () => Promise.reject(new Error('boom')), 1);
    await settledKey;
    expect(t.lastOutcome('ns/a')).toMatchObject({ state: 'failed', failures: 5 });

    // After a success the count starts again, whatever status said.
    settledKey = next();
    t.start('ns/a', 'a.example', () => Promise.resolve());
    await settledKey;
    settledKey = next();
    t.start('ns/a', 'a.example', () => Promise.reject(new Error('boom')), 7);
    await settledKey;
    expect(t.lastOutcome('ns/a')).toMatchObject({ state: 'failed', failures: 1 });
  });

  it('stop fires every run with the shutdown reason, waits for them to end, and starts nothing more', async () => {
    const { tracker: t } = tracker();
    const ended: string[] = [];
    const runUntilAborted = (key: string) => (signal: AbortSignal) =>
      new Promise<void>((_, reject) => {
        signal.addEventListener('abort', () => {
          // Ends a tick later, as an aborted HTTP request does.
          setTimeout(() => {
            ended.push(`${key}: ${String(signal.reason)}`);
            reject(new Error('aborted'));
          }, 5);
        });
      });
    expect(t.start('ns/a', 'a.example', runUntilAborted('ns/a'))).toBe(true);
    expect(t.start('ns/b', 'b.example', runUntilAborted('ns/b'))).toBe(true);
    await t.stop();
    expect(ended.sort()).toEqual([`ns/a: ${SHUTTING_DOWN}`, `ns/b: ${SHUTTING_DOWN}`]);
    expect(t.inFlight('ns/a')).toBeUndefined();
    let ran = false;
    expect(
      t.start('ns/c', 'c.example', () => {
        ran = true;
        return Promise.resolve();
      }),
    ).toBe(false);
    expect(ran).toBe(false);
  });

  it('abandon fires the run with its reason and lets a fresh run start at once; the old one records nothing', async () => {
    const settled: string[] = [];
    const t = new IssuanceTracker((key) => settled.push(key));
    const reasons: unknown[] = [];
    let endOld!: () => void;
    const ended = new Promise<void>((r) => (endOld = r));
    const old = t.start(
      'ns/a',
      'a.example',
      (signal) =>
        new Promise<void>((_, reject) => {
          signal.addEventListener('abort', () => {
            reasons.push(signal.reason);
            // Ends after the fresh run has started, with the error a cancelled issuer throws.
            setTimeout(() => {
              reject(Object.assign(new Error('cancelled'), { validationFailed: true }));
              endOld();
            }, 5);
          });
        }),
    );
    expect(old).toBe(true);
    expect(t.abandon('ns/a')).toBe(true);
    expect(reasons).toEqual([ORDER_ABANDONED]);
    expect(t.inFlight('ns/a')).toBeUndefined();

    let finishFresh!: () => void;
    expect(t.start('ns/a', 'a.example', () => new Promise<void>((r) => (finishFresh = r)))).toBe(true);
    const fresh = t.inFlight('ns/a');
    await ended;
    await new Promise((r) => setTimeout(r, 0));
    // The abandoned run's end neither settles the key nor counts as a failure.
    expect(settled).toEqual([]);
    expect(t.lastOutcome('ns/a')).toBeUndefined();
    expect(t.inFlight('ns/a')).toBe(fresh);

    finishFresh();
    await new Promise((r) => setTimeout(r, 0));
    expect(settled).toEqual(['ns/a']);
    expect(t.lastOutcome('ns/a')?.state).toBe('succeeded');
    expect(t.abandon('ns/a')).toBe(false);
  });
});
