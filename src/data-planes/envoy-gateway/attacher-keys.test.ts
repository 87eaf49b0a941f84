import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { trimListenerSet, trimRoute } from './attacher.js';
import { envoyGatewayWatch, envoyPatchPolicyKey } from './attacher-keys.js';

const policy = (
  name: string,
  kind: string,
  target: string,
  group = 'gateway.networking.k8s.io',
): RateLimitPolicy => ({
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { namespace: 'shop', name },
  spec: {
    plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
    defaultPlan: 'free',
    targetRefs: [{ group, kind, name: target }],
  },
});

describe('envoyGatewayWatch', () => {
  const policies = [
    policy('route', 'HTTPRoute', 'www'),
    policy('gateway', 'Gateway', 'www'),
    policy('proxy', 'HTTPProxy', 'www', 'projectcontour.io'),
  ];
  const queued: string[] = [];
  const watch = envoyGatewayWatch(
    { list: (ns) => (ns === 'shop' ? policies : []) },
    { add: (k) => queued.push(k) },
  );

  it("queues a Gateway's EnvoyPatchPolicies key, and only the policies targeting that kind and name", () => {
    watch.gateway('envoy-gateway-system/portico');
    watch.targeted('shop', 'HTTPRoute', 'www');
    watch.targeted('shop', 'Gateway', 'www');
    watch.targeted('shop', 'HTTPRoute', 'other');
    watch.targeted('elsewhere', 'HTTPRoute', 'www');
    expect(queued).toEqual([
      envoyPatchPolicyKey('envoy-gateway-system/portico'),
      'shop/route',
      'shop/gateway',
    ]);
  });
});

describe('the watch caches keep what placement reads', () => {
  it('an HTTPRoute: its parentRefs only', () => {
    const route = {
      metadata: { namespace: 'shop', name: 'www' },
      spec: { parentRefs: [{ name: 'portico' }], hostnames: ['www.shop.example'], rules: [{}] },
      status: { parents: [] },
    };
    trimRoute(route);
    expect(route.spec).toEqual({ parentRefs: [{ name: 'portico' }] });
    expect(route.status).toBeUndefined();
  });

  it("a ListenerSet: its parentRef, its listeners' names, ports and protocols, and their attachedRoutes", () => {
    const ls = {
      metadata: { namespace: 'shop', name: 'www' },
      spec: {
        parentRef: { name: 'portico', namespace: 'envoy-gateway-system' },
        listeners: [{ name: 'https', port: 443, protocol: 'HTTPS', hostname: 'x', tls: {} }],
      },
      status: { listeners: [{ name: 'https', attachedRoutes: 2, conditions: [{}] }], conditions: [] },
    };
    trimListenerSet(ls);
    expect(ls).toEqual({
      metadata: { namespace: 'shop', name: 'www' },
      spec: {
        parentRef: { name: 'portico', namespace: 'envoy-gateway-system' },
        listeners: [{ name: 'https', port: 443, protocol: 'HTTPS' }],
      },
      status: { listeners: [{ name: 'https', attachedRoutes: 2 }] },
    });
  });
});
