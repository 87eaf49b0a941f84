/**
 * The `nginx` flavor (`--ingress-flavor nginx`, the default): a serving domain is the shared
 * Ingress; a redirect is the domain's Ingress with ingress-nginx's permanent-redirect annotations
 * (annotations.ts), plus the challenge Ingress. Pure.
 */
import { ownedNames, type CustomDomain } from '../../api/customdomain.js';
import { ingressFlavorPlan, ingressRedirectPlan, type FlavorPlan } from '../../routing/flavor-plan.js';
import type { RoutingOptions } from '../../routing/options.js';
import type { RedirectIntent } from '../../routing/redirect.js';
import type { FlavorWriter } from '../types.js';
import { nginxRedirectAnnotations, nginxRedirectSummary } from './annotations.js';

function redirectPlan(domain: CustomDomain, options: RoutingOptions, intent: RedirectIntent): FlavorPlan {
  const keepsPath = options.nginxRedirectKeepsPath ?? true;
  return ingressRedirectPlan(domain, options, intent, {
    what: `Ingress ${ownedNames(domain).ingress} (ingress-nginx)`,
    annotations: nginxRedirectAnnotations(intent, keepsPath),
    caveats: nginxRedirectSummary(intent, keepsPath).caveats,
    keepsPath,
  });
}

export const nginxFlavor: FlavorWriter = {
  flavor: 'nginx',
  plan: ingressFlavorPlan(redirectPlan),
};
