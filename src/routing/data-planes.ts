/**
 * Which of Portico's routing flavors each data plane takes (docs/routing.md, "Data planes and
 * flavors"): for every data plane the operator can be told it runs with (`--data-plane`) and every
 * flavor it can write (`--routing-mode`, `--ingress-flavor`), whether a serving domain is served and
 * whether a redirect takes effect, and if not, why and which flags to set instead. Pure: a table
 * and a lookup.
 *
 * A data plane that takes a flavor's Ingress but not its redirect is the case this table exists for:
 * it publishes the Ingress's address (so the acknowledgement alone says "taken") while it proxies the
 * hostname to the Ingress's backend instead of answering with the redirect. The routing plan turns
 * such a cell into `Routed=False`, reason `UnsupportedByDataPlane`, instead of Ready.
 *
 * Sources, per data plane (the versions the stack runs; scripts/install-tools.sh):
 * - Contour v1.33.8: reads Ingress and HTTPProxy; no ingress-nginx or Traefik annotation appears in
 *   its source (internal/dag/ingress_processor.go reads its own `projectcontour.io/*` annotations
 *   only); implements no ListenerSet (no mention in the module), so gateway mode's certificate is
 *   never attached.
 * - Envoy Gateway v1.9.1: Gateway API only (internal/provider/ imports no k8s.io/api/networking/v1,
 *   so reads no Ingress, and names no HTTPProxy); ListenerSet implemented
 *   (test/e2e/envoy-gateway-routes).
 * - Traefik v3.6.12: `kubernetesIngress` ignores ingress-nginx annotations, and its
 *   `kubernetesIngressNGINX` provider (pkg/provider/kubernetes/ingress-nginx/annotations.go) has no
 *   `permanent-redirect`; reads no HTTPProxy; its Gateway provider implements no ListenerSet (no
 *   mention in the module).
 * - ingress-nginx: reads Ingress and its own annotations only (nginx.ts); no HTTPProxy, no Gateway
 *   API.
 */
import type { RoutingOptions } from './options.js';

/** A data plane the operator can be told it runs with (`--data-plane`). */
export type DataPlane = 'contour' | 'envoy-gateway' | 'traefik' | 'ingress-nginx';

export const DATA_PLANES: readonly DataPlane[] = ['contour', 'envoy-gateway', 'traefik', 'ingress-nginx'];

/** Each data plane's name in condition messages (the default of `--data-plane-name`). */
export const DATA_PLANE_NAMES: Readonly<Record<DataPlane, string>> = {
  contour: 'Contour',
  'envoy-gateway': 'Envoy Gateway',
  traefik: 'Traefik',
  'ingress-nginx': 'ingress-nginx',
};

/**
 * What Portico writes, by its settings: `nginx`, `traefik`, `contour` (ingress mode and its
 * `--ingress-flavor`) or `gateway` (gateway mode).
 */
export type RoutingFlavor = 'nginx' | 'traefik' | 'contour' | 'gateway';

export const ROUTING_FLAVORS: readonly RoutingFlavor[] = ['nginx', 'traefik', 'contour', 'gateway'];

/** The flavor `options` write (ingress mode's default flavor is `nginx`). */
export function routingFlavor(options: Pick<RoutingOptions, 'mode' | 'ingressFlavor'>): RoutingFlavor {
  if ((options.mode ?? 'ingress') === 'gateway') return 'gateway';
  return options.ingressFlavor ?? 'nginx';
}

/** The flags that make each data plane serve and redirect (its working flavor). */
export const WORKING_FLAGS: Readonly<Record<DataPlane, string>> = {
  contour: '--routing-mode ingress --ingress-flavor contour',
  'envoy-gateway': '--routing-mode gateway --gateway-parent-refs <namespace>/<gateway>',
  traefik: '--routing-mode ingress --ingress-flavor traefik',
  'ingress-nginx': '--routing-mode ingress --ingress-flavor nginx',
};

/** The flavor each data plane serves and redirects with. */
export const WORKING_FLAVOR: Readonly<Record<DataPlane, RoutingFlavor>> = {
  contour: 'contour',
  'envoy-gateway': 'gateway',
  traefik: 'traefik',
  'ingress-nginx': 'nginx',
};

/** One cell of the table. */
export interface FlavorSupport {
  /** A serving domain's objects are taken and its hostname is routed to the Service over HTTPS. */
  serves: boolean;
  /** A redirect domain answers with the redirect (the status as docs/routing.md says per flavor). */
  redirects: boolean;
  /** Why not, when either is false: what the data plane does with the flavor's objects. */
  why?: string;
}

const NO_LISTENERSET =
  "Portico attaches each domain's certificate to the Gateway with a ListenerSet, which it does not implement, so HTTPS would never serve the certificate";

/** The table: data plane × flavor. Every cell is shown by a test (docs/routing.md names it). */
export const FLAVOR_SUPPORT: Readonly<Record<DataPlane, Readonly<Record<RoutingFlavor, FlavorSupport>>>> = {
  contour: {
    nginx: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores ingress-nginx's permanent-redirect annotations, so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    traefik: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores Traefik's router.middlewares annotation and Middleware, so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    contour: { serves: true, redirects: true },
    gateway: { serves: false, redirects: false, why: NO_LISTENERSET },
  },
  'envoy-gateway': {
    nginx: { serves: false, redirects: false, why: 'it reads Gateway API routes only, no Ingress' },
    traefik: { serves: false, redirects: false, why: 'it reads Gateway API routes only, no Ingress' },
    contour: { serves: false, redirects: false, why: 'it reads Gateway API routes only, no HTTPProxy' },
    gateway: { serves: true, redirects: true },
  },
  traefik: {
    nginx: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores ingress-nginx's permanent-redirect annotations (its ingress-nginx provider does not implement them either), so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    traefik: { serves: true, redirects: true },
    contour: { serves: false, redirects: false, why: 'it reads no HTTPProxy' },
    gateway: { serves: false, redirects: false, why: NO_LISTENERSET },
  },
  'ingress-nginx': {
    nginx: { serves: true, redirects: true },
    traefik: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores Traefik's router.middlewares annotation and Middleware, so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    contour: { serves: false, redirects: false, why: 'it reads no HTTPProxy' },
    gateway: { serves: false, redirects: false, why: 'it implements no Gateway API' },
  },
};

/** The flags that select `flavor`, as the operator is started with them. */
function flagsOf(flavor: RoutingFlavor): string {
  return flavor === 'gateway' ? '--routing-mode gateway' : `--ingress-flavor ${flavor}`;
}

/**
 * Whether the data plane takes what `options` write for a domain that serves (`redirect` false) or
 * redirects (`redirect` true). Undefined when it does, or when no data plane is declared (nothing
 * to judge by); otherwise the sentence for `Routed=False`, reason `UnsupportedByDataPlane`, naming
 * the data plane, what it does with the objects, and the flags to set.
 */
export function unsupportedByDataPlane(
  dataPlane: DataPlane | undefined,
  options: Pick<RoutingOptions, 'mode' | 'ingressFlavor'>,
  redirect: boolean,
): string | undefined {
  if (dataPlane === undefined) return undefined;
  const flavor = routingFlavor(options);
  const cell = FLAVOR_SUPPORT[dataPlane][flavor];
  if (redirect ? cell.redirects : cell.serves) return undefined;
  const name = DATA_PLANE_NAMES[dataPlane];
  const what = redirect ? 'redirect' : 'serve';
  return (
    `The operator runs with ${flagsOf(flavor)} for data plane ${name} (--data-plane ${dataPlane}), and ${name} cannot ${what} this domain that way: ${cell.why ?? ''}. ` +
    `Start the operator with ${WORKING_FLAGS[dataPlane]}, the flavor ${name} takes (docs/routing.md, "Data planes and flavors").`
  );
}
