/**
 * Contour (v1.33.8, its tools.sh) as a data plane: it reads Ingress and its own
 * HTTPProxy; no ingress-nginx or Traefik annotation appears in its source
 * (internal/dag/ingress_processor.go reads its own `projectcontour.io/*` annotations only); it
 * implements no ListenerSet (no mention in the module), so gateway mode's certificate is never
 * attached. The `contour` flavor's objects are written by httpproxy.ts. Pure.
 */
import { httpProxyAcknowledgement } from '../../routing/acknowledgement.js';
import { CONTOUR_API_VERSION, CONTOUR_GROUP, HTTPPROXY_KIND, HTTPPROXY_PLURAL } from './httpproxy.js';
import { IGNORES_TRAEFIK_MIDDLEWARE, NO_LISTENERSET, record, strings } from '../shared.js';
import { contourFlavor } from './flavor.js';
import { contourSubdomainRoute } from './subdomain-route.js';
import { defineDataPlane, type RouteKind } from '../types.js';

/** Contour's class when it is run without `--ingress-class-name` (internal/ingressclass). */
export const CONTOUR_DEFAULT_CLASS = 'contour';

/**
 * Contour's HTTPProxy (`--ingress-flavor contour`): its `Valid` condition says whether Contour took
 * it; a foreign one names `spec.virtualhost.fqdn`, and two with one fqdn are both invalid
 * (DuplicateVhost). One at a Portico name without Portico's controller ownerReference is a platform
 * team's (e.g. the API's, which RateLimitPolicies target), never overwritten.
 */
export const HTTPPROXY_ROUTE_KIND: RouteKind = {
  apiVersion: CONTOUR_API_VERSION,
  kind: HTTPPROXY_KIND,
  plural: HTTPPROXY_PLURAL,
  crd: true,
  acknowledge: (c) => httpProxyAcknowledgement(c.cached, c.name),
  reporter: () => 'Contour',
  foreignRoute: {
    hostnames: (spec) => strings([record(spec.virtualhost).fqdn]),
    slimSpec: (hosts, classField) => ({
      ...classField,
      ...(hosts[0] === undefined ? {} : { virtualhost: { fqdn: hosts[0] } }),
    }),
    classed: true,
  },
  ownedByReferenceOnly: true,
};

export const contour = defineDataPlane({
  name: 'contour',
  displayName: 'Contour',
  workingFlavor: 'contour',
  workingFlags: '--routing-mode ingress --ingress-flavor contour',
  flavors: {
    nginx: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores ingress-nginx's permanent-redirect annotations, so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    traefik: { serves: true, redirects: false, why: IGNORES_TRAEFIK_MIDDLEWARE },
    contour: { serves: true, redirects: true },
    gateway: { serves: false, redirects: false, why: NO_LISTENERSET },
  },
  flavorWriter: contourFlavor,
  subdomainRoute: contourSubdomainRoute,
  routeKinds: [HTTPPROXY_ROUTE_KIND],
  // internal/annotation `IngressClass`: its own annotation first, then kubernetes.io/ingress.class.
  ingressClass: {
    annotation: 'projectcontour.io/ingress.class',
    defaultClassServesClassless: CONTOUR_DEFAULT_CLASS,
  },
  rateLimitAttachment: {
    flag: '--contour-attachment',
    env: 'PORTICO_CONTOUR_ATTACHMENT',
    defaultOn: true,
    help: "true | false: wire RateLimitPolicy targetRefs into Contour's HTTPProxies and write the rate-limit ExtensionService",
    targets: [{ group: CONTOUR_GROUP, kind: HTTPPROXY_KIND }],
  },
});
