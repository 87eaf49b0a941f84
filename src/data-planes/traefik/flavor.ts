/**
 * The `traefik` flavor (`--ingress-flavor traefik`): a serving domain is the shared Ingress; a
 * redirect is a Traefik Middleware `portico-<name>-redirect` (middleware.ts) referenced from the
 * domain's Ingress by `router.middlewares`, whose path names the namespace's Service
 * `portico-redirect` (a selector-less Service Traefik builds the router for: middleware.ts
 * `traefikRedirectService`), plus the challenge Ingress. Pure.
 */
import type { V1Service } from '@kubernetes/client-node';
import { CUSTOM_DOMAIN_LABEL, ownedNames, type CustomDomain } from '../../api/customdomain.js';
import { ingressFlavorPlan, ingressRedirectPlan, type FlavorPlan } from '../../routing/flavor-plan.js';
import { ownedMetadata } from '../../routing/ingress.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { RedirectIntent } from '../../routing/redirect.js';
import type { FlavorWriter } from '../types.js';
import {
  TRAEFIK_API_VERSION,
  TRAEFIK_MIDDLEWARE_KIND,
  TRAEFIK_REDIRECT_SERVICE_NAME,
  TRAEFIK_REDIRECT_SERVICE_PORT,
  TRAEFIK_ROUTER_MIDDLEWARES,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
  traefikRedirectService,
  traefikRedirectSummary,
} from './middleware.js';

/** The name of the Traefik redirect Middleware of a domain. */
export function middlewareName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `${ownedNames(domain).ingress}-redirect`;
}

/**
 * The Service `portico-redirect` of the domain's namespace. Shared by every redirect domain of the
 * namespace, as the challenge Service is: no owner reference and no CustomDomain label, so no
 * domain's removal deletes it from under another's redirect.
 */
export function redirectService(domain: CustomDomain): V1Service {
  const metadata = ownedMetadata(domain, TRAEFIK_REDIRECT_SERVICE_NAME);
  delete metadata.ownerReferences;
  delete metadata.labels?.[CUSTOM_DOMAIN_LABEL];
  return traefikRedirectService(metadata);
}

function redirectPlan(domain: CustomDomain, options: RoutingOptions, intent: RedirectIntent): FlavorPlan {
  const middleware = traefikRedirectMiddleware(intent, ownedMetadata(domain, middlewareName(domain)));
  const reference = traefikMiddlewareReference(
    domain.metadata.namespace,
    middlewareName(domain),
    options.traefikSafeNaming ?? false,
  );
  return ingressRedirectPlan(domain, options, intent, {
    what: `Ingress ${ownedNames(domain).ingress} with Traefik Middleware ${middlewareName(domain)}`,
    annotations: { [TRAEFIK_ROUTER_MIDDLEWARES]: reference },
    backend: { name: TRAEFIK_REDIRECT_SERVICE_NAME, port: TRAEFIK_REDIRECT_SERVICE_PORT },
    before: [redirectService(domain), middleware],
    caveats: traefikRedirectSummary(intent).caveats,
  });
}

/**
 * Milliseconds between writing a Middleware and writing the Ingress that names it (and between an
 * Ingress ceasing to name it and its deletion): Traefik's Ingress and CRD providers publish apart,
 * each at most once per `providersThrottleDuration` (2 s by default; pkg/server/configurationwatcher.go
 * `throttleProviderConfigReload`), and a router that names a Middleware Traefik has not loaded is not
 * built, so the hostname would answer 404 meanwhile. 2 s and half a second for the watch.
 */
export const TRAEFIK_MIDDLEWARE_SETTLE_MS = 2_500;

export const traefikFlavor: FlavorWriter = {
  flavor: 'traefik',
  plan: ingressFlavorPlan(redirectPlan),
  referenceSettle: { kind: TRAEFIK_MIDDLEWARE_KIND, ms: TRAEFIK_MIDDLEWARE_SETTLE_MS },
  ownedObjects: (domain) => [
    {
      apiVersion: TRAEFIK_API_VERSION,
      kind: TRAEFIK_MIDDLEWARE_KIND,
      metadata: { name: middlewareName(domain), namespace: domain.metadata.namespace },
    },
  ],
};
