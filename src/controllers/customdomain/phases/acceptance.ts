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
import { controllerOwnerUid } from '../../../routing/foreign-routes.js';
import { ownedRoutingObjects } from '../../../routing/plan.js';
import { inRoutingClass, type RoutingClassSettings } from '../../../routing/routing-class.js';
import {
  acceptance,
  acceptedBefore,
  deployState,
  ELIGIBLE_PLANS,
  planOf,
  reservedDomainOf,
  type AcceptedEvidence,
} from '../acceptance.js';
import { isAccepted } from '../claim-precedence.js';
import type { ClusterView } from '../cluster-view.js';
import { isProvenStatus } from '../status-proof.js';
import type { CustomDomainReconcilerDeps } from './deps.js';

/**
 * The Accepted condition. The plan and reserved-name gates come from the caches; the hostname
 * claim is taken (atomically, in the API server) only when they pass.
 */
export async function accepted(
  d: Pick<
    CustomDomainReconcilerDeps,
    'view' | 'reservedDomains' | 'allowSpecialUseHostnames' | 'claims' | 'ownership' | 'routing'
  >,
  domain: CustomDomain,
): Promise<ReturnType<typeof acceptance> & { claimLapsesAt?: Date }> {
  const { view } = d;
  const key = await d.ownership.store.key();
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
  const service = domain.spec.service?.name;
  const { readyEndpoints, previouslyAccepted, deployed } = deployState(
    domain,
    service ? view.readyEndpoints(domain.metadata.namespace, service) : undefined,
    acceptedEvidence(view, key, domain, d.routing),
  );
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
 * What the operator observes of `domain` that tells whether an `Accepted=True` in its status is its
 * own (acceptance.ts `AcceptedEvidence`): the status proof by `key` (status-proof.ts; none while the
 * key is not loaded, `key` undefined), and, only without a proof, a routing object at one of the
 * names Portico gives the domain's routing (routing/plan.ts `ownedRoutingObjects`) with a
 * controller ownerReference to the domain's uid and in Portico's routing class of `routing`
 * (routing/routing-class.ts `inRoutingClass`: the ingress class, or a reserved Gateway, that the
 * chart's admission keeps to the controller), as the owned caches of `view` hold it. The class is
 * what makes the route unforgeable: an identity that may write `customdomains/status` and create an
 * Ingress could otherwise put one of another class at Portico's name, owned by its domain, and pass
 * its own deploy gate. One HMAC and a few cache reads; no API request (a cache not synced yet shows
 * no routing object).
 */
export function acceptedEvidence(
  view: Pick<ClusterView, 'owned'>,
  key: Uint8Array | undefined,
  domain: CustomDomain,
  routing: RoutingClassSettings,
): AcceptedEvidence {
  const hostname = normalizeDnsName(domain.spec.hostname);
  const uid = domain.metadata.uid ?? '';
  const proven = key !== undefined && isProvenStatus(key, uid, hostname, domain.status);
  const routed =
    !proven &&
    uid !== '' &&
    ownedRoutingObjects(domain).some((header) => {
      const seen = view.owned(header);
      return (
        seen.cached &&
        seen.object !== undefined &&
        controllerOwnerUid(seen.object) === uid &&
        inRoutingClass(header.kind, seen.object, routing)
      );
    });
  return { proven, routed };
}

/**
 * Whether `domain`'s `Accepted=True` counts (acceptance.ts `acceptedBefore` with `acceptedEvidence`
 * and the routing class of `routing`): for the claim rules' grace of a holder never accepted and for
 * which domains an EndpointSlice or status change queues.
 */
export function acceptedBeforeIn(
  view: Pick<ClusterView, 'owned'>,
  key: Uint8Array | undefined,
  domain: CustomDomain,
  routing: RoutingClassSettings,
): boolean {
  return isAccepted(domain) && acceptedBefore(domain, acceptedEvidence(view, key, domain, routing));
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
