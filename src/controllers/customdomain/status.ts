/**
 * The status a CustomDomain should show, from what the reconcile observed. Pure: every input is a
 * value, the clock included. Conditions as docs/customdomains.md lists them: Accepted, DNSVerified, CertificateReady,
 * Routed, and Ready (all four).
 */
import type {
  CertificateStatus,
  Condition,
  CustomDomain,
  CustomDomainStatus,
  Phase,
} from '../../api/customdomain.js';
import { setCondition, type ConditionInput } from '../../kube/conditions.js';
import type { OverdueClock } from './overdue.js';
import type { ServingReadiness } from '../../serving/schedule.js';
import { conflictMessage } from '../../routing/foreign-routes.js';

/** The condition of routes Portico does not own naming the hostname (docs/routing.md, "Foreign routes"). Abnormal-true, as Gateway API's `Conflicted`. */
export const CONFLICTED_CONDITION = 'Conflicted';
/** Conflicted=True, and Ready=False for it, and the Warning Event per newly seen object. */
export const FOREIGN_ROUTE_REASON = 'ForeignRoute';

/** The state of the domain's certificate, as the reconcile found it. */
export type CertificateState =
  | { kind: 'valid'; certificate: CertificateStatus; renewal?: RenewalState }
  | {
      kind: 'not-requested';
      /**
       * `_acme-challenge.<hostname>` is a CNAME to `found`, not to `wanted` in the platform's
       * challenge zone (docs/customdomains.md, "Certificates before the move").
       */
      delegationElsewhere?: { name: string; found: string; wanted: string };
      /**
       * The challenge is delegated, but the ownership TXT record the platform asks for (this
       * name) is not found yet: no DNS-01 order before it is (docs/customdomains.md).
       */
      awaitingOwnership?: string;
    }
  | {
      kind: 'issuing';
      since: Date;
      /** The Secret held a certificate that cannot serve; this says why (it is being replaced). */
      replacing?: string;
    }
  | { kind: 'failed'; reason: string; message: string; retryAt: Date }
  | QueuedOrder;

/**
 * An order waiting for the ACME account's budget (src/acme/order-budget.ts): `message` names the
 * limit, the place in line and the expected time of its turn.
 */
export interface QueuedOrder {
  kind: 'queued';
  /** The limit it waits for, e.g. `AccountOrderBudget`. */
  limit: string;
  message: string;
  /** 1-based place in the waiting line. */
  position: number;
  expectedAt: Date;
}

/**
 * A renewal of the certificate that serves: under way, or failed with its next attempt due at
 * `retryAt` (the old certificate serves meanwhile).
 */
export type RenewalState =
  | { kind: 'in-progress'; since: Date }
  /** Due, but a renewal is ordered only for a verified domain: it waits until DNS verifies again. */
  | { kind: 'awaiting-verification' }
  | { kind: 'failed'; reason: string; message: string; retryAt: Date }
  | QueuedOrder;

/** No certificate this long after verification is a problem of its own (docs/troubleshooting.md, CertificateOverdue). */
export const CERTIFICATE_THRESHOLD_MS = 30 * 60_000;

/** What a person can do when the certificate is late (docs/troubleshooting.md, CertificateOverdue), for the condition message. */
const LATE_CERTIFICATE_HINTS =
  'Likely causes: CAA records that exclude the platform\'s certificate authority, /.well-known/acme-challenge/ not reaching the platform, or the CA rate-limiting. Fix the cause, then re-verify to start a fresh attempt: kubectl annotate customdomain <name> portico.dev/verify-requested-at="$(date -u +%FT%TZ)" --overwrite.';

/**
 * The routing objects as the data plane took them: `routed` with `confirmed` true when the ingress
 * controller or gateway reported taking them, false when that is not asked (the data-plane
 * acknowledgement is off: written, but unconfirmed); `not-routed` otherwise, with the data plane's
 * own reason where it refused (routing/acknowledgement.ts).
 */
export type RoutingState =
  | {
      kind: 'routed';
      message: string;
      confirmed: boolean;
      /**
       * What the data plane reported when `confirmed`: which controller took which object, as
       * routing/acknowledgement.ts words it (e.g. "Contour took HTTPProxy portico-www (currentStatus
       * valid)."). Ready's message names it when the serving check is off.
       */
      acknowledgement?: string;
    }
  | { kind: 'not-routed'; reason: string; message: string };

/** What Routed and Ready add when the data plane is not asked whether it took the route. */
export const UNCONFIRMED_SENTENCE =
  'Written, but unconfirmed: the data-plane acknowledgement is off (--data-plane-acknowledgement=false), so whether the ingress controller or gateway took the route is not checked.';

export interface ObservedState {
  accepted: ConditionInput & { status: 'True' | 'False' };
  dnsVerified: ConditionInput;
  certificate: CertificateState;
  routing: RoutingState;
  /**
   * Ready as the serving check has it (src/serving/checker.ts); absent when the check is off or
   * does not apply (no valid certificate, or not routed).
   */
  serving?: ServingReadiness;
  /**
   * The routes Portico does not own that name the hostname, each `Kind namespace/name`
   * (routing/foreign-routes.ts); absent or empty when none.
   */
  foreignRoutes?: readonly string[];
  /**
   * The CertificateOverdue clock (overdue.ts `overdueClockStart`), computed once by the reconcile
   * for a verified domain, which also wakes by it (`msUntilOverdue`); absent when not verified.
   */
  overdueClock?: OverdueClock | undefined;
}

/**
 * Conflicted: True (`ForeignRoute`) naming each foreign route; False (`NoForeignRoute`) once they
 * are gone. Undefined while none has ever been seen and the condition is absent, so a domain
 * without a conflict carries no such condition (no status write for every domain at upgrade).
 */
function conflictedCondition(
  domain: CustomDomain,
  routes: readonly string[],
  current: readonly Condition[],
): ConditionInput | undefined {
  if (routes.length > 0)
    return {
      type: CONFLICTED_CONDITION,
      status: 'True',
      reason: FOREIGN_ROUTE_REASON,
      message: conflictMessage(domain.spec.hostname, routes),
    };
  if (!current.some((c) => c.type === CONFLICTED_CONDITION)) return undefined;
  return {
    type: CONFLICTED_CONDITION,
    status: 'False',
    reason: 'NoForeignRoute',
    message: `No Ingress, HTTPProxy or HTTPRoute that Portico does not own names ${domain.spec.hostname}.`,
  };
}

/**
 * Whether a missing certificate in `state` is reported as overdue once late (docs/customdomains.md, CertificateOverdue: the
 * troubleshooting threshold holds whatever the certificate waits for): always, but while one serves
 * and while an unusable Secret is being replaced (the domain had its certificate; the time since
 * verification says nothing). A domain waiting for the CA budget or refused by CAA is overdue too,
 * and the message keeps what it waits for (`overdueCause`).
 */
function overdueApplies(state: CertificateState): boolean {
  if (state.kind === 'valid') return false;
  return !(state.kind === 'issuing' && state.replacing !== undefined);
}

/** What an overdue certificate waits for, with the reason it would have had: '' when issuing. */
function overdueCause(state: CertificateState): string {
  switch (state.kind) {
    case 'failed':
      return ` The last attempt failed (${state.reason}): ${asSentence(state.message)}`;
    case 'queued':
      return ` The order is waiting (OrderQueued): ${asSentence(state.message)}`;
    default:
      return '';
  }
}

/**
 * @param lateSinceMs how long the domain has been verified without a certificate (since the last
 *   verify request acted on, when later), milliseconds; past `overdueMs` a missing certificate gets
 *   its own reason (docs/troubleshooting.md, CertificateOverdue)
 * @param sinceVerifyRequest the clock counts from a verify request, not from verification
 */
function certificateCondition(
  state: CertificateState,
  verified: boolean,
  lateSinceMs: number,
  overdueMs: number,
  sinceVerifyRequest = false,
): ConditionInput {
  if (lateSinceMs >= overdueMs && overdueApplies(state)) {
    return {
      type: 'CertificateReady',
      status: 'False',
      reason: 'CertificateOverdue',
      message: `No certificate ${lateSinceMs >= 60_000 ? `${Math.floor(lateSinceMs / 60_000)} minutes` : `${Math.floor(lateSinceMs / 1000)} seconds`} after ${sinceVerifyRequest ? 'the last verify request' : 'verification'} (it usually takes a couple of minutes).${overdueCause(state)} ${LATE_CERTIFICATE_HINTS}`,
    };
  }
  switch (state.kind) {
    case 'valid':
      return validCertificateCondition(state.certificate, state.renewal);
    case 'issuing':
      return issuingCondition(state);
    case 'failed':
      return {
        type: 'CertificateReady',
        status: 'False',
        reason: state.reason,
        message: `The last attempt failed: ${asSentence(state.message)} Next attempt at ${state.retryAt.toISOString()}.`,
      };
    case 'queued':
      return {
        type: 'CertificateReady',
        status: 'False',
        reason: 'OrderQueued',
        message: state.message,
      };
    case 'not-requested':
      return notRequestedCondition(state, verified);
  }
}

/** No certificate requested: why (DNS verification, a delegation elsewhere, the ownership record). */
function notRequestedCondition(
  state: Extract<CertificateState, { kind: 'not-requested' }>,
  verified: boolean,
): ConditionInput {
  if (!verified && state.delegationElsewhere)
    return {
      type: 'CertificateReady',
      status: 'False',
      reason: 'ChallengeDelegationMismatch',
      message: `${state.delegationElsewhere.name} is a CNAME to ${state.delegationElsewhere.found}, not to ${state.delegationElsewhere.wanted}: the certificate is not issued before DNS verification. Point it at ${state.delegationElsewhere.wanted} to have it issued now, or wait for DNS verification (HTTP-01).`,
    };
  if (!verified && state.awaitingOwnership !== undefined)
    return {
      type: 'CertificateReady',
      status: 'False',
      reason: 'AwaitingDNSVerification',
      message: `The ACME challenge is delegated, but the platform asks this domain to show ownership first: the certificate is ordered by DNS-01 once the TXT record ${state.awaitingOwnership} is found (status.dnsRecords).`,
    };
  return {
    type: 'CertificateReady',
    status: 'False',
    reason: verified ? 'Pending' : 'AwaitingDNSVerification',
    message: verified
      ? 'The certificate order starts now.'
      : 'A certificate is requested once DNS verification succeeds.',
  };
}

function issuingCondition(state: Extract<CertificateState, { kind: 'issuing' }>): ConditionInput {
  const order = `an ACME order in progress since ${state.since.toISOString()}`;
  if (state.replacing !== undefined)
    return {
      type: 'CertificateReady',
      status: 'False',
      reason: 'Reissuing',
      message: `${state.replacing}, so it cannot serve; a new certificate is being issued (${order}).`,
    };
  return {
    type: 'CertificateReady',
    status: 'False',
    reason: 'Issuing',
    message: `An ACME order is in progress since ${state.since.toISOString()}; it usually completes within a couple of minutes.`,
  };
}

/** CertificateReady while a certificate serves: `Issued`, `Renewing` or `RenewalFailed` (all True). */
function validCertificateCondition(certificate: CertificateStatus, renewal?: RenewalState): ConditionInput {
  const serving = `Certificate ${certificate.serialNumber} from ${certificate.issuer} is valid until ${certificate.notAfter}`;
  if (renewal?.kind === 'in-progress') {
    return {
      type: 'CertificateReady',
      status: 'True',
      reason: 'Renewing',
      message: `${serving} and serves while its renewal, an ACME order in progress since ${renewal.since.toISOString()}, completes.`,
    };
  }
  if (renewal?.kind === 'awaiting-verification') {
    return {
      type: 'CertificateReady',
      status: 'True',
      reason: 'RenewalAwaitsVerification',
      message: `${serving} and serves; its renewal was due at ${certificate.renewalTime} and is ordered once DNS verifies again (see DNSVerified).`,
    };
  }
  if (renewal?.kind === 'queued') {
    return {
      type: 'CertificateReady',
      status: 'True',
      reason: 'RenewalQueued',
      message: `${serving} and serves; its renewal is due. ${renewal.message}`,
    };
  }
  if (renewal?.kind === 'failed') {
    return {
      type: 'CertificateReady',
      status: 'True',
      reason: 'RenewalFailed',
      message: `${serving} and still serves, but its renewal failed (${renewal.reason}): ${asSentence(renewal.message)} Next attempt at ${renewal.retryAt.toISOString()}.`,
    };
  }
  return {
    type: 'CertificateReady',
    status: 'True',
    reason: 'Issued',
    message: `${serving}; renewal at ${certificate.renewalTime}.`,
  };
}

function routedCondition(state: RoutingState): ConditionInput {
  return state.kind === 'routed'
    ? {
        type: 'Routed',
        status: 'True',
        reason: 'RoutesReady',
        message: state.confirmed ? state.message : `${state.message} ${UNCONFIRMED_SENTENCE}`,
      }
    : { type: 'Routed', status: 'False', reason: state.reason, message: state.message };
}

function phaseOf(observed: ObservedState, ready: boolean): Phase {
  if (ready) return 'Live';
  if (observed.accepted.status !== 'True') return 'Pending';
  if (observed.dnsVerified.status !== 'True') return 'AwaitingDNS';
  if (observed.certificate.kind === 'failed') return 'Failed';
  if (observed.certificate.kind === 'issuing' || observed.certificate.kind === 'queued') return 'Issuing';
  return 'Verified';
}

/** How Ready's message says that serving was not observed, and how to observe it. */
export const NOT_OBSERVED_SENTENCE =
  'Serving was not observed: no HTTPS request is made while the serving check is off (--serving-check-address, chart value routing.servingCheck.address).';

/**
 * Ready=True's message without the serving check: what it rests on, never more. The certificate
 * (its serial), the data plane's acknowledgement (which controller took which object) or that it
 * was not asked, and that serving was not observed.
 */
export function unobservedReadyMessage(
  hostname: string,
  certificate: CertificateState,
  routing: Extract<RoutingState, { kind: 'routed' }>,
): string {
  const serial = certificate.kind === 'valid' ? certificate.certificate.serialNumber : undefined;
  const has =
    serial === undefined ? `${hostname} has its certificate` : `${hostname} has certificate ${serial}`;
  if (!routing.confirmed)
    return `${has} and its routing is written, but unconfirmed: the data-plane acknowledgement is off, so the ingress controller or gateway is not asked. ${NOT_OBSERVED_SENTENCE}`;
  const taken =
    routing.acknowledgement === undefined
      ? 'the data plane acknowledged its route.'
      : `its route is acknowledged: ${asSentence(routing.acknowledgement)}`;
  return `${has}, and ${taken} ${NOT_OBSERVED_SENTENCE}`;
}

/**
 * Ready: True (`Live`) when no other condition blocks, its message naming what that rests on
 * (`unobservedReadyMessage`); else False with the first blocking reason and every blocking message.
 * With the serving check on, nothing else blocking: the check's status, reason and message (what it
 * saw: the certificate served, where, when, and the answer).
 */
function readyCondition(
  domain: CustomDomain,
  blocking: readonly ConditionInput[],
  observed: Pick<ObservedState, 'certificate' | 'routing' | 'serving'>,
): ConditionInput {
  if (blocking.length > 0)
    return {
      type: 'Ready',
      status: 'False',
      reason: blocking[0]?.reason ?? 'NotReady',
      message: blocking.map((c) => `${c.type}: ${c.message}`).join(' '),
    };
  if (observed.serving) return { type: 'Ready', ...observed.serving };
  const routing: Extract<RoutingState, { kind: 'routed' }> =
    observed.routing.kind === 'routed' ? observed.routing : { kind: 'routed', message: '', confirmed: false };
  return {
    type: 'Ready',
    status: 'True',
    reason: 'Live',
    message: unobservedReadyMessage(domain.spec.hostname, observed.certificate, routing),
  };
}

/**
 * The new status: conditions set on the old ones (keeping transition times where nothing flipped),
 * phase, observedGeneration and the certificate facts. `overdueMs`: after this long verified without
 * a certificate, CertificateReady says so (spec: 30 minutes, the default). Fields not computed here (dnsRecords,
 * observed, verifiedAt, lastVerifyRequest, ownership, issuance) come from `carried`; one absent
 * there is absent from the result.
 */
export function buildStatus(
  domain: CustomDomain,
  observed: ObservedState,
  carried: Pick<
    CustomDomainStatus,
    'dnsRecords' | 'observed' | 'verifiedAt' | 'lastVerifyRequest' | 'ownership' | 'issuance'
  >,
  now: Date,
  overdueMs: number = CERTIFICATE_THRESHOLD_MS,
): CustomDomainStatus {
  const generation = domain.metadata.generation ?? 0;
  const verified = observed.dnsVerified.status === 'True';
  // Counted from the later of verifiedAt and the verify request acted on (overdue.ts).
  const clock = verified ? observed.overdueClock : undefined;
  const lateSinceMs = clock ? now.getTime() - clock.since.getTime() : 0;
  let conditions: Condition[] = domain.status?.conditions ?? [];
  const inputs = [
    observed.accepted,
    observed.dnsVerified,
    certificateCondition(observed.certificate, verified, lateSinceMs, overdueMs, clock?.byVerifyRequest),
    routedCondition(observed.routing),
  ];
  for (const input of inputs) conditions = setCondition(conditions, input, generation, now);
  const blocking = inputs.filter((c) => c.status !== 'True');
  const conflicted = conflictedCondition(domain, observed.foreignRoutes ?? [], conditions);
  if (conflicted) {
    conditions = setCondition(conditions, conflicted, generation, now);
    // A foreign route can take the hostname's traffic (or, in Contour, invalidate its vhost): the
    // domain is not known to serve the project, so Ready goes down, after any other cause.
    if (conflicted.status === 'True') blocking.push({ ...conflicted, status: 'False' });
  }
  const readyInput = readyCondition(domain, blocking, observed);
  const ready = readyInput.status === 'True';
  conditions = setCondition(conditions, readyInput, generation, now);
  const status: CustomDomainStatus = {
    observedGeneration: generation,
    phase: phaseOf(observed, ready),
    conditions,
    ...carried,
  };
  const certificate =
    observed.certificate.kind === 'valid' ? observed.certificate.certificate : domain.status?.certificate;
  if (certificate) status.certificate = certificate;
  return status;
}

/** `text` ending with a full stop: one is added unless it already ends with `.`, `!` or `?`. */
export function asSentence(text: string): string {
  const trimmed = text.trimEnd();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
