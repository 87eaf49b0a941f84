/**
 * Traefik (v3.6.12, its tools.sh) as a data plane: `kubernetesIngress` ignores
 * ingress-nginx annotations, and its `kubernetesIngressNGINX` provider
 * (pkg/provider/kubernetes/ingress-nginx/annotations.go) has no `permanent-redirect`; it reads no
 * HTTPProxy; its Gateway provider implements no ListenerSet (no mention in the module). It takes
 * the `traefik` flavor: an Ingress whose redirect is a Middleware of its own API (data-planes/traefik/middleware.ts),
 * which carries no status to acknowledge. Pure.
 */
import { TRAEFIK_API_VERSION, TRAEFIK_MIDDLEWARE_KIND } from './middleware.js';
import { NO_LISTENERSET, READS_NO_HTTPPROXY } from '../shared.js';
import { traefikFlavor } from './flavor.js';
import { traefikSubdomainRoute } from './subdomain-route.js';
import { defineDataPlane, type RouteKind } from '../types.js';

/** Traefik's Middleware: the redirect of the `traefik` flavor; nothing reports on it. */
export const MIDDLEWARE_ROUTE_KIND: RouteKind = {
  apiVersion: TRAEFIK_API_VERSION,
  kind: TRAEFIK_MIDDLEWARE_KIND,
  plural: 'middlewares',
  crd: true,
};

export const traefik = defineDataPlane({
  name: 'traefik',
  displayName: 'Traefik',
  workingFlavor: 'traefik',
  workingFlags: '--routing-mode ingress --ingress-flavor traefik',
  flavors: {
    nginx: {
      serves: true,
      redirects: false,
      why: "it serves the Ingress but ignores ingress-nginx's permanent-redirect annotations (its ingress-nginx provider does not implement them either), so the hostname would be proxied to the Ingress's backend instead of redirected",
    },
    traefik: { serves: true, redirects: true },
    contour: { serves: false, redirects: false, why: READS_NO_HTTPPROXY },
    gateway: { serves: false, redirects: false, why: NO_LISTENERSET },
  },
  flavorWriter: traefikFlavor,
  subdomainRoute: traefikSubdomainRoute,
  routeKinds: [MIDDLEWARE_ROUTE_KIND],
});
