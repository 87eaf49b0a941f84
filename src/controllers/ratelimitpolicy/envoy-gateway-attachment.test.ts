import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { attachedCondition, type TargetVerdict } from './attachment.js';
import {
  POLICIES_ANNOTATION,
  entryPolicy,
  TARGET_ANNOTATION,
  gatewayPatchPolicies,
  gatewayPlacement,
  isEnvoyGatewayTarget,
  parseEntries,
  patchState,
  placements,
  policyEntry,
  serviceWiringPolicyName,
  targetOwners,
  targetPolicyName,
  type EnvoyPatchPolicyObject,
  type GatewayObject,
  type HTTPRouteObject,
  type ListenerSetObject,
} from './envoy-gateway-attachment.js';

const gateway: GatewayObject = {
  metadata: { namespace: 'envoy-gateway-system', name: 'portico' },
  spec: {
    listeners: [
      { name: 'http', port: 80, protocol: 'HTTP' },
      { name: 'tls', port: 8443, protocol: 'TLS' },
    ],
  },
};
const listenerSet: ListenerSetObject = {
  metadata: { namespace: 'shop', name: 'portico-www' },
  spec: {
    parentRef: { name: 'portico', namespace: 'envoy-gateway-system' },
    listeners: [{ name: 'https', port: 443, protocol: 'HTTPS' }],
  },
};
const route: HTTPRouteObject = {
  metadata: { namespace: 'shop', name: 'portico-www' },
  spec: {
    parentRefs: [
      {
        group: 'gateway.networking.k8s.io',
        kind: 'Gateway',
        namespace: 'envoy-gateway-system',
        name: 'portico',
      },
      { group: 'gateway.networking.k8s.io', kind: 'ListenerSet', name: 'portico-www' },
    ],
  },
};
const policy = (name: string, created: string, generation = 1): RateLimitPolicy => ({
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: {
    namespace: 'shop',
    name,
    generation,
    creationTimestamp: new Date(created),
  },
  spec: { plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }], defaultPlan: 'free' },
});
const service = {
  serviceName: 'portico-ratelimit',
  serviceNamespace: 'portico-system',
  servicePort: 8081,
  clusterDomain: 'cluster.local',
  timeoutMs: 1000,
  headers: { keyId: 'x-api-key-id', plan: 'x-api-plan' },
};

describe('isEnvoyGatewayTarget', () => {
  it('is true for a Gateway API HTTPRoute or Gateway only', () => {
    expect(isEnvoyGatewayTarget({ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'a' })).toBe(
      true,
    );
    expect(isEnvoyGatewayTarget({ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'a' })).toBe(
      true,
    );
    expect(isEnvoyGatewayTarget({ group: 'gateway.networking.k8s.io', kind: 'GRPCRoute', name: 'a' })).toBe(
      false,
    );
    expect(isEnvoyGatewayTarget({ group: 'projectcontour.io', kind: 'HTTPProxy', name: 'a' })).toBe(false);
  });
});

describe('placements', () => {
  const gateways = new Map([['envoy-gateway-system/portico', gateway]]);
  const sets = new Map([['shop/portico-www', listenerSet]]);

  it("names the Gateway's HTTP listener's http-<port> and the ListenerSet listener's route configuration, and their ports", () => {
    expect(placements(route, gateways, sets)).toEqual([
      {
        gateway: 'envoy-gateway-system/portico',
        ports: [80, 443],
        routeConfigurations: ['envoy-gateway-system/portico/shop/portico-www/https', 'http-80'],
      },
    ]);
  });

  it('keeps only the listener a sectionName names', () => {
    const https: HTTPRouteObject = {
      ...route,
      spec: { parentRefs: [{ kind: 'ListenerSet', name: 'portico-www', sectionName: 'https' }] },
    };
    expect(placements(https, gateways, sets)).toEqual([
      {
        gateway: 'envoy-gateway-system/portico',
        ports: [443],
        routeConfigurations: ['envoy-gateway-system/portico/shop/portico-www/https'],
      },
    ]);
  });

  it("names a Gateway's own HTTPS listener's route configuration after it", () => {
    const gw: GatewayObject = {
      metadata: gateway.metadata,
      spec: { listeners: [{ name: 'web', port: 443, protocol: 'HTTPS' }] },
    };
    const r: HTTPRouteObject = {
      ...route,
      spec: { parentRefs: [{ name: 'portico', namespace: 'envoy-gateway-system' }] },
    };
    expect(
      placements(r, new Map([['envoy-gateway-system/portico', gw]]), new Map())[0]?.routeConfigurations,
    ).toEqual(['envoy-gateway-system/portico/web']);
  });

  it('is empty when no parent was read', () => {
    expect(placements(route, new Map(), new Map())).toEqual([]);
  });
});

describe('gatewayPlacement', () => {
  const withStatus = (attached: Record<string, number>): GatewayObject => ({
    ...gateway,
    spec: {
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP' },
        { name: 'web', port: 443, protocol: 'HTTPS' },
        { name: 'tls', port: 8443, protocol: 'TLS' },
      ],
    },
    status: {
      listeners: Object.entries(attached).map(([name, attachedRoutes]) => ({ name, attachedRoutes })),
    },
  });
  const ls = (attachedRoutes: number, parent = 'portico'): ListenerSetObject => ({
    ...listenerSet,
    spec: { ...listenerSet.spec, parentRef: { name: parent, namespace: 'envoy-gateway-system' } },
    status: { listeners: [{ name: 'https', attachedRoutes }] },
  });

  it("names the route configurations of the Gateway's and its ListenerSets' HTTP and HTTPS listeners that have routes", () => {
    expect(gatewayPlacement(withStatus({ http: 2, web: 1, tls: 3 }), [ls(1), ls(1, 'other')])).toEqual({
      gateway: 'envoy-gateway-system/portico',
      ports: [80, 443],
      routeConfigurations: [
        'envoy-gateway-system/portico/shop/portico-www/https',
        'envoy-gateway-system/portico/web',
        'http-80',
      ],
    });
  });

  it('leaves out listeners without routes, and is undefined when none has one', () => {
    expect(gatewayPlacement(withStatus({ http: 1, web: 0 }), [ls(0)])?.routeConfigurations).toEqual([
      'http-80',
    ]);
    expect(gatewayPlacement(withStatus({}), [ls(0)])).toBeUndefined();
  });
});

describe('targetOwners and gatewayPatchPolicies', () => {
  const placement = {
    gateway: 'envoy-gateway-system/portico',
    ports: [80],
    routeConfigurations: ['http-80'],
  };
  it('gives a target several policies name to the oldest', () => {
    const old = policy('old', '2026-01-01T00:00:00Z');
    const young = policy('young', '2026-02-01T00:00:00Z');
    const r = { kind: 'HTTPRoute', namespace: 'shop', name: 'portico-www' };
    expect(
      targetOwners([
        { policy: young, target: r, placement },
        { policy: old, target: r, placement },
      ]).get('HTTPRoute shop/portico-www'),
    ).toBe(old);
  });

  it("labels the Gateway's EnvoyPatchPolicies as Portico's: the service wiring carrying every policy generation, one per target carrying its own", () => {
    const a = policy('a', '2026-01-01T00:00:00Z', 2);
    const b = policy('b', '2026-01-01T00:00:00Z', 3);
    const bodies = gatewayPatchPolicies(
      { namespace: 'envoy-gateway-system', name: 'portico' },
      [
        { policy: b, target: { kind: 'HTTPRoute', namespace: 'shop', name: 'r2' }, placement },
        {
          policy: a,
          target: { kind: 'Gateway', namespace: 'shop', name: 'portico' },
          placement: { ...placement, ports: [443], routeConfigurations: ['x/portico/web'] },
        },
      ],
      service,
    ) as {
      metadata: { name: string; namespace: string; labels: object; annotations: Record<string, string> };
      spec: {
        targetRef: object;
        jsonPatches: { type: string; name: string; operation: Record<string, unknown> }[];
      };
    }[];
    expect(bodies.map((x) => x.metadata.name)).toEqual([
      'portico-ratelimit-portico',
      targetPolicyName('portico', b, { kind: 'HTTPRoute', namespace: 'shop', name: 'r2' }),
      targetPolicyName('portico', a, { kind: 'Gateway', namespace: 'shop', name: 'portico' }),
    ]);
    for (const x of bodies)
      expect(x.metadata).toMatchObject({
        namespace: 'envoy-gateway-system',
        labels: { 'app.kubernetes.io/managed-by': 'portico' },
      });
    const [wiring, route, gw] = bodies as [(typeof bodies)[0], (typeof bodies)[0], (typeof bodies)[0]];
    const entries = parseEntries(wiring.metadata.annotations[POLICIES_ANNOTATION]);
    expect(entries).toEqual(['shop/a@2', 'shop/b@3']);
    expect(entries.map(entryPolicy)).toEqual(['shop/a', 'shop/b']);
    // The service wiring: the cluster, the filter on both targets' ports.
    expect(wiring.spec.jsonPatches.map((p) => p.name)).toEqual(['portico-ratelimit', 'tcp-80', 'tcp-443']);
    expect(route.metadata.annotations).toEqual({
      [POLICIES_ANNOTATION]: 'shop/b@3',
      [TARGET_ANNOTATION]: 'HTTPRoute shop/r2',
    });
    expect(route.spec.jsonPatches).toHaveLength(1);
    expect(route.spec.jsonPatches[0]?.operation.jsonPath).toContain('httproute/shop/r2/rule/');
    expect(gw.metadata.annotations[TARGET_ANNOTATION]).toBe('Gateway shop/portico');
    expect(gw.spec.jsonPatches).toHaveLength(1);
    expect(gw.spec.jsonPatches[0]).toMatchObject({
      name: 'x/portico/web',
      operation: { jsonPath: '$.virtual_hosts[*]', path: '/rate_limits' },
    });
    expect(policyEntry(a)).toBe('shop/a@2');
    expect(gatewayPatchPolicies({ namespace: 'n', name: 'g' }, [], service)).toEqual([]);
  });

  it('keeps names within 253 characters and tells targets apart', () => {
    const long = 'g'.repeat(253);
    expect(serviceWiringPolicyName(long).length).toBeLessThanOrEqual(253);
    const p = policy('a', '2026-01-01T00:00:00Z');
    const one = targetPolicyName(long, p, { kind: 'HTTPRoute', namespace: 'shop', name: 'r1' });
    const two = targetPolicyName(long, p, { kind: 'Gateway', namespace: 'shop', name: 'r1' });
    expect(one.length).toBeLessThanOrEqual(253);
    expect(one).not.toBe(two);
    expect(one).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
  });
});

describe('patchState', () => {
  const epp = (
    conditions: NonNullable<
      NonNullable<NonNullable<EnvoyPatchPolicyObject['status']>['ancestors']>[number]['conditions']
    >,
  ): EnvoyPatchPolicyObject => ({
    metadata: { namespace: 'envoy-gateway-system', name: 'portico-ratelimit', generation: 2 },
    status: { ancestors: [{ ancestorRef: { name: 'portico', kind: 'Gateway' }, conditions }] },
  });
  it('is pending while no condition is of the current generation', () => {
    expect(
      patchState(epp([{ type: 'Programmed', status: 'True', observedGeneration: 1 }]), 'portico'),
    ).toEqual({ state: 'pending' });
    expect(patchState({ metadata: { namespace: 'a', name: 'b', generation: 1 } }, 'portico')).toEqual({
      state: 'pending',
    });
  });
  it('is programmed on Programmed=True of the current generation', () => {
    expect(
      patchState(
        epp([
          { type: 'Accepted', status: 'True', observedGeneration: 2 },
          {
            type: 'Programmed',
            status: 'True',
            observedGeneration: 2,
            message: 'Patches have been successfully applied.',
          },
        ]),
        'portico',
      ),
    ).toEqual({ state: 'programmed', message: 'Patches have been successfully applied.' });
  });
  it("is refused with Envoy Gateway's reason and message on Programmed or Accepted False", () => {
    expect(
      patchState(
        epp([
          { type: 'Accepted', status: 'True', observedGeneration: 2 },
          {
            type: 'Programmed',
            status: 'False',
            observedGeneration: 2,
            reason: 'Invalid',
            message: 'No jsonPointers were found',
          },
        ]),
        'portico',
      ),
    ).toEqual({ state: 'refused', reason: 'Invalid', message: 'No jsonPointers were found' });
    expect(
      patchState(
        epp([
          { type: 'Accepted', status: 'False', observedGeneration: 2, reason: 'Disabled', message: 'off' },
        ]),
        'portico',
      ),
    ).toMatchObject({ state: 'refused', reason: 'Disabled' });
  });
  it("reads only the named Gateway's ancestor", () => {
    expect(patchState(epp([{ type: 'Programmed', status: 'True', observedGeneration: 2 }]), 'other')).toEqual(
      { state: 'pending' },
    );
  });
});

describe('attachedCondition with pending verdicts', () => {
  const ref = { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r' };
  const pending: TargetVerdict = {
    ref,
    wired: false,
    pending: true,
    reason: 'AwaitingEnvoyGateway',
    message: 'waiting',
  };
  it('is Unknown when every unwired target is pending', () => {
    expect(attachedCondition([pending])).toMatchObject({ status: 'Unknown', reason: 'AwaitingEnvoyGateway' });
  });
  it('is False with the blocking reason when another target fails', () => {
    const refused: TargetVerdict = {
      ref: { ...ref, name: 's' },
      wired: false,
      reason: 'RefusedByEnvoyGateway',
      message: 'no',
    };
    expect(attachedCondition([pending, refused])).toMatchObject({
      status: 'False',
      reason: 'RefusedByEnvoyGateway',
    });
  });
});
