/**
 * How Portico routes a domain: the settings of the routing plan (docs/routing.md). Pure: types, defaults
 * and a check that the controller runs once at start, so a bad setting stops the process with a clear
 * message instead of failing each reconcile.
 */

import { INGRESS_FLAVORS, type IngressFlavor } from '../data-planes/types.js';
import { DATA_PLANES, type DataPlane } from './data-planes.js';

export { INGRESS_FLAVORS, type IngressFlavor };

/** Where routing objects go: Ingress (networking.k8s.io/v1) or Gateway API HTTPRoute. */
export type RoutingMode = 'ingress' | 'gateway';

export const ROUTING_MODES: readonly RoutingMode[] = ['ingress', 'gateway'];

/**
 * A `parentRefs` entry of every HTTPRoute (Gateway API `ParentReference`, gateway.networking.k8s.io/v1):
 * the platform's Gateway the routes attach to. Group and kind default to the Gateway's.
 */
export interface GatewayParentRef {
  name: string;
  /** The Gateway's namespace; undefined means the route's own namespace. */
  namespace?: string;
  /** A listener name of the Gateway; undefined attaches to every listener that admits the route. */
  sectionName?: string;
  port?: number;
}

export interface RoutingOptions {
  /** Default `ingress`. */
  mode?: RoutingMode;
  /**
   * The data plane that takes the routes (`--data-plane`). When set, a domain whose flavor it
   * ignores is `Routed=False`, reason `UnsupportedByDataPlane`, naming the flags that work
   * (data-planes.ts); undefined: the flavor is not judged.
   */
  dataPlane?: DataPlane;
  /**
   * The ingress controller's flavor (`--ingress-flavor`), written by the data plane module that
   * brings it (src/data-planes/<name>/flavor.ts). `nginx` and `traefik`: plain Ingress, with the
   * flavor's own way of saying what Ingress cannot (a redirect); serving a domain looks the same in
   * both. `contour`: an HTTPProxy (`projectcontour.io/v1`) per domain instead of an Ingress. Default
   * `nginx` (ingress-nginx). Used in `ingress` mode.
   */
  ingressFlavor?: IngressFlavor;
  /**
   * `spec.ingressClassName` of every Ingress (and of every HTTPProxy in the `contour` flavor);
   * undefined leaves the cluster default.
   */
  ingressClassName?: string;
  /**
   * Where the operator's challenge server is reachable in the cluster, e.g.
   * `portico-controller.portico-system.svc.cluster.local` port 8089. When set, each domain routes
   * `/.well-known/acme-challenge/` there through an ExternalName Service in the domain's namespace
   * (an Ingress backend or an HTTPRoute backendRef without a ReferenceGrant must be a Service of its own
   * namespace). Redirect domains keep this path too: they need their own certificate.
   */
  http01Service?: { fqdn: string; port: number };
  /**
   * `parentRefs` of every HTTPRoute. Required, at least one, in `gateway` mode. The Gateway of the
   * first is the one each domain's ListenerSet attaches its certificate to (gateway.ts).
   */
  gatewayParentRefs?: GatewayParentRef[];
  /** The port of each domain's HTTPS listener on the Gateway (its ListenerSet). Default 443. */
  gatewayHttpsPort?: number;
  /**
   * Routed waits for the data plane to take the route (default true): an Ingress's controller
   * publishes an address in `status.loadBalancer.ingress`; a Gateway accepts the HTTPRoute in
   * `status.parents` and the ListenerSet in its conditions (acknowledgement.ts). False for a data
   * plane that reports nothing: the route then counts as written, and Routed and Ready say that it
   * is unconfirmed.
   */
  dataPlaneAcknowledgement?: boolean;
  /**
   * The data plane's name in the acknowledgement messages, e.g. `Contour` ("Contour took Ingress
   * portico-www ..."); undefined says "the ingress controller".
   */
  dataPlaneName?: string;
  /**
   * ingress-nginx: append `$request_uri` to the redirect URL so path and query are kept (default
   * true). ingress-nginx 1.12 and later validate annotations by default and refuse `$` in
   * `permanent-redirect` (kubernetes/ingress-nginx#11175); such a controller needs
   * `--enable-annotation-validation=false`, or set this to false: the redirect then goes to the
   * target's root, and the Routed condition says that path and query are dropped.
   */
  nginxRedirectKeepsPath?: boolean;
  /**
   * Traefik's `providers.kubernetesCRD.safeNaming` (Traefik v3.7.11+): when true, Traefik names the
   * Middleware `<namespace>_<name>` instead of the normalized `<namespace>-<name>`, and the Ingress
   * must reference it by that name. Default false, Traefik's own default.
   */
  traefikSafeNaming?: boolean;
}

/** Thrown by {@link checkRoutingOptions} for a setting the routing plan cannot work with. */
export class RoutingOptionsError extends Error {
  readonly code = 'ROUTING_OPTIONS_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'RoutingOptionsError';
  }
}

/** True for a {@link RoutingOptionsError}, also across realms (matches on name and code). */
export function isRoutingOptionsError(err: unknown): err is RoutingOptionsError {
  return (
    err instanceof RoutingOptionsError ||
    (err instanceof Error && err.name === 'RoutingOptionsError' && 'code' in err)
  );
}

/** RFC 1123 label, the shape of a Kubernetes namespace and of a Gateway listener name. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** RFC 1123 subdomain, the shape of a Kubernetes object name. */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkParentRef(ref: GatewayParentRef, i: number): void {
  const at = `gatewayParentRefs[${i}]`;
  if (!DNS_SUBDOMAIN.test(ref.name))
    throw new RoutingOptionsError(`${at}.name "${ref.name}" is not a Kubernetes object name`);
  if (ref.namespace !== undefined && !DNS_LABEL.test(ref.namespace))
    throw new RoutingOptionsError(`${at}.namespace "${ref.namespace}" is not a Kubernetes namespace name`);
  if (ref.sectionName !== undefined && !DNS_LABEL.test(ref.sectionName))
    throw new RoutingOptionsError(`${at}.sectionName "${ref.sectionName}" is not a listener name`);
  if (ref.port !== undefined && !(Number.isInteger(ref.port) && ref.port >= 1 && ref.port <= 65535))
    throw new RoutingOptionsError(`${at}.port ${ref.port} is not a port number (1-65535)`);
}

/**
 * Checks the settings once, at start. Throws {@link RoutingOptionsError} naming the setting: an
 * unknown mode, flavor or data plane, gateway mode without a parent Gateway, a malformed parent reference.
 */
export function checkRoutingOptions(options: RoutingOptions): void {
  if (options.mode !== undefined && !ROUTING_MODES.includes(options.mode))
    throw new RoutingOptionsError(`routing mode must be one of ${ROUTING_MODES.join(', ')}`);
  if (options.ingressFlavor !== undefined && !INGRESS_FLAVORS.includes(options.ingressFlavor))
    throw new RoutingOptionsError(`ingress flavor must be one of ${INGRESS_FLAVORS.join(', ')}`);
  if (options.dataPlane !== undefined && !DATA_PLANES.includes(options.dataPlane))
    throw new RoutingOptionsError(`data plane must be one of ${DATA_PLANES.join(', ')}`);
  const refs = options.gatewayParentRefs ?? [];
  if (options.mode === 'gateway' && refs.length === 0)
    throw new RoutingOptionsError(
      'gateway mode needs at least one parent Gateway (gatewayParentRefs): the HTTPRoutes attach to it',
    );
  refs.forEach(checkParentRef);
  const port = options.gatewayHttpsPort;
  if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535))
    throw new RoutingOptionsError(`gateway HTTPS port ${port} is not a port number (1-65535)`);
}

/**
 * Parses the `--gateway-parent-refs` setting: comma-separated `[namespace/]name[:sectionName]`, e.g.
 * `infra/public:https,infra/internal`. Throws {@link RoutingOptionsError} for an empty or malformed
 * entry.
 */
export function parseGatewayParentRefs(value: string): GatewayParentRef[] {
  const refs = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry): GatewayParentRef => {
      const match = /^(?:([^/:]+)\/)?([^/:]+)(?::([^/:]+))?$/.exec(entry);
      if (!match?.[2])
        throw new RoutingOptionsError(`gateway parent "${entry}" must be [namespace/]name[:sectionName]`);
      const [, namespace, name, sectionName] = match;
      return {
        name,
        ...(namespace ? { namespace } : {}),
        ...(sectionName ? { sectionName } : {}),
      };
    });
  refs.forEach(checkParentRef);
  return refs;
}
