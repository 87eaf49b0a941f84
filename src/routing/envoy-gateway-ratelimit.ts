/**
 * The EnvoyPatchPolicy (gateway.envoyproxy.io/v1alpha1, `type: JSONPatch`) that wires Portico's
 * rate-limit service into what Envoy Gateway generates for one Gateway (docs/routing.md, "Envoy
 * Gateway"): Envoy Gateway's own global rate limiting runs envoyproxy/ratelimit and cannot call
 * another service, so the filter, its cluster and the routes' descriptors are patched into its xDS.
 * Pure: what the patch says; who applies it is the caller's.
 *
 * Facts of Envoy Gateway v1.9.1 this rests on (internal/xds/translator/jsonpatch.go, listener.go):
 * - an `add` with an empty `path` and no `jsonPath` adds its value as a whole new resource (the
 *   cluster); `path` must be present all the same, or the patch is refused ("A patch operation must
 *   specify a path or jsonPath.");
 * - `jsonPath` (RFC 9535) selects inside the named resource, and `path` is appended to each pointer it
 *   finds; the resource is read in proto field names (protojson `UseProtoNames`); a `jsonPath` that
 *   finds nothing is an error of the policy;
 * - with the runtime flag `XDSNameSchemeV2` the Envoy listener of a port is `tcp-<port>` (its external
 *   port), whatever Gateway API listeners share it; without it, it is named after the first of them;
 * - the policy must be in its target Gateway's namespace, and Envoy Gateway applies it only when its
 *   configuration sets `extensionApis.enableEnvoyPatchPolicy: true`.
 */
import { DEFAULT_GATEWAY_DOMAIN, type RateLimitPolicy } from '../api/ratelimitpolicy.js';
import { envoyRateLimits, type RateLimitHeaders } from './ratelimit-descriptors.js';

export const ENVOY_PATCH_POLICY_API_VERSION = 'gateway.envoyproxy.io/v1alpha1';
export const ENVOY_PATCH_POLICY_KIND = 'EnvoyPatchPolicy';
export const ENVOY_PATCH_POLICY_PLURAL = 'envoypatchpolicies';

/** The name of the Envoy cluster the patch adds for the rate-limit service. */
export const RATELIMIT_CLUSTER_NAME = 'portico-ratelimit';
/** Envoy's name of the ratelimit HTTP filter. */
export const RATELIMIT_FILTER_NAME = 'envoy.filters.http.ratelimit';

const TYPE = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  routeConfiguration: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
} as const;

/** Where Envoy finds the rate-limit service, and how it calls it (the controller's flags). */
export interface RateLimitServiceTarget {
  /** The rate-limit server's Service: name, namespace, gRPC port. */
  readonly serviceName: string;
  readonly serviceNamespace: string;
  readonly servicePort: number;
  /** The cluster's DNS domain, e.g. `cluster.local`: the Service is `<name>.<namespace>.svc.<domain>`. */
  readonly clusterDomain: string;
  /** How long Envoy waits for an answer, milliseconds (the filter's `timeout`). */
  readonly timeoutMs: number;
  readonly headers: RateLimitHeaders;
}

/** One HTTPRoute a policy targets, and the Envoy route configurations its rules land in. */
export interface TargetedRoute {
  readonly policy: RateLimitPolicy;
  readonly httpRoute: { readonly namespace: string; readonly name: string };
  /** Names of the RouteConfigurations holding its routes (see docs/routing.md for how they are named). */
  readonly routeConfigurations: readonly string[];
}

/** The wiring of one Gateway. */
export interface GatewayRateLimitWiring {
  readonly gateway: { readonly namespace: string; readonly name: string };
  /** The Gateway's HTTP and HTTPS ports (Envoy listeners `tcp-<port>` get the filter). */
  readonly ports: readonly number[];
  readonly routes: readonly TargetedRoute[];
  readonly service: RateLimitServiceTarget;
  /** The policy's name; default `portico-ratelimit`. */
  readonly name?: string;
}

/** Milliseconds as a protobuf JSON Duration (`1.5s`). */
function duration(ms: number): string {
  return `${ms / 1000}s`;
}

/** The ratelimit HTTP filter (envoy.extensions.filters.http.ratelimit.v3.RateLimit), as for Contour. */
export function rateLimitFilter(service: RateLimitServiceTarget): Record<string, unknown> {
  return {
    name: RATELIMIT_FILTER_NAME,
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
      // The one domain the server's --gateway-domain expects; each descriptor names its policy.
      domain: DEFAULT_GATEWAY_DOMAIN,
      // Fail open, as Contour's `rateLimitService.failOpen: true`: the server's own failure mode
      // answers first (its timeout is below this one).
      failure_mode_deny: false,
      timeout: duration(service.timeoutMs),
      rate_limit_service: {
        grpc_service: { envoy_grpc: { cluster_name: RATELIMIT_CLUSTER_NAME } },
        transport_api_version: 'V3',
      },
    },
  };
}

/** The cluster of the rate-limit service: the Service's DNS name, plaintext HTTP/2 (gRPC). */
export function rateLimitCluster(service: RateLimitServiceTarget): Record<string, unknown> {
  return {
    name: RATELIMIT_CLUSTER_NAME,
    type: 'STRICT_DNS',
    connect_timeout: duration(Math.max(service.timeoutMs, 250)),
    load_assignment: {
      cluster_name: RATELIMIT_CLUSTER_NAME,
      endpoints: [
        {
          lb_endpoints: [
            {
              endpoint: {
                address: {
                  socket_address: {
                    address: `${service.serviceName}.${service.serviceNamespace}.svc.${service.clusterDomain}`,
                    port_value: service.servicePort,
                  },
                },
              },
            },
          ],
        },
      ],
    },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
  };
}

/** One operation of an EnvoyPatchPolicy's `spec.jsonPatches` (type, resource name, operation). */
export type JSONPatch = Record<string, unknown>;

/** Envoy's name of the router filter, the last of every HTTP filter chain (Envoy Gateway's too). */
export const ROUTER_FILTER_NAME = 'envoy.filters.http.router';

/**
 * Where the ratelimit filter goes in an HTTP connection manager's `http_filters`: just before the
 * router, so after every filter Envoy Gateway puts ahead of it, authentication included. Envoy
 * Gateway v1.9 orders its filters itself (internal/xds/translator/httpfilters.go): the
 * SecurityPolicy's `envoy.filters.http.ext_authz`, `api_key_auth`, `basic_auth`, `oauth2` and
 * `jwt_authn` (each named `<filter>/securitypolicy/...`) all come before the router, so the filter
 * sees the headers they set (a JWT's `claimToHeaders`, the API key's `forwardClientIDHeader`) and
 * never runs for a request they refused (docs/ratelimits.md, "Identity: where the key id and plan
 * come from"). Whatever auth filter a later version adds, the router stays last.
 *
 * A JSONPath that finds the router element with no `path` makes the patch's pointer the router's own
 * index (`.../http_filters/<n>`), and a JSON Patch `add` at an array index inserts before it
 * (RFC 6902, section 4.1).
 */
export const BEFORE_ROUTER_JSON_PATH = `$..http_filters[?(@.name == '${ROUTER_FILTER_NAME}')]`;

/**
 * The patches every wired Gateway needs once, whatever policy: the rate-limit service's cluster
 * added whole, and the ratelimit filter just before the router (so after authentication:
 * {@link BEFORE_ROUTER_JSON_PATH}) in every HTTP connection manager of the Envoy listeners
 * `tcp-<port>` of `ports`.
 *
 * @throws RangeError for no ports
 */
export function serviceWiringPatches(service: RateLimitServiceTarget, ports: readonly number[]): JSONPatch[] {
  if (ports.length === 0) throw new RangeError('the Gateway has no ports to wire');
  const patches: JSONPatch[] = [
    {
      type: TYPE.cluster,
      name: RATELIMIT_CLUSTER_NAME,
      // An empty path (it must be present: ir.JSONPatchOperation.Validate) adds the value whole.
      operation: { op: 'add', path: '', value: rateLimitCluster(service) },
    },
  ];
  for (const port of [...new Set(ports)].sort((a, b) => a - b)) {
    patches.push({
      type: TYPE.listener,
      name: `tcp-${port}`,
      operation: { op: 'add', jsonPath: BEFORE_ROUTER_JSON_PATH, value: rateLimitFilter(service) },
    });
  }
  return patches;
}

/**
 * The route-level `rate_limits` of one HTTPRoute in one route configuration: on each of its routes
 * (Envoy Gateway names them `httproute/<namespace>/<name>/rule/...`). Route-level `rate_limits`
 * replace the virtual host's for that route (Envoy's `RouteAction.rate_limits`; `vh_rate_limits`
 * left at its default, OVERRIDE), which is how an HTTPRoute's policy wins over its Gateway's.
 * Envoy Gateway refuses it (`Programmed=False`, Invalid) when no route of the HTTPRoute is there.
 */
export function routeRateLimitsPatch(
  routeConfiguration: string,
  httpRoute: { readonly namespace: string; readonly name: string },
  rateLimits: readonly unknown[],
): JSONPatch {
  const prefix = `httproute/${httpRoute.namespace}/${httpRoute.name}/rule/`;
  return {
    type: TYPE.routeConfiguration,
    name: routeConfiguration,
    operation: {
      op: 'add',
      // Kubernetes names have no quote or backslash; `.` is the one regex metacharacter they may hold.
      jsonPath: `$.virtual_hosts[*].routes[?(@.name =~ '^${prefix.replaceAll('.', '[.]')}')].route`,
      path: '/rate_limits',
      value: rateLimits,
    },
  };
}

/**
 * The virtual-host-level `rate_limits` of every virtual host of one route configuration (Envoy's
 * `VirtualHost.rate_limits`): they apply to each route of the virtual host that has no
 * `rate_limits` of its own. Envoy Gateway refuses it when the route configuration has no virtual
 * host (a listener no route is attached to).
 */
export function virtualHostRateLimitsPatch(
  routeConfiguration: string,
  rateLimits: readonly unknown[],
): JSONPatch {
  return {
    type: TYPE.routeConfiguration,
    name: routeConfiguration,
    operation: { op: 'add', jsonPath: '$.virtual_hosts[*]', path: '/rate_limits', value: rateLimits },
  };
}

/** An EnvoyPatchPolicy of `type: JSONPatch` targeting `gateway`, in its namespace (Envoy Gateway's rule). */
export function envoyPatchPolicy(
  name: string,
  gateway: { readonly namespace: string; readonly name: string },
  patches: readonly JSONPatch[],
): Record<string, unknown> {
  return {
    apiVersion: ENVOY_PATCH_POLICY_API_VERSION,
    kind: ENVOY_PATCH_POLICY_KIND,
    metadata: { name, namespace: gateway.namespace },
    spec: {
      type: 'JSONPatch',
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: gateway.name },
      jsonPatches: patches,
    },
  };
}

/**
 * The whole wiring of one Gateway in one EnvoyPatchPolicy: `serviceWiringPatches` and, for each
 * targeted HTTPRoute, `routeRateLimitsPatch` in each of its route configurations. (The operator
 * splits the same patches over several EnvoyPatchPolicies: controllers/ratelimitpolicy/
 * envoy-gateway-attachment.ts.)
 *
 * @throws RangeError for a Gateway without ports, or a targeted route without route configurations
 */
export function envoyGatewayRateLimitPatch(wiring: GatewayRateLimitWiring): Record<string, unknown> {
  const patches = serviceWiringPatches(wiring.service, wiring.ports);
  for (const route of wiring.routes) {
    if (route.routeConfigurations.length === 0)
      throw new RangeError(
        `HTTPRoute ${route.httpRoute.namespace}/${route.httpRoute.name}: no route configuration to wire`,
      );
    const rateLimits = envoyRateLimits(route.policy, wiring.service.headers);
    for (const rc of route.routeConfigurations)
      patches.push(routeRateLimitsPatch(rc, route.httpRoute, rateLimits));
  }
  return envoyPatchPolicy(wiring.name ?? RATELIMIT_CLUSTER_NAME, wiring.gateway, patches);
}
