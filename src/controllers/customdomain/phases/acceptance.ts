/**
 * The acceptance phase of a CustomDomain reconcile: the Accepted condition (../acceptance.ts, pure)
 * from what the caches hold (the namespace's plan, the Service's endpoints) and the hostname claim,
 * taken atomically in the API server only when the plan and hostname gates pass (takeover
 * safety, docs/customdomains.md "Who holds a hostname").
 */
import type { CustomDomain } from '../../../api/customdomain.js';
import { normalizeDnsName } from '../../../dns/answers.js';
import { claimableProblem } from '../../../domain/claimable.js';
import { invalidALabels, validateHostname } from '../../../domain/hostname.js';
import { findCondition } from '../../../kube/conditions.js';
import { acceptance, ELIGIBLE_PLANS, planOf, reservedDomainOf } from '../acceptance.js';
import type { CustomDomainReconcilerDeps } from './deps.js';

/**
 * The Accepted condition. The plan and reserved-name gates come from the caches; the hostname
 * claim is taken (atomically, in the API server) only when they pass.
 */
export async function accepted(
  d: Pick<CustomDomainReconcilerDeps, 'view' | 'reservedDomains' | 'allowSpecialUseHostnames' | 'claims'>,
  domain: CustomDomain,
): Promise<ReturnType<typeof acceptance> & { claimLapsesAt?: Date }> {
  const { view } = d;
  const hostname = normalizeDnsName(domain.spec.hostname);
  const plan = planOf(view.namespaceLabels(domain.metadata.namespace));
  const reservedDomain = reservedDomainOf(hostname, d.reservedDomains);
  const badLabels = invalidALabels(hostname);
  // The CRD's rules again, for an object stored before one of them existed (validateHostname).
  const hostnameProblem = validateHostname(domain.spec.hostname);
  const notClaimable =
    hostnameProblem === undefined && badLabels.length === 0
      ? claimableProblem(hostname, { allowSpecialUse: d.allowSpecialUseHostnames })
      : undefined;
  const claimable =
    hostnameProblem === undefined &&
    badLabels.length === 0 &&
    notClaimable === undefined &&
    ELIGIBLE_PLANS.has(plan) &&
    reservedDomain === undefined;
  const { readyEndpoints, previouslyAccepted, deployed } = deployState(d, domain);
  const claim = claimable ? await d.claims.acquire(domain, { deployed }) : undefined;
  const condition = acceptance({
    domain,
    plan,
    readyEndpoints,
    previouslyAccepted,
    reservedDomain,
    invalidALabels: badLabels,
    hostnameProblem,
    claimableProblem: notClaimable,
    claim: claim?.state,
    claimLapsesAt: claim?.lapsesAt,
    takenOverAt: claim?.takenOverAt,
  });
  return claim?.lapsesAt ? { ...condition, claimLapsesAt: claim.lapsesAt } : condition;
}

/**
 * The deploy gate's inputs: the ready endpoints of spec.service (undefined: no Service, a redirect),
 * whether Accepted was True before, and so whether the project counts as deployed (a ready endpoint,
 * no Service, or accepted before).
 */
function deployState(
  d: Pick<CustomDomainReconcilerDeps, 'view'>,
  domain: CustomDomain,
): { readyEndpoints: number | undefined; previouslyAccepted: boolean; deployed: boolean } {
  const service = domain.spec.service?.name;
  const readyEndpoints = service ? d.view.readyEndpoints(domain.metadata.namespace, service) : undefined;
  const previouslyAccepted = findCondition(domain.status?.conditions, 'Accepted')?.status === 'True';
  const deployed = readyEndpoints === undefined || readyEndpoints > 0 || previouslyAccepted;
  return { readyEndpoints, previouslyAccepted, deployed };
}

/**
 * Whether a domain refused for `reason` lets its hostname claim go, once its routing is gone: a
 * holder whose plan no longer allows custom domains, or whose hostname is reserved or invalid,
 * does; a NotDeployed holder keeps it (until a deployed claimant takes it over after the grace);
 * HostnameAlreadyClaimed and HostnameClaimYielded hold nothing.
 */
export function releasesClaim(reason: string): boolean {
  return reason === 'PlanNotEligible' || reason === 'ReservedHostname' || reason === 'InvalidHostname';
}

/** What DNSVerified and Routed say while the domain is not accepted. */
export const NOT_ACCEPTED_DNS = {
  type: 'DNSVerified',
  status: 'Unknown',
  reason: 'NotAccepted',
  message: 'DNS is checked once the domain is accepted.',
} as const;
export const NOT_ACCEPTED_ROUTING = {
  kind: 'not-routed',
  reason: 'NotAccepted',
  message: 'The domain is routed once it is accepted and verified.',
} as const;
