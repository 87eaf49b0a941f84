/**
 * The `traefik` flavor (`--ingress-flavor traefik`): a serving domain is the shared Ingress; a
 * redirect is a Traefik Middleware `portico-<name>-redirect` (middleware.ts) referenced from the
 * domain's Ingress by `router.middlewares`, plus the challenge Ingress. Pure.
 */
import { ownedNames, type CustomDomain } from '../../api/customdomain.js';
import { ingressFlavorPlan, ingressRedirectPlan, type FlavorPlan } from '../../routing/flavor-plan.js';
import { ownedMetadata, redirectBackend } from '../../routing/ingress.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { RedirectIntent } from '../../routing/redirect.js';
import type { FlavorWriter } from '../types.js';
import {
  TRAEFIK_API_VERSION,
  TRAEFIK_MIDDLEWARE_KIND,
  TRAEFIK_ROUTER_MIDDLEWARES,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
  traefikRedirectSummary,
} from './middleware.js';

/** The name of the Traefik redirect Middleware of a domain. */
export function middlewareName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `${ownedNames(domain).ingress}-redirect`;
}

function traefikBackendCaveats(domain: CustomDomain, options: RoutingOptions): string[] {
  if (redirectBackend(domain, options).source !== 'placeholder') return [];
  return [
    'Traefik builds no router for an Ingress path whose Service does not exist, so set spec.service ' +
      '(or configure the challenge Service) for the redirect to run',
  ];
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
    before: [middleware],
    caveats: [...traefikRedirectSummary(intent).caveats, ...traefikBackendCaveats(domain, options)],
  });
}

export const traefikFlavor: FlavorWriter = {
  flavor: 'traefik',
  redirectNeedsExistingService: true,
  plan: ingressFlavorPlan(redirectPlan),
  ownedObjects: (domain) => [
    {
      apiVersion: TRAEFIK_API_VERSION,
      kind: TRAEFIK_MIDDLEWARE_KIND,
      metadata: { name: middlewareName(domain), namespace: domain.metadata.namespace },
    },
  ],
};
