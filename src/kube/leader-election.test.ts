import type { KubernetesObjectApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { leaderElectors, registerSharedMetrics } from '../observability/shared-metrics.js';
import { canAcquire, LeaderElector, microTime, observe } from './leader-election.js';

describe('observe', () => {
  const held = {
    holderIdentity: 'other',
    leaseDurationSeconds: 15,
    acquireTime: '2026-01-01T00:00:00.000000Z',
    renewTime: '2026-01-01T00:00:10.000000Z',
    leaseTransitions: 2,
  };

  it('keeps the time a record was first seen while it stays the same', () => {
    const first = observe(undefined, held, 1_000, 30);
    expect(first.observedAt).toBe(1_000);
    expect(observe(first, { ...held }, 9_000, 30)).toBe(first);
  });

  it('starts again when the holder renews, changes, or the transitions move', () => {
    const first = observe(undefined, held, 1_000, 30);
    const changes = [
      { renewTime: '2026-01-01T00:00:12.000000Z' },
      { renewTime: new Date('2026-01-01T00:00:12Z') },
      { holderIdentity: 'third' },
      { leaseTransitions: 3 },
      { acquireTime: '2026-01-01T00:00:11.000000Z' },
      { leaseDurationSeconds: 20 },
    ];
    for (const change of changes) {
      expect(observe(first, { ...held, ...change }, 9_000, 30).observedAt).toBe(9_000);
    }
  });

  it("takes the holder's lease duration, or the candidate's own when the Lease has none", () => {
    expect(observe(undefined, held, 0, 30).leaseDurationSeconds).toBe(15);
    expect(observe(undefined, { ...held, leaseDurationSeconds: 0 }, 0, 30).leaseDurationSeconds).toBe(30);
    const withoutDuration = { holderIdentity: 'other', renewTime: held.renewTime };
    expect(observe(undefined, withoutDuration, 0, 30).leaseDurationSeconds).toBe(30);
    expect(observe(undefined, undefined, 0, 30).holderIdentity).toBe('');
  });
});

describe('canAcquire', () => {
  it('takes a free lease or keeps our own at once', () => {
    expect(canAcquire(observe(undefined, undefined, 0, 15), 'me', 0)).toBe(true);
    expect(canAcquire(observe(undefined, { holderIdentity: '' }, 0, 15), 'me', 0)).toBe(true);
    const ours = observe(undefined, { holderIdentity: 'me', leaseDurationSeconds: 15 }, 0, 15);
    expect(canAcquire(ours, 'me', 0)).toBe(true);
  });

  it("waits the holder's lease duration from when the record was observed, whatever its renewTime says", () => {
    // renewTime an hour behind (a skewed holder), then an hour ahead: the verdicts are the same.
    for (const renewTime of ['2026-01-01T00:00:00.000000Z', '2026-01-01T02:00:00.000000Z']) {
      const seen = observe(
        undefined,
        { holderIdentity: 'other', leaseDurationSeconds: 15, renewTime },
        5_000,
        30,
      );
      expect(canAcquire(seen, 'me', 5_000)).toBe(false);
      expect(canAcquire(seen, 'me', 19_999)).toBe(false);
      expect(canAcquire(seen, 'me', 20_000)).toBe(true);
    }
  });
});

describe('microTime', () => {
  it('writes six fractional digits', () => {
    expect(microTime(new Date('2026-01-01T00:00:00.123Z'))).toBe('2026-01-01T00:00:00.123000Z');
  });
});

/**
 * An in-memory Lease with the API server's optimistic concurrency (resourceVersion), whose next
 * read can be held, so a try can be caught in flight.
 */
class LeaseStore {
  lease: { metadata: { resourceVersion: string }; spec: Record<string, unknown> } | undefined;
  #version = 0;
  #reads = 0;
  #gate: Promise<void> | undefined;
  #readArrived: () => void = () => undefined;

  /** Holds the next read until the returned function is called; `arrived` settles when it comes. */
  holdNextRead(): { arrived: Promise<void>; release: () => void } {
    let release!: () => void;
    this.#gate = new Promise<void>((resolve) => (release = resolve));
    const arrived = new Promise<void>((resolve) => (this.#readArrived = resolve));
    return { arrived, release };
  }

  /** Another holder writes the Lease, as the API server would store it (a new resourceVersion). */
  put(spec: Record<string, unknown>): void {
    this.lease = { metadata: { resourceVersion: String(++this.#version) }, spec };
  }

  /** Settles once `count` more reads have been answered. */
  async afterReads(count: number): Promise<void> {
    const until = this.#reads + count;
    while (this.#reads < until) await new Promise((r) => setTimeout(r, 1));
  }

  async read(): Promise<unknown> {
    this.#reads += 1;
    const gate = this.#gate;
    if (gate) {
      this.#gate = undefined;
      this.#readArrived();
      await gate;
    }
    if (!this.lease) throw Object.assign(new Error('not found'), { code: 404 });
    return structuredClone(this.lease);
  }

  create(obj: { spec: Record<string, unknown> }): Promise<unknown> {
    if (this.lease) return Promise.reject(Object.assign(new Error('exists'), { code: 409 }));
    this.lease = { metadata: { resourceVersion: String(++this.#version) }, spec: obj.spec };
    return Promise.resolve(this.lease);
  }

  replace(obj: { metadata: { resourceVersion: string }; spec: Record<string, unknown> }): Promise<unknown> {
    if (obj.metadata.resourceVersion !== this.lease?.metadata.resourceVersion) {
      return Promise.reject(Object.assign(new Error('conflict'), { code: 409 }));
    }
    this.lease = { metadata: { resourceVersion: String(++this.#version) }, spec: obj.spec };
    return Promise.resolve(this.lease);
  }
}

describe('LeaderElector.stop', () => {
  const options = {
    namespace: 'portico-system',
    name: 'portico-controller',
    identity: 'me',
    leaseDurationSeconds: 15,
    renewDeadlineSeconds: 10,
    retryPeriodSeconds: 0.01,
  };
  const elector = (store: LeaseStore): LeaderElector =>
    new LeaderElector(store as unknown as KubernetesObjectApi, options, pino({ level: 'silent' }));

  it('starts nothing when a renewal under way settles after stop, and releases the Lease', async () => {
    const store = new LeaseStore();
    const e = elector(store);
    let started = 0;
    let stoppedLeading = 0;
    const leading = new Promise<void>((resolve) => {
      e.run(
        () => {
          started += 1;
          resolve();
        },
        () => (stoppedLeading += 1),
      );
    });
    await leading;
    // Catch the next renewal in flight, then stop.
    const renewal = store.holdNextRead();
    await renewal.arrived;
    const stopping = e.stop();
    renewal.release();
    await stopping;
    expect(started).toBe(1);
    expect(stoppedLeading).toBe(0);
    expect(e.leading).toBe(false);
    expect(store.lease?.spec.holderIdentity).toBe('');
    expect(store.lease?.spec.leaseDurationSeconds).toBe(1);
  });

  it('is read by portico_leader_election_leading from run to stop: 1 while it leads', async () => {
    const registry = new Registry();
    registerSharedMetrics(registry);
    const store = new LeaseStore();
    const e = elector(store);
    const gauge = async (): Promise<string | undefined> =>
      (await registry.metrics()).split('\n').find((l) => l.startsWith('portico_leader_election_leading{'));
    expect(await gauge()).toBeUndefined();
    await new Promise<void>((resolve) => {
      e.run(resolve, () => undefined);
    });
    expect(await gauge()).toBe('portico_leader_election_leading{lease="portico-controller"} 1');
    await e.stop();
    expect(leaderElectors.values()).not.toContain(e);
    expect(await gauge()).toBeUndefined();
  });

  it('starts nothing when an acquisition under way settles after stop, and gives the Lease back', async () => {
    const store = new LeaseStore();
    const e = elector(store);
    let started = 0;
    const acquisition = store.holdNextRead();
    e.run(
      () => (started += 1),
      () => undefined,
    );
    await acquisition.arrived;
    const stopping = e.stop();
    acquisition.release();
    await stopping;
    // The try created the Lease for "me" after stop was called; stop released it.
    expect(started).toBe(0);
    expect(store.lease?.spec.holderIdentity).toBe('');
  });
});

describe('LeaderElector with a holder whose clock is skewed', () => {
  const options = {
    namespace: 'portico-system',
    name: 'portico-controller',
    identity: 'me',
    leaseDurationSeconds: 15,
    renewDeadlineSeconds: 10,
    retryPeriodSeconds: 0.005,
  };

  it('keeps off a Lease that is being renewed, and takes it a lease duration after the renewals stop', async () => {
    const store = new LeaseStore();
    // The holder's clock is a day behind: by renewTime the Lease expired long ago.
    const renewal = (n: number): Record<string, unknown> => ({
      holderIdentity: 'other',
      leaseDurationSeconds: 15,
      acquireTime: '2025-12-31T00:00:00.000000Z',
      renewTime: microTime(new Date(Date.UTC(2025, 11, 31, 0, 0, n))),
      leaseTransitions: 0,
    });
    store.put(renewal(0));
    let now = 0;
    const e = new LeaderElector(
      store as unknown as KubernetesObjectApi,
      options,
      pino({ level: 'silent' }),
      () => now,
    );
    let started = 0;
    e.run(
      () => (started += 1),
      () => undefined,
    );
    try {
      await store.afterReads(2);
      // Ten renewals, 10 s apart on the candidate's clock: each one restarts its count.
      for (let n = 1; n <= 10; n += 1) {
        now += 10_000;
        store.put(renewal(n));
        await store.afterReads(2);
        expect(started).toBe(0);
      }
      // The renewals stop: still held one tick before a lease duration since the last was seen.
      now += 14_999;
      await store.afterReads(2);
      expect(started).toBe(0);
      expect(store.lease?.spec.holderIdentity).toBe('other');
      now += 1;
      await store.afterReads(2);
      expect(started).toBe(1);
      expect(store.lease?.spec.holderIdentity).toBe('me');
      expect(store.lease?.spec.leaseTransitions).toBe(1);
    } finally {
      await e.stop();
    }
  });
});
