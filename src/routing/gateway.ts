/**
 * Gateway API mode: one HTTPRoute (gateway.networking.k8s.io/v1) per domain, named like the Ingress,
 * attached to the platform's Gateway. Pure.
 *
 * Sources (kubernetes-sigs/gateway-api, apis/v1/httproute_types.go and the standard-channel CRD):
 * - `HTTPRequestRedirectFilter`: `hostname` replaces the host (Core), `scheme` (Extended), `statusCode`
 *   (301 and 302 Core; 303, 307 and 308 Extended, in the CRD enum from v1.5 on, v1.4.0 has 301 and 302 only; default 302, so Portico
 *   always writes it). `path` left empty means "the request path is used as-is"; the guide
 *   (site-src/guides/http-redirect-rewrite.md) adds that redirects change only the configured URL
 *   components and keep the others, query included. A Gateway that does not support a status sets the
 *   route's Accepted condition to False with reason UnsupportedValue.
 * - Port: when `scheme` is set and `port` is not, the redirect uses the scheme's well-known port and
 *   SHOULD NOT write 443 into Location for https.
 * - The CRD's CEL rules: a rule with a RequestRedirect filter must not have backendRefs; a Service
 *   backendRef must have a port number (a BackendRef port is a number, never a name).
 * - Rule precedence ("HTTPRouteRule"): the longest matching path prefix wins, so the rule for
 *   `/.well-known/acme-challenge/` takes the CA's request before the `/` rule redirects it.
 *
 * TLS: an HTTPRoute carries none. Each domain's certificate is attached to the platform's Gateway
 * with a ListenerSet (gateway.networking.k8s.io/v1, standard channel from Gateway API v1.5;
 * apis/v1/listenerset_types.go, GEP-1713) in the domain's namespace, next to its Secret: one HTTPS
 * listener for the hostname whose `tls.certificateRefs` name the Secret. A listener of a ListenerSet
 * may reference a Secret of its own namespace without a ReferenceGrant. A route attached to the
 * Gateway does not attach to the listeners of its ListenerSets (GEP-1713, "Gateway Parents and
 * sectionName"), so the HTTPRoute names the ListenerSet as a parent too. The Gateway must allow the
 * domain's namespace in `spec.allowedListeners` (docs/routing.md).
 */
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import type { GatewayParentRef } from './options.js';
import { targetOrigin, type RedirectIntent } from './redirect.js';

export const GATEWAY_API_GROUP = 'gateway.networking.k8s.io';
export const GATEWAY_API_VERSION = 'gateway.networking.k8s.io/v1';
export const HTTPROUTE_KIND = 'HTTPRoute';
export const LISTENERSET_KIND = 'ListenerSet';
/** The name of the one listener of every ListenerSet Portico writes (`sectionName` for a route). */
export const HTTPS_LISTENER_NAME = 'https';
/** The port of that listener unless configured (`RoutingOptions.gatewayHttpsPort`). */
export const DEFAULT_GATEWAY_HTTPS_PORT = 443;

/**
 * A `parentRefs` entry of an HTTPRoute (Gateway API `ParentReference`): a Gateway (group and kind
 * omitted, their defaults) or a ListenerSet (both set).
 */
export interface RouteParentRef extends GatewayParentRef {
  group?: typeof GATEWAY_API_GROUP;
  kind?: 'Gateway' | typeof LISTENERSET_KIND;
}

export interface HTTPRouteBackendRef {
  name: string;
  port: number;
}

export interface HTTPRouteRule {
  matches: { path: { type: 'PathPrefix'; value: string } }[];
  filters?: {
    type: 'RequestRedirect';
    requestRedirect: { scheme: 'https'; hostname: string; statusCode: number };
  }[];
  backendRefs?: HTTPRouteBackendRef[];
}

export interface HTTPRoute extends KubernetesObject {
  apiVersion: typeof GATEWAY_API_VERSION;
  kind: typeof HTTPROUTE_KIND;
  metadata: V1ObjectMeta;
  spec: { parentRefs: RouteParentRef[]; hostnames: string[]; rules: HTTPRouteRule[] };
}

/** A ListenerSet's listener as Portico writes it: HTTPS for one hostname, TLS from one Secret. */
export interface HttpsListenerEntry {
  name: typeof HTTPS_LISTENER_NAME;
  hostname: string;
  port: number;
  protocol: 'HTTPS';
  tls: { mode: 'Terminate'; certificateRefs: { group: ''; kind: 'Secret'; name: string }[] };
  /**
   * Which routes may attach (Gateway API `AllowedRoutes`); absent: the default, routes of the
   * ListenerSet's own namespace.
   */
  allowedRoutes?: { namespaces: ListenerNamespaces };
}

/**
 * `AllowedRoutes.namespaces` of a listener (apis/v1/gateway_types.go `RouteNamespaces`): `Same` (the
 * ListenerSet's namespace), or `Selector` with a label selector on the routes' Namespaces.
 */
export type ListenerNamespaces =
  | { from: 'Same' }
  | {
      from: 'Selector';
      selector: { matchExpressions: { key: string; operator: 'In'; values: string[] }[] };
    };

export interface ListenerSet extends KubernetesObject {
  apiVersion: typeof GATEWAY_API_VERSION;
  kind: typeof LISTENERSET_KIND;
  metadata: V1ObjectMeta;
  spec: {
    /** The Gateway (`ParentGatewayReference`); namespace omitted: the ListenerSet's own. */
    parentRef: { group: typeof GATEWAY_API_GROUP; kind: 'Gateway'; name: string; namespace?: string };
    listeners: HttpsListenerEntry[];
  };
}

function prefix(value: string): HTTPRouteRule['matches'] {
  return [{ path: { type: 'PathPrefix', value } }];
}

/** A rule that sends `pathPrefix` to a Service of the route's namespace. */
export function forwardRule(pathPrefix: string, backend: HTTPRouteBackendRef): HTTPRouteRule {
  return { matches: prefix(pathPrefix), backendRefs: [backend] };
}

/** A rule that answers `/` with the redirect: https, the target host, the status; path and query kept. */
export function redirectRule(intent: RedirectIntent): HTTPRouteRule {
  return {
    matches: prefix('/'),
    filters: [
      {
        type: 'RequestRedirect',
        requestRedirect: { scheme: 'https', hostname: intent.to, statusCode: intent.status },
      },
    ],
  };
}

/** The HTTPRoute for `hostname` with `rules`, attached to `parentRefs`. */
export function httpRoute(
  metadata: V1ObjectMeta,
  hostname: string,
  parentRefs: RouteParentRef[],
  rules: HTTPRouteRule[],
): HTTPRoute {
  return {
    apiVersion: GATEWAY_API_VERSION,
    kind: HTTPROUTE_KIND,
    metadata,
    spec: { parentRefs: parentRefs.map((ref) => ({ ...ref })), hostnames: [hostname], rules },
  };
}

/**
 * The ListenerSet that attaches `secretName`'s certificate to `gateway` for `hostname`: one HTTPS
 * listener on `port`, TLS terminated with that Secret (of the ListenerSet's namespace, so no
 * ReferenceGrant is needed). The listener's `allowedRoutes` keeps its default, routes of the same
 * namespace.
 */
export function listenerSet(
  metadata: V1ObjectMeta,
  hostname: string,
  gateway: Pick<GatewayParentRef, 'name' | 'namespace'>,
  port: number,
  secretName: string,
): ListenerSet {
  return {
    apiVersion: GATEWAY_API_VERSION,
    kind: LISTENERSET_KIND,
    metadata,
    spec: {
      parentRef: {
        group: GATEWAY_API_GROUP,
        kind: 'Gateway',
        name: gateway.name,
        ...(gateway.namespace === undefined ? {} : { namespace: gateway.namespace }),
      },
      listeners: [
        {
          name: HTTPS_LISTENER_NAME,
          hostname,
          port,
          protocol: 'HTTPS',
          tls: { mode: 'Terminate', certificateRefs: [{ group: '', kind: 'Secret', name: secretName }] },
        },
      ],
    },
  };
}

/** The HTTPRoute parentRef of the ListenerSet `name` of the route's own namespace (every listener). */
export function listenerSetParentRef(name: string): RouteParentRef {
  return { group: GATEWAY_API_GROUP, kind: LISTENERSET_KIND, name };
}

/** What the Routed condition says about a redirect in gateway mode. */
export function gatewayRedirectSummary(intent: RedirectIntent): { caveats: string[] } {
  if (intent.status === 301 || intent.status === 302) return { caveats: [] };
  return {
    caveats: [
      `status ${intent.status} is Extended support in Gateway API (CRDs v1.5 or later): a Gateway that lacks it ` +
        `is expected to mark the HTTPRoute Accepted=False (UnsupportedValue) instead of redirecting to ${targetOrigin(intent)}`,
    ],
  };
}
