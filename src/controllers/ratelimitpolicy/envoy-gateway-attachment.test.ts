import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { attachedCondition, type TargetVerdict } from './attachment.js';
import {
  POLICIES_ANNOTATION,
  entryPolicy,
  gatewayPatchPolicy,
  isEnvoyGatewayTarget,
  parseEntries,
  patchState,
  placements,
  policyEntry,
  routeOwners,
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
  it('is true for a Gateway API HTTPRoute only', () => {
    expect(isEnvoyGatewayTarget({ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'a' })).toBe(
      true,
    );
    expect(isEnvoyGatewayTarget({ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'a' })).toBe(
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

describe('routeOwners and gatewayPatchPolicy', () => {
  const placement = {
    gateway: 'envoy-gateway-system/portico',
    ports: [80],
    routeConfigurations: ['http-80'],
  };
  it('gives an HTTPRoute several policies target to the oldest', () => {
    const old = policy('old', '2026-01-01T00:00:00Z');
    const young = policy('young', '2026-02-01T00:00:00Z');
    const r = { namespace: 'shop', name: 'portico-www' };
    expect(
      routeOwners([
        { policy: young, route: r, placement },
        { policy: old, route: r, placement },
      ]).get('shop/portico-www'),
    ).toBe(old);
  });

  it("labels the Gateway's EnvoyPatchPolicy as Portico's and names each policy generation it carries", () => {
    const body = gatewayPatchPolicy(
      { namespace: 'envoy-gateway-system', name: 'portico' },
      [
        {
          policy: policy('b', '2026-01-01T00:00:00Z', 3),
          route: { namespace: 'shop', name: 'r2' },
          placement,
        },
        {
          policy: policy('a', '2026-01-01T00:00:00Z', 2),
          route: { namespace: 'shop', name: 'r1' },
          placement,
        },
      ],
      service,
    ) as {
      metadata: { name: string; namespace: string; labels: object; annotations: Record<string, string> };
    };
    expect(body.metadata).toMatchObject({
      name: 'portico-ratelimit',
      namespace: 'envoy-gateway-system',
      labels: { 'app.kubernetes.io/managed-by': 'portico' },
    });
    const entries = parseEntries(body.metadata.annotations[POLICIES_ANNOTATION]);
    expect(entries).toEqual(['shop/a@2', 'shop/b@3']);
    expect(entries.map(entryPolicy)).toEqual(['shop/a', 'shop/b']);
    expect(policyEntry(policy('a', '2026-01-01T00:00:00Z', 2))).toBe('shop/a@2');
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
