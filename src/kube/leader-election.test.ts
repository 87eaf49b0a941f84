import type { KubernetesObjectApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { canAcquire, LeaderElector, microTime } from './leader-election.js';

describe('canAcquire', () => {
  const now = new Date('2026-01-01T00:01:00Z');
  it('takes a free lease or keeps our own', () => {
    expect(canAcquire(undefined, 'me', now)).toBe(true);
    expect(canAcquire({ holderIdentity: '' }, 'me', now)).toBe(true);
    expect(
      canAcquire(
        { holderIdentity: 'me', renewTime: '2026-01-01T00:00:59Z', leaseDurationSeconds: 15 },
        'me',
        now,
      ),
    ).toBe(true);
  });
  it("waits for another holder's lease to expire", () => {
    const held = { holderIdentity: 'other', leaseDurationSeconds: 15 };
    expect(canAcquire({ ...held, renewTime: '2026-01-01T00:00:50Z' }, 'me', now)).toBe(false);
    expect(canAcquire({ ...held, renewTime: '2026-01-01T00:00:44Z' }, 'me', now)).toBe(true);
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
  #gate: Promise<void> | undefined;
  #readArrived: () => void = () => undefined;

  /** Holds the next read until the returned function is called; `arrived` settles when it comes. */
  holdNextRead(): { arrived: Promise<void>; release: () => void } {
    let release!: () => void;
    this.#gate = new Promise<void>((resolve) => (release = resolve));
    const arrived = new Promise<void>((resolve) => (this.#readArrived = resolve));
    return { arrived, release };
  }

  async read(): Promise<unknown> {
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
