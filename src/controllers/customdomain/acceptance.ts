/**
 * Whether a CustomDomain is accepted at all, before any DNS check: the Accepted condition. Pure.
 *
 * - Plan (docs/customdomains.md, PlanNotEligible): custom domains need Pro or above. The plan is the namespace label
 *   `portico.dev/plan`; a missing label means free (docs/tenant-rbac.md).
 * - Deploy (docs/customdomains.md, NotDeployed): the project must have had a successful deploy: its Service has had at least
 *   one ready endpoint. Once accepted, a later scale-to-zero does not revoke it; "accepted before"
 *   counts only as the operator can prove it (`acceptedBefore`), never from status as written.
 * - The hostname rules of the CRD (domain/hostname.ts), checked again for an object stored before
 *   a rule existed (the API server does not re-check stored objects).
 * - Internationalized names: every `xn--` label must be a valid A-label (RFC 5891, UTS #46); the CRD's
 *   CEL rules cannot decode punycode, so this gate does (`invalidALabels`).
 * - What may be claimed (domain/claimable.ts): a name under an ICANN public suffix, never a
 *   cluster-internal or special-use one (`test` and `example` only with a setting), with labels
 *   IDNA2008 allows.
 * - Reserved hostnames: the platform's own domains (configuration) cannot be claimed.
 * - Takeover safety: a hostname belongs to at most one CustomDomain in the cluster. The claim is a
 *   HostnameClaim taken atomically (hostname-claims.ts) once plan and reserved-name gates pass; the
 *   holder keeps it until its routing is gone, or, never accepted, until a deployed claimant takes
 *   it over after the grace (`HostnameClaimYielded`). The loser's message never names the holder.
 */
import type { CustomDomain } from '../../api/customdomain.js';
import { PLAN_LABEL } from '../../api/customdomain.js';
import type { ClaimableProblem } from '../../domain/claimable.js';
import type { ConditionInput } from '../../kube/conditions.js';
import { isAccepted } from './claim-precedence.js';
import type { ClaimState } from './hostname-claims.js';

export const ELIGIBLE_PLANS: ReadonlySet<string> = new Set(['pro', 'business', 'enterprise']);

/** The plan of a namespace from its labels; `free` when unlabelled. */
export function planOf(labels: Readonly<Record<string, string>> | undefined): string {
  return (labels?.[PLAN_LABEL] ?? 'free').toLowerCase();
}

/** The reserved domain that `hostname` equals or falls under, or undefined. */
export function reservedDomainOf(hostname: string, reserved: readonly string[]): string | undefined {
  return reserved.find((r) => hostname === r || hostname.endsWith(`.${r}`));
}

/**
 * What the operator observes of a CustomDomain that says whether an `Accepted=True` in its status
 * is its own (docs/customdomains.md, "What status Portico trusts").
 */
export interface AcceptedEvidence {
  /**
   * The status carries the operator's proof (status-proof.ts `isProvenStatus`, which covers the
   * Accepted status): the operator wrote this Accepted=True itself.
   */
  proven: boolean;
  /**
   * A routing object of the operator's for the domain exists now: at one of the names Portico gives
   * the domain's routing (routing/plan.ts `ownedRoutingObjects`), with a controller ownerReference
   * to the domain's uid, and in Portico's routing class (routing/routing-class.ts `inRoutingClass`:
   * the ingress class or reserved Gateway that the chart's admission keeps to the controller; an
   * ownerReference alone is anyone's to write who may create the route). The operator writes
   * routing only for an accepted domain and deletes it when the domain is not, so one means the
   * domain was accepted; this is how a domain accepted by a build before the proof (no
   * `status.observed.proof`) keeps its latch until its first reconcile signs its status. A route
   * of another class does not count, so a routing class changed at that same upgrade drops the
   * latch (CHANGELOG.md, "Upgrading").
   */
  routed: boolean;
}

/**
 * Whether `domain` counts as accepted before: its status says `Accepted=True` (claim-precedence.ts
 * `isAccepted`) and the operator can show that it wrote it (`evidence`: the status proof, or its own
 * route for the domain). An `Accepted=True` written by anyone else (someone allowed to update
 * `customdomains/status`) counts for nothing: the deploy gate is asked again and an undeployed hold
 * lapses after its grace. Pure.
 */
export function acceptedBefore(domain: CustomDomain, evidence: AcceptedEvidence): boolean {
  return isAccepted(domain) && (evidence.proven || evidence.routed);
}

/** The deploy gate's inputs (`deployState`). */
export interface DeployState {
  /** Ready endpoints of spec.service now; undefined when the domain has no service (a redirect). */
  readyEndpoints: number | undefined;
  /** `acceptedBefore`: the latch of the deploy gate, as the operator proves it. */
  previouslyAccepted: boolean;
  /**
   * The project counts as deployed (for the deploy gate and a claim take-over): a ready endpoint
   * now, no Service, or accepted before.
   */
  deployed: boolean;
}

/**
 * The deploy gate of `domain` from `readyEndpoints` of its Service now (undefined: no Service) and
 * what the operator observes of its earlier acceptance (`acceptedBefore`). Pure.
 */
export function deployState(
  domain: CustomDomain,
  readyEndpoints: number | undefined,
  evidence: AcceptedEvidence,
): DeployState {
  const previouslyAccepted = acceptedBefore(domain, evidence);
  const deployed = readyEndpoints === undefined || readyEndpoints > 0 || previouslyAccepted;
  return { readyEndpoints, previouslyAccepted, deployed };
}

export interface AcceptanceFacts {
  domain: CustomDomain;
  plan: string;
  /** Ready endpoints of spec.service now; undefined when the domain has no service (redirect only). */
  readyEndpoints: number | undefined;
  /**
   * The Accepted condition was True before, as the operator proves it (`acceptedBefore`): the
   * project has had a deploy.
   */
  previouslyAccepted: boolean;
  reservedDomain: string | undefined;
  /** The labels of the hostname that are `xn--` labels but not valid A-labels (`invalidALabels`). */
  invalidALabels: readonly string[];
  /**
   * The CRD's hostname rule the hostname breaks (`validateHostname`, domain/hostname.ts), for a value
   * stored before the rule existed; undefined when it passes them all.
   */
  hostnameProblem?: { reason: string; message: string } | undefined;
  /**
   * Why the hostname cannot be claimed at all (domain/claimable.ts: not public, special-use,
   * cluster-internal, not IDNA2008); undefined when it can.
   */
  claimableProblem?: ClaimableProblem | undefined;
  /**
   * The hostname claim (hostname-claims.ts): `held` by this CustomDomain, `taken` by another, or
   * `yielded` (taken over from this one, never accepted within the grace); undefined when it was not
   * asked because the plan or reserved-name gate failed first.
   */
  claim: ClaimState | undefined;
  /** `taken`: when the holder's hold lapses for this deployed domain (it was never accepted). */
  claimLapsesAt?: Date | undefined;
  /** `yielded`: when the other domain took the claim over. */
  takenOverAt?: Date | undefined;
}

/** The Accepted condition. The first failing gate decides the reason. */
export function acceptance(f: AcceptanceFacts): ConditionInput & { status: 'True' | 'False' } {
  const { hostname } = f.domain.spec;
  const ns = f.domain.metadata.namespace;
  const no = (reason: string, message: string): ConditionInput & { status: 'False' } => ({
    type: 'Accepted',
    status: 'False',
    reason,
    message,
  });
  if (f.hostnameProblem) {
    return no(
      'InvalidHostname',
      `${hostname}: ${f.hostnameProblem.message} (${f.hostnameProblem.reason}). It was stored before the API server checked this rule; create a CustomDomain with a valid name (spec.hostname cannot be changed).`,
    );
  }
  if (f.invalidALabels.length > 0) {
    const labels = f.invalidALabels.join(', ');
    return no(
      'InvalidHostname',
      `${hostname} has ${f.invalidALabels.length === 1 ? 'a label' : 'labels'} (${labels}) written as punycode that ${f.invalidALabels.length === 1 ? 'is not a valid A-label' : 'are not valid A-labels'} (RFC 5891): no CA issues a certificate for it. Write the name's A-labels as your registrar shows them, in a new CustomDomain (spec.hostname cannot be changed).`,
    );
  }
  if (f.claimableProblem) {
    return no(
      f.claimableProblem.reason,
      `${f.claimableProblem.message} Nothing was claimed; spec.hostname cannot be changed, so create a new CustomDomain.`,
    );
  }
  if (!ELIGIBLE_PLANS.has(f.plan)) {
    return no(
      'PlanNotEligible',
      `Custom domains need the Pro plan or above; namespace ${ns} is on the ${f.plan} plan. Upgrade the project's plan; the domain is accepted as soon as the plan changes.`,
    );
  }
  if (f.reservedDomain) {
    return no(
      'ReservedHostname',
      `${hostname} is under ${f.reservedDomain}, a domain of the platform itself, and cannot be attached as a custom domain.`,
    );
  }
  if (f.claim !== 'held') {
    const refusal = claimRefusal(f);
    return no(refusal.reason, refusal.message);
  }
  if (f.readyEndpoints === 0 && !f.previouslyAccepted) {
    return no(
      'NotDeployed',
      `The project has not had a successful deploy yet: Service ${f.domain.spec.service?.name ?? ''} in ${ns} has no ready endpoint. Deploy the project; the domain is accepted as soon as it serves.`,
    );
  }
  return {
    type: 'Accepted',
    status: 'True',
    reason: 'Accepted',
    message: `Plan ${f.plan} allows custom domains, the project is deployed, and ${hostname} is claimed by this CustomDomain alone.`,
  };
}

/** Why a domain that does not hold its hostname's claim is refused (`claim` not `held`). */
function claimRefusal(f: AcceptanceFacts): { reason: string; message: string } {
  const { hostname } = f.domain.spec;
  if (f.claim === 'yielded') {
    const at = f.takenOverAt ? ` at ${f.takenOverAt.toISOString()}` : '';
    return {
      reason: 'HostnameClaimYielded',
      message: `${hostname} was held by this CustomDomain, but the project had no successful deploy within the grace the platform allows after it was created, and another project, deployed, took the hostname over${at}. If you own it, remove it from the other project first, or contact support.`,
    };
  }
  const lapse = f.claimLapsesAt
    ? ` The project holding it has not been deployed yet; if it still is not at ${f.claimLapsesAt.toISOString()}, this domain takes the hostname over.`
    : ' If you own it, remove it from the other project first, or contact support.';
  return {
    reason: 'HostnameAlreadyClaimed',
    message: `${hostname} is already attached to another project on this platform.${lapse}`,
  };
}
