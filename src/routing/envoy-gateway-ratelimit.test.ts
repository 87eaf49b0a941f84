import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy } from '../api/ratelimitpolicy.js';
import {
  RATELIMIT_CLUSTER_NAME,
  envoyGatewayRateLimitPatch,
  rateLimitCluster,
  rateLimitFilter,
  type GatewayRateLimitWiring,
} from './envoy-gateway-ratelimit.js';
import { envoyRateLimits } from './ratelimit-descriptors.js';

const policy = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { namespace: 'shop', name: 'public-api' },
  spec: { plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }], defaultPlan: 'free' },
} as RateLimitPolicy;

const service = {
  serviceName: 'portico-ratelimit',
  serviceNamespace: 'portico-system',
  servicePort: 8081,
  clusterDomain: 'cluster.local',
  timeoutMs: 250,
  headers: { keyId: 'x-api-key-id', plan: 'x-api-plan' },
};

const wiring: GatewayRateLimitWiring = {
  gateway: { namespace: 'edge', name: 'public' },
  ports: [443, 80, 443],
  routes: [
    {
      policy,
      httpRoute: { namespace: 'shop', name: 'portico-www.v2' },
      routeConfigurations: ['http-80', 'edge/public/shop/portico-www/https'],
    },
  ],
  service,
};

describe('envoyGatewayRateLimitPatch', () => {
  it("lives in the Gateway's namespace and targets it, as Envoy Gateway requires", () => {
    const epp = envoyGatewayRateLimitPatch(wiring);
    expect(epp).toMatchObject({
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'EnvoyPatchPolicy',
      metadata: { name: 'portico-ratelimit', namespace: 'edge' },
      spec: {
        type: 'JSONPatch',
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'public' },
      },
    });
  });

  it('adds the cluster whole, the filter just before the router (after authentication) in each HTTP connection manager of tcp-<port> (each port once), and the descriptors on the routes of the HTTPRoute', () => {
    const patches = (envoyGatewayRateLimitPatch(wiring).spec as { jsonPatches: Record<string, unknown>[] })
      .jsonPatches;
    expect(patches[0]).toEqual({
      type: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
      name: RATELIMIT_CLUSTER_NAME,
      operation: { op: 'add', path: '', value: rateLimitCluster(service) },
    });
    expect(patches.slice(1, 3)).toEqual(
      [80, 443].map((port) => ({
        type: 'type.googleapis.com/envoy.config.listener.v3.Listener',
        name: `tcp-${port}`,
        operation: {
          op: 'add',
          jsonPath: "$..http_filters[?(@.name == 'envoy.filters.http.router')]",
          value: rateLimitFilter(service),
        },
      })),
    );
    expect(patches.slice(3)).toEqual(
      ['http-80', 'edge/public/shop/portico-www/https'].map((name) => ({
        type: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
        name,
        operation: {
          op: 'add',
          // The dot of the name matched as itself, not as any character.
          jsonPath: "$.virtual_hosts[*].routes[?(@.name =~ '^httproute/shop/portico-www[.]v2/rule/')].route",
          path: '/rate_limits',
          value: envoyRateLimits(policy, service.headers),
        },
      })),
    );
  });

  it("configures the filter as Contour's wiring does: the gateway domain, failing open, the timeout, the cluster over gRPC v3", () => {
    expect(rateLimitFilter(service)).toEqual({
      name: 'envoy.filters.http.ratelimit',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
        domain: 'portico-gateway',
        failure_mode_deny: false,
        timeout: '0.25s',
        rate_limit_service: {
          grpc_service: { envoy_grpc: { cluster_name: 'portico-ratelimit' } },
          transport_api_version: 'V3',
        },
      },
    });
    expect(JSON.stringify(rateLimitCluster(service))).toContain(
      '"address":"portico-ratelimit.portico-system.svc.cluster.local","port_value":8081',
    );
  });

  it('refuses a Gateway without ports and a route without route configurations', () => {
    expect(() => envoyGatewayRateLimitPatch({ ...wiring, ports: [] })).toThrow(/no ports/);
    expect(() =>
      envoyGatewayRateLimitPatch({
        ...wiring,
        routes: [{ policy, httpRoute: { namespace: 'shop', name: 'x' }, routeConfigurations: [] }],
      }),
    ).toThrow('HTTPRoute shop/x: no route configuration to wire');
  });
});
