import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  hasRoutingClass,
  inRoutingClass,
  reservedGateways,
  type RoutingClassSettings,
} from './routing-class.js';

describe('routing class', () => {
  const ingress = (spec: Record<string, unknown>, annotations?: Record<string, string>): KubernetesObject =>
    ({ metadata: { namespace: 'shop', ...(annotations ? { annotations } : {}) }, spec }) as KubernetesObject;

  it('ingress mode: the class as Contour reads it (annotations before spec.ingressClassName)', () => {
    const settings: RoutingClassSettings = { mode: 'ingress', ingressClassName: 'portico' };
    expect(hasRoutingClass(settings)).toBe(true);
    expect(inRoutingClass('Ingress', ingress({ ingressClassName: 'portico' }), settings)).toBe(true);
    expect(inRoutingClass('HTTPProxy', ingress({ ingressClassName: 'portico' }), settings)).toBe(true);
    expect(
      inRoutingClass('Ingress', ingress({}, { 'kubernetes.io/ingress.class': 'portico' }), settings),
    ).toBe(true);
    expect(
      inRoutingClass(
        'HTTPProxy',
        ingress({ ingressClassName: 'portico' }, { 'projectcontour.io/ingress.class': 'contour' }),
        settings,
      ),
    ).toBe(false);
    expect(inRoutingClass('Ingress', ingress({}), settings)).toBe(false);
    expect(inRoutingClass('Middleware', ingress({ ingressClassName: 'portico' }), settings)).toBe(false);
  });

  it('no class, or gateway parentRefs without a namespace: nothing is reserved, every object counts', () => {
    const none: RoutingClassSettings[] = [
      {},
      { mode: 'ingress', ingressClassName: '' },
      { mode: 'gateway', gatewayParentRefs: [{ name: 'public' }] },
    ];
    for (const settings of none) {
      expect(hasRoutingClass(settings)).toBe(false);
      expect(inRoutingClass('Ingress', ingress({ ingressClassName: 'other' }), settings)).toBe(true);
    }
  });

  it('gateway mode: the Gateways of parentRefs with a namespace, named from another namespace', () => {
    const settings: RoutingClassSettings = {
      mode: 'gateway',
      gatewayParentRefs: [{ name: 'public', namespace: 'infra', sectionName: 'https' }, { name: 'local' }],
    };
    expect(reservedGateways(settings)).toEqual([
      { name: 'public', namespace: 'infra', sectionName: 'https' },
    ]);
    const set = (parentRef: unknown): KubernetesObject =>
      ({ metadata: { namespace: 'shop' }, spec: { parentRef } }) as KubernetesObject;
    expect(inRoutingClass('ListenerSet', set({ name: 'public', namespace: 'infra' }), settings)).toBe(true);
    expect(
      inRoutingClass(
        'ListenerSet',
        set({ group: 'example.com', name: 'public', namespace: 'infra' }),
        settings,
      ),
    ).toBe(false);
    expect(inRoutingClass('ListenerSet', set({ name: 'local' }), settings)).toBe(false);
    expect(inRoutingClass('ListenerSet', set('not an object'), settings)).toBe(false);
    expect(
      inRoutingClass(
        'HTTPRoute',
        { metadata: { namespace: 'infra' }, spec: { parentRefs: [{ name: 'public' }] } } as KubernetesObject,
        settings,
      ),
    ).toBe(false);
  });
});
