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
 * TLS: an HTTPRoute carries none. The Gateway's HTTPS listener terminates TLS with the certificates it
 * references; for a per-domain Secret that is the platform's Gateway configuration (a listener per
 * domain, or a ListenerSet), which Portico does not write (docs/routing.md).
 */
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import type { GatewayParentRef } from './options.js';
import { targetOrigin, type RedirectIntent } from './redirect.js';

export const GATEWAY_API_VERSION = 'gateway.networking.k8s.io/v1';
export const HTTPROUTE_KIND = 'HTTPRoute';

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
  spec: { parentRefs: GatewayParentRef[]; hostnames: string[]; rules: HTTPRouteRule[] };
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
  parentRefs: GatewayParentRef[],
  rules: HTTPRouteRule[],
): HTTPRoute {
  return {
    apiVersion: GATEWAY_API_VERSION,
    kind: HTTPROUTE_KIND,
    metadata,
    spec: { parentRefs: parentRefs.map((ref) => ({ ...ref })), hostnames: [hostname], rules },
  };
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
