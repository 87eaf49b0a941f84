/**
 * The `contour` flavor of ingress mode: one Contour HTTPProxy (`projectcontour.io/v1`) per domain,
 * named like the Ingress would be (`portico-<name>`), instead of an Ingress. Pure.
 *
 * Sources (github.com/projectcontour/contour v1.33.8):
 * - apis/projectcontour/v1/httpproxy.go: `spec.virtualhost.fqdn`, `spec.virtualhost.tls.secretName`,
 *   `spec.routes[]` with `conditions: [{prefix}]`, `services: [{name, port}]` (`port` is an integer,
 *   never a port name), `permitInsecure` ("Allow this path to respond to insecure requests over HTTP
 *   which are normally not permitted when a `virtualhost.tls` block is present"), and
 *   `requestRedirectPolicy: {scheme, hostname, port, statusCode, path, prefix}`, whose `statusCode` is
 *   the CRD enum `RedirectResponseCode`: 301, 302, 303, 307, 308 (default 302, so Portico always
 *   writes it). `spec.ingressClassName`: the class of the Contour that should take it.
 * - internal/dag/httpproxy_processor.go `computeHTTPProxy`: a `virtualhost.tls.secretName` whose
 *   Secret is missing or does not hold a parsable `tls.crt` and `tls.key` (cache.go
 *   `LookupTLSSecretInsecure`, secret.go `validTLSSecret`) adds the error `TLSError`, reason
 *   `SecretNotValid` ("Spec.VirtualHost.TLS Secret %q is invalid: Secret not found") and returns: the
 *   whole HTTPProxy is invalid and none of its routes is programmed, the challenge route on port 80
 *   included. So the TLS block is written only once the Secret holds a certificate (`tls` below).
 * - same file, `routeEnforceTLS`: on a virtual host with TLS, a route without `permitInsecure`
 *   answers plain HTTP with a redirect to HTTPS. The challenge route (RFC 8555 §8.3: the CA connects
 *   on port 80) and the redirect route (so that `http://old/...` goes straight to `https://target/...`,
 *   one hop) set `permitInsecure: true`.
 * - same file, `routeActionCountValid`: a route has exactly one of `services`,
 *   `requestRedirectPolicy`, `directResponsePolicy`. `redirectRoutePolicy` and
 *   internal/envoy/v3/route.go `routeRedirect`: the policy becomes Envoy's `RedirectAction` with
 *   `host_redirect`, `scheme_redirect` and the response code; with no `path` or `prefix` no path
 *   rewrite is set, and `strip_query` stays false, so Envoy keeps the request's path and query
 *   (envoy/config/route/v3 `RedirectAction`). All four statuses Portico offers are exact.
 * - same file, `validHTTPProxies`: two HTTPProxies with the same fqdn are both invalid
 *   (`DuplicateVhost`, "fqdn %q is used in multiple HTTPProxies: ns/a, ns/b"), so nothing serves the
 *   hostname until one goes; the acknowledgement reports it (acknowledgement.ts).
 * - internal/dag/accessors.go `validateExternalName`: an ExternalName Service (the challenge Service)
 *   is refused unless Contour runs with `enableExternalNameService: true` in its configuration file;
 *   the route's error (`ServiceError`, `ServiceUnresolvedReference`) then makes the HTTPProxy invalid.
 *
 * Longest prefix wins in Envoy's route table as Contour sorts it (internal/sorter), so the challenge
 * route takes `/.well-known/acme-challenge/` before `/` redirects or proxies it.
 */
import type { KubernetesObject, V1ObjectMeta } from '@kubernetes/client-node';
import type { RedirectIntent, RedirectStatus } from '../../routing/redirect.js';

export const CONTOUR_GROUP = 'projectcontour.io';
export const CONTOUR_API_VERSION = 'projectcontour.io/v1';
export const HTTPPROXY_KIND = 'HTTPProxy';
export const HTTPPROXY_PLURAL = 'httpproxies';

export interface HTTPProxyService {
  name: string;
  /** A port number of the Service (1-65535); HTTPProxy has no port names. */
  port: number;
}

export interface HTTPProxyRoute {
  conditions: { prefix: string }[];
  services?: HTTPProxyService[];
  /** Answer this route over plain HTTP too, on a virtual host with TLS. */
  permitInsecure?: boolean;
  requestRedirectPolicy?: { scheme: 'https'; hostname: string; statusCode: RedirectStatus };
}

export interface HTTPProxy extends KubernetesObject {
  apiVersion: typeof CONTOUR_API_VERSION;
  kind: typeof HTTPPROXY_KIND;
  metadata: V1ObjectMeta;
  spec: {
    ingressClassName?: string;
    virtualhost: { fqdn: string; tls?: { secretName: string } };
    routes: HTTPProxyRoute[];
  };
}

/**
 * A route that sends `prefix` to `service`. `permitInsecure`: answered over plain HTTP as well (the
 * challenge route), not redirected to HTTPS.
 */
export function serviceRoute(
  prefix: string,
  service: HTTPProxyService,
  permitInsecure = false,
): HTTPProxyRoute {
  return {
    conditions: [{ prefix }],
    services: [{ name: service.name, port: service.port }],
    ...(permitInsecure ? { permitInsecure: true } : {}),
  };
}

/**
 * The route that answers `/` with the redirect: `https://<to>`, the request's path and query kept,
 * the status asked for. `permitInsecure`, so plain HTTP gets the same single redirect.
 */
export function redirectRoute(intent: RedirectIntent): HTTPProxyRoute {
  return {
    conditions: [{ prefix: '/' }],
    permitInsecure: true,
    requestRedirectPolicy: { scheme: 'https', hostname: intent.to, statusCode: intent.status },
  };
}

/**
 * The HTTPProxy for `fqdn` with `routes`. `tlsSecretName`: the domain's TLS Secret, set only once
 * it holds a certificate (see the module's docstring); undefined writes no TLS block.
 */
export function httpProxy(
  metadata: V1ObjectMeta,
  fqdn: string,
  routes: HTTPProxyRoute[],
  options: { tlsSecretName?: string; ingressClassName?: string } = {},
): HTTPProxy {
  const { tlsSecretName, ingressClassName } = options;
  return {
    apiVersion: CONTOUR_API_VERSION,
    kind: HTTPPROXY_KIND,
    metadata,
    spec: {
      ...(ingressClassName ? { ingressClassName } : {}),
      virtualhost: { fqdn, ...(tlsSecretName ? { tls: { secretName: tlsSecretName } } : {}) },
      routes,
    },
  };
}
