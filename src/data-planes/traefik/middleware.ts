/**
 * The Traefik flavor of a redirect: a `traefik.io/v1alpha1` Middleware with `redirectRegex`, referenced
 * from the domain's Ingress by the `traefik.ingress.kubernetes.io/router.middlewares` annotation. Pure.
 *
 * Sources (github.com/traefik/traefik/v3, v3.7):
 * - docs/content/reference/routing-configuration/http/middlewares/redirectregex.md: `regex` is matched
 *   against the request URL, `replacement` builds the target, `permanent` chooses a permanent redirect.
 * - pkg/middlewares/redirect/redirect_regex.go: the URL matched is `scheme://host[:port]` followed by
 *   the raw request URI, which is path and query as sent, so `^https?://[^/]+(.*)$` → `https://to${1}`
 *   keeps both.
 * - pkg/middlewares/redirect/redirect.go (`moveHandler`): the status is not configurable through the
 *   CRD. `permanent: false` answers 302 to GET and 307 to any other method; `permanent: true` answers
 *   301 to GET and 308 to any other method (HEAD included). So Traefik keeps permanence and never lets
 *   a non-GET client change its method, but cannot send 308 or 307 to a GET, nor 301 or 302 to a POST.
 *   Portico maps 301/308 to `permanent: true` and 302/307 to `permanent: false` and says in the Routed
 *   condition which statuses Traefik will actually send (RFC 9110 §15.4: for GET, 301 ≡ 308 and
 *   302 ≡ 307 in meaning).
 * - docs/content/reference/routing-configuration/kubernetes/ingress.md: the annotation value is
 *   `<middleware>@kubernetescrd`; the Kubernetes CRD provider names a Middleware
 *   `<namespace>-<name>` normalized (every run of characters other than letters and digits becomes one
 *   `-`, pkg/provider/configuration.go `Normalize`), or `<namespace>_<name>` with the provider's
 *   `safeNaming` (pkg/provider/kubernetes/crd/name_builder.go, v3.7.11+).
 * - pkg/provider/kubernetes/ingress/kubernetes.go (v3.6.12): an Ingress path whose Service is missing
 *   (`service not found`), or whose Service yields no server (no ready endpoint, unless the provider's
 *   `allowEmptyServices`: `Skipping service: no endpoints found`), gets no router at all, so its
 *   redirect would not run and the hostname would answer 404. `loadService` makes a server of the
 *   Service's cluster IP and port, without reading endpoints, when the Service carries the annotation
 *   `traefik.ingress.kubernetes.io/service.nativelb: "true"` (annotations.go `ServiceIng.NativeLB`;
 *   `getNativeServiceAddress` refuses only a headless Service). So every redirect path of this flavor
 *   names `portico-redirect` (`traefikRedirectService`): a ClusterIP Service without a selector or
 *   endpoints, with that annotation. Traefik builds the router and its Middleware answers before
 *   anything is proxied, whatever the project's Service, its endpoints or the provider's
 *   `allowEmptyServices` and `allowExternalNameServices` are.
 */
import type { KubernetesObject, V1ObjectMeta, V1Service } from '@kubernetes/client-node';
import { describeStatus, targetOrigin, type RedirectIntent } from '../../routing/redirect.js';

export const TRAEFIK_API_VERSION = 'traefik.io/v1alpha1';
export const TRAEFIK_MIDDLEWARE_KIND = 'Middleware';
export const TRAEFIK_ROUTER_MIDDLEWARES = 'traefik.ingress.kubernetes.io/router.middlewares';
/** Matches Traefik's raw request URL and captures path and query. */
export const TRAEFIK_REDIRECT_REGEX = '^https?://[^/]+(.*)$';
/** The Service every redirect path of the `traefik` flavor names (`traefikRedirectService`). */
export const TRAEFIK_REDIRECT_SERVICE_NAME = 'portico-redirect';
/** The Service annotation that makes Traefik's Ingress provider use the cluster IP, not endpoints. */
export const TRAEFIK_SERVICE_NATIVE_LB = 'traefik.ingress.kubernetes.io/service.nativelb';
/** The port of `portico-redirect` that redirect paths name. */
export const TRAEFIK_REDIRECT_SERVICE_PORT = 80;

export interface TraefikMiddleware extends KubernetesObject {
  apiVersion: typeof TRAEFIK_API_VERSION;
  kind: typeof TRAEFIK_MIDDLEWARE_KIND;
  metadata: V1ObjectMeta;
  spec: { redirectRegex: { regex: string; replacement: string; permanent: boolean } };
}

/** The redirect Middleware, with `metadata` from the caller (name, namespace, labels, owner). */
export function traefikRedirectMiddleware(intent: RedirectIntent, metadata: V1ObjectMeta): TraefikMiddleware {
  return {
    apiVersion: TRAEFIK_API_VERSION,
    kind: TRAEFIK_MIDDLEWARE_KIND,
    metadata,
    spec: {
      redirectRegex: {
        regex: TRAEFIK_REDIRECT_REGEX,
        replacement: `${targetOrigin(intent)}\${1}`,
        permanent: intent.permanent,
      },
    },
  };
}

/** Traefik's `Normalize`: runs of characters other than letters and digits become one `-`. */
function normalize(name: string): string {
  return name
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean)
    .join('-');
}

/** How an Ingress in `namespace` names the CRD Middleware `name` in the router.middlewares annotation. */
export function traefikMiddlewareReference(namespace: string, name: string, safeNaming: boolean): string {
  const id = safeNaming ? `${namespace}_${name}` : normalize(`${namespace}-${name}`);
  return `${id}@kubernetescrd`;
}

/** The statuses Traefik sends for GET and for other methods, given `permanent`. */
export function traefikStatuses(permanent: boolean): { get: 301 | 302; other: 307 | 308 } {
  return permanent ? { get: 301, other: 308 } : { get: 302, other: 307 };
}

/** What the Routed condition says about the redirect in this flavor: the statuses actually sent. */
export function traefikRedirectSummary(intent: RedirectIntent): { caveats: string[] } {
  const sent = traefikStatuses(intent.permanent);
  const notFor = intent.status === sent.get ? 'methods other than GET' : 'GET requests';
  return {
    caveats: [
      `Traefik cannot send ${describeStatus(intent.status)} to ${notFor}: its redirectRegex middleware answers ` +
        `${sent.get} to GET and ${sent.other} to other methods (permanent: ${intent.permanent})`,
    ],
  };
}

/**
 * The Service `portico-redirect` that the redirect path of every redirect Ingress of the `traefik`
 * flavor names, with `metadata` from the caller (name, namespace, labels): type ClusterIP, no
 * selector (so no endpoints), one port 80, and `traefik.ingress.kubernetes.io/service.nativelb:
 * "true"`, so that Traefik builds the redirect's router (see the module comment). Nothing is ever
 * proxied to it: the redirect Middleware answers first.
 */
export function traefikRedirectService(metadata: V1ObjectMeta): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      ...metadata,
      annotations: { ...metadata.annotations, [TRAEFIK_SERVICE_NATIVE_LB]: 'true' },
    },
    spec: {
      type: 'ClusterIP',
      ports: [
        {
          name: 'http',
          port: TRAEFIK_REDIRECT_SERVICE_PORT,
          targetPort: TRAEFIK_REDIRECT_SERVICE_PORT,
          protocol: 'TCP',
        },
      ],
    },
  };
}
