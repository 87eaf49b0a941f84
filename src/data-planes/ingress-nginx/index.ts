/**
 * ingress-nginx as a data plane: it reads Ingress and its own annotations only (the `nginx` flavor,
 * annotations.ts); no HTTPProxy, no Gateway API. Pure.
 */
import { IGNORES_TRAEFIK_MIDDLEWARE, READS_NO_HTTPPROXY } from '../shared.js';
import { nginxFlavor } from './flavor.js';
import { nginxSubdomainRoute } from './subdomain-route.js';
import { defineDataPlane } from '../types.js';

export const ingressNginx = defineDataPlane({
  name: 'ingress-nginx',
  displayName: 'ingress-nginx',
  workingFlavor: 'nginx',
  workingFlags: '--routing-mode ingress --ingress-flavor nginx',
  flavors: {
    nginx: { serves: true, redirects: true },
    traefik: { serves: true, redirects: false, why: IGNORES_TRAEFIK_MIDDLEWARE },
    contour: { serves: false, redirects: false, why: READS_NO_HTTPPROXY },
    gateway: { serves: false, redirects: false, why: 'it implements no Gateway API' },
  },
  flavorWriter: nginxFlavor,
  subdomainRoute: nginxSubdomainRoute,
  routeKinds: [],
});
