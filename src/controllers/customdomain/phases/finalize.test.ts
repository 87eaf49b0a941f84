import type { KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { FINALIZER, type CustomDomain } from '../../../api/customdomain.js';
import { finalize, ROUTING_GONE_RECHECK_MS, type FinalizeAdapter } from './finalize.js';

const domain = (finalizers: string[]): CustomDomain =>
  ({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { namespace: 'shop', name: 'www', uid: 'u1', finalizers, deletionTimestamp: new Date() },
    spec: { hostname: 'www.example.com' },
  }) as unknown as CustomDomain;

/** An adapter that records each step in order; `left` routing objects still exist, `live` is the API server's copy. */
function recorder(opts: { left?: boolean; live?: CustomDomain | undefined }) {
  const steps: string[] = [];
  const adapter: FinalizeAdapter = {
    objects: {
      removeRouting: () => (steps.push('removeRouting'), Promise.resolve()),
      exists: (h: KubernetesObject) => Promise.resolve(opts.left === true && h.kind === 'Ingress'),
      readLive: () => (steps.push('readLive'), Promise.resolve(opts.live)),
      deleteIfCached: (h: KubernetesObject) => (steps.push(`delete ${h.kind ?? ''}`), Promise.resolve()),
      removeFinalizer: () => (steps.push('removeFinalizer'), Promise.resolve()),
    },
    claims: { release: () => (steps.push('releaseClaim'), Promise.resolve()) },
    events: { record: (_o, _t, reason) => (steps.push(`event ${reason}`), Promise.resolve()) },
    lastGood: { remove: () => (steps.push('remove last good'), Promise.resolve()) },
    cancelOrder: () => steps.push('cancelOrder'),
    forgetMetrics: () => steps.push('forgetMetrics'),
  };
  return { steps, adapter };
}

const log = pino({ level: 'silent' });

describe('finalize (docs/customdomains.md, "Removal")', () => {
  it('stops traffic first, then the order, the Secret and its last good copy, the claim, the Event, and the finalizer last', async () => {
    const d = domain([FINALIZER]);
    const { steps, adapter } = recorder({ live: d });
    expect(await finalize(d, 'shop/www', log, adapter)).toEqual({});
    expect(steps).toEqual([
      'removeRouting',
      'readLive',
      'cancelOrder',
      'delete Secret',
      'remove last good',
      'forgetMetrics',
      'releaseClaim',
      'event Removed',
      'removeFinalizer',
    ]);
  });

  it('waits while a routing object remains, touching nothing else', async () => {
    const d = domain([FINALIZER]);
    const { steps, adapter } = recorder({ left: true, live: d });
    expect(await finalize(d, 'shop/www', log, adapter)).toEqual({ requeueAfterMs: ROUTING_GONE_RECHECK_MS });
    expect(steps).toEqual(['removeRouting']);
  });

  it('does nothing more when an earlier reconcile already removed it', async () => {
    const d = domain([FINALIZER]);
    for (const live of [undefined, domain(['other'])]) {
      const { steps, adapter } = recorder({ live });
      expect(await finalize(d, 'shop/www', log, adapter)).toEqual({});
      expect(steps).toEqual(['removeRouting', 'readLive']);
    }
  });

  it("leaves a domain without Portico's finalizer alone", async () => {
    const { steps, adapter } = recorder({});
    expect(await finalize(domain(['other']), 'shop/www', log, adapter)).toEqual({});
    expect(steps).toEqual([]);
  });
});
