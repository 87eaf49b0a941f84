/**
 * What to do about a CustomDomain's certificate in one reconcile, decided from values alone: what
 * the Secret holds, whether DNS is verified, the order in flight, the failure the next attempt waits
 * for, a pending verify request, and the clock. Pure: the runner (certificate.ts) gathers these, asks
 * the order budget when the decision says to order, and starts the order.
 *
 * The rules (docs/customdomains.md, "Certificates" and "Verify and re-verify"; RFC 8555 §6.6 for the
 * CA's Retry-After; RFC 9773 for renewal information):
 * - a certificate that can serve is kept, and renewed once its renewal time has come and DNS is
 *   verified; an unverified domain past that time waits (`awaiting-verification`);
 * - no certificate, or one that cannot serve, is ordered once DNS is verified (the unusable one is
 *   replaced at once, and the status says why);
 * - after a failed attempt, first issuance and renewal alike wait for the published backoff and
 *   never ask before the CA's Retry-After (issuance-state.ts);
 * - a verify request past the overdue threshold, with an order stuck in flight that was placed
 *   before the domain became overdue, abandons that order for a fresh one (overdue.ts);
 * - every order waits for its turn in the ACME account's order budget (src/acme/order-budget.ts);
 *   a domain that lost its verification gives up its place in line;
 * - DNS-01 by delegation (docs/customdomains.md, "Certificates before the move"): a domain whose
 *   `_acme-challenge.<hostname>` is a CNAME into the platform's challenge zone orders, and renews,
 *   by DNS-01 even while its own record does not point at the platform yet (RFC 8555 §8.4); where
 *   the hostname is verified and the zone refused the last attempt's record, the next one answers
 *   HTTP-01 instead. A delegation pointing elsewhere is said on CertificateReady while the domain
 *   is not verified.
 */
import type { CertificateStatus, IssuanceStatus } from '../../../api/customdomain.js';
import { DNS01_PUBLISH_REASONS } from '../../../acme/issuer.js';
import type { OrderKind } from '../../../acme/order-decision.js';
import type { DelegationVerdict } from '../../../dns/challenge-delegation.js';
import type { IssuanceFailure } from '../issuance-state.js';
import { pendingRetry } from '../issuance-state.js';
import { abandonsOrderInFlight } from '../overdue.js';
import type { CertificateState, QueuedOrder } from '../status.js';

/** The DNS-01 delegation of a domain's challenge (src/dns/challenge-delegation.ts). */
export interface ChallengeDelegation {
  readonly name: string;
  readonly target: string;
  readonly verdict: DelegationVerdict | undefined;
  /**
   * The platform asks this domain to show ownership (docs/customdomains.md, "Ownership
   * verification") and its TXT record has not been found yet: the ownership record's name. A
   * delegation does not stand in for it, so nothing is ordered before the record is found.
   */
  readonly ownershipPending?: string;
}

/** What the certificate part of a reconcile found or did. */
export interface CertificateOutcome {
  readonly state: CertificateState;
  /** When to look again, milliseconds from now. */
  readonly requeueAfterMs?: number;
  /** This reconcile placed an order (first issuance or renewal). */
  readonly orderStarted?: boolean;
  /** What status.issuance should say (issuance-state.ts); undefined removes it. */
  readonly issuance?: IssuanceStatus;
}

/** What the domain's Secret holds, as the runner judged it. */
export type StoredCertificateVerdict =
  /** A certificate that can serve the hostname now, its renewal time as planned (renewal.ts). */
  | { kind: 'usable'; certificate: CertificateStatus }
  /** A Secret whose certificate cannot serve; `problem` is a sentence that starts with "Secret <name>". */
  | { kind: 'unusable'; problem: string }
  /** No Secret. */
  | { kind: 'none' };

export interface CertificateDecisionInput {
  /** DNS verified in this reconcile. */
  readonly verified: boolean;
  /** A verify request (the `portico.dev/verify-requested-at` annotation) is acted on in this reconcile. */
  readonly verifyRequested: boolean;
  readonly stored: StoredCertificateVerdict;
  /** The order in flight for the domain, if any. */
  readonly inFlight: { readonly startedAt: Date } | undefined;
  /** The failure the next attempt follows (issuance-state.ts `lastIssuanceFailure`), if any. */
  readonly failure: IssuanceFailure | undefined;
  /** status.verifiedAt and status.lastVerifyRequest as they stood before this reconcile, RFC 3339. */
  readonly verifiedAt: string | undefined;
  readonly lastVerifyRequest: string | undefined;
  /** The CertificateOverdue threshold, milliseconds (`--certificate-overdue-seconds`). */
  readonly overdueMs: number;
  /**
   * With a DNS-01 challenge zone: `name` (`_acme-challenge.<hostname>`), the `target` it must be a
   * CNAME of (where the TXT record is written) and the last check's verdict on it (undefined before
   * the first). Undefined when no challenge zone is configured.
   */
  readonly delegation?: ChallengeDelegation | undefined;
  /** The tracker refused to abandon the order in flight (it settled meanwhile): do not ask again. */
  readonly abandonRefused?: boolean;
  readonly now: Date;
}

/**
 * The decision:
 * - `report`: nothing to start; the outcome says what status shows and when to look again;
 * - `withdraw`: as `report`, and the domain leaves the order budget's line;
 * - `abandon`: abandon the order in flight, leave the line, then decide again (the order is gone);
 * - `order`: ask the budget for a turn for an order of `kind`; when admitted, start it (with
 *   `replaces`, the ARI identifier of the certificate it renews, and `priorFailures`) and report
 *   `started`; when told to wait, report `queued(turn)`. `unusable` is what is wrong with the
 *   Secret being replaced, for the log.
 */
export type CertificateDecision =
  | { readonly action: 'report'; readonly outcome: CertificateOutcome }
  | { readonly action: 'withdraw'; readonly outcome: CertificateOutcome }
  | { readonly action: 'abandon'; readonly orderStartedAt: Date }
  | {
      readonly action: 'order';
      readonly kind: OrderKind;
      readonly replaces?: string;
      readonly priorFailures: number;
      readonly unusable?: string;
      /** Answer DNS-01 with the TXT record at this name in the challenge zone (else HTTP-01). */
      readonly dns01RecordName?: string;
      readonly started: CertificateOutcome;
      readonly queued: (turn: QueuedOrder) => CertificateOutcome;
    };

/**
 * Whether an order could be placed in this reconcile, were the certificate missing or due: DNS
 * verified (or the challenge delegated, `mayOrder`), no order in flight, and no failure whose next
 * attempt is still ahead. The runner reads the Secret live only then (an order costs the CA budget).
 */
export function orderMayStart(
  verified: boolean,
  inFlight: { startedAt: Date } | undefined,
  failure: IssuanceFailure | undefined,
  now: Date,
): boolean {
  return verified && !inFlight && !pendingRetry(failure, now);
}

/**
 * Whether the challenge of `_acme-challenge.<hostname>` is delegated into the challenge zone and
 * may be used: not while the ownership record the platform asks for is still missing. The
 * delegation's label comes from the namespace and hostname (src/dns/challenge-delegation.ts), so a
 * record a former holder of the same namespace name left behind would still match; the ownership
 * token comes from the CustomDomain's uid and the operator's key, and no one else can make it.
 */
export function delegated(delegation: CertificateDecisionInput['delegation']): boolean {
  return delegation?.verdict?.kind === 'delegated' && delegation.ownershipPending === undefined;
}

/** An order may be placed: the hostname is verified, or its DNS-01 challenge is delegated. */
export function mayOrder(input: Pick<CertificateDecisionInput, 'verified' | 'delegation'>): boolean {
  return input.verified || delegated(input.delegation);
}

/**
 * The TXT record name of the next order when it answers DNS-01: the delegation target when the
 * challenge is delegated, unless the hostname is verified and the challenge zone refused the last
 * attempt's record (HTTP-01 then). Undefined: HTTP-01.
 */
export function dns01RecordName(
  input: Pick<CertificateDecisionInput, 'verified' | 'delegation' | 'failure'>,
): string | undefined {
  if (!delegated(input.delegation) || input.delegation === undefined) return undefined;
  const zoneFailed = input.failure !== undefined && DNS01_PUBLISH_REASONS.includes(input.failure.reason);
  return input.verified && zoneFailed ? undefined : input.delegation.target;
}

/** The certificate decision of one reconcile (see the module comment for the rules). Pure. */
export function decideCertificate(input: CertificateDecisionInput): CertificateDecision {
  if (input.stored.kind === 'usable') return decideRenewal(input, input.stored.certificate);
  const { inFlight, now } = input;
  if (!mayOrder(input)) return notOrderable(input);
  const unusable = input.stored.kind === 'unusable' ? input.stored.problem : undefined;
  const replacing = unusable !== undefined ? { replacing: unusable } : {};
  const abandon =
    !input.abandonRefused &&
    abandonsOrderInFlight({
      verifyRequested: input.verifyRequested,
      hasCertificate: false,
      orderStartedAt: inFlight?.startedAt,
      verifiedAt: input.verifiedAt,
      lastVerifyRequest: input.lastVerifyRequest,
      overdueMs: input.overdueMs,
      now,
    });
  if (abandon && inFlight) return { action: 'abandon', orderStartedAt: inFlight.startedAt };
  if (inFlight)
    return {
      action: 'report',
      outcome: { state: { kind: 'issuing', since: inFlight.startedAt, ...replacing } },
    };
  const failed = pendingRetry(input.failure, now);
  if (failed) {
    return {
      action: 'report',
      outcome: {
        state: { kind: 'failed', ...failed },
        requeueAfterMs: failed.retryAt.getTime() - now.getTime(),
      },
    };
  }
  const recordName = dns01RecordName(input);
  return {
    action: 'order',
    kind: 'first-issuance',
    priorFailures: input.failure?.failedAttempts ?? 0,
    ...(unusable !== undefined ? { unusable } : {}),
    ...(recordName !== undefined ? { dns01RecordName: recordName } : {}),
    started: { state: { kind: 'issuing', since: now, ...replacing }, orderStarted: unusable === undefined },
    queued: (turn) => ({ state: turn, requeueAfterMs: queuedRecheckMs(turn, now) }),
  };
}

/**
 * Neither verified nor delegated: no certificate is requested (the state says where a delegation
 * points instead, when it does), and a domain that lost its verification while waiting in line
 * gives its place to the next: kept, it stood at the front unasked, and the room it was given went
 * unused until the line's staleness sweep (an hour).
 */
function notOrderable(input: CertificateDecisionInput): CertificateDecision {
  const verdict = input.delegation?.verdict;
  const delegationElsewhere =
    verdict?.kind === 'pointsElsewhere' && input.delegation
      ? { name: input.delegation.name, found: verdict.target, wanted: input.delegation.target }
      : undefined;
  const ownershipPending = verdict?.kind === 'delegated' ? input.delegation?.ownershipPending : undefined;
  const outcome: CertificateOutcome = {
    state: {
      kind: 'not-requested',
      ...(delegationElsewhere ? { delegationElsewhere } : {}),
      ...(ownershipPending !== undefined ? { awaitingOwnership: ownershipPending } : {}),
    },
  };
  return input.inFlight ? { action: 'report', outcome } : { action: 'withdraw', outcome };
}

/** A certificate serves: renew it when due (ARI or 2/3 of its lifetime) and DNS is verified. */
function decideRenewal(input: CertificateDecisionInput, serving: CertificateStatus): CertificateDecision {
  const { inFlight, now } = input;
  const failed = pendingRetry(input.failure, now);
  const renewalMs = Date.parse(serving.renewalTime) - now.getTime();
  const due = renewalMs <= 0 && mayOrder(input);
  if (due && inFlight) {
    // The tracker re-queues the domain when the order settles; no timed re-check is needed.
    const renewal = { kind: 'in-progress', since: inFlight.startedAt } as const;
    return { action: 'report', outcome: { state: { kind: 'valid', certificate: serving, renewal } } };
  }
  if (due && failed) {
    const renewal = { kind: 'failed', ...failed } as const;
    return {
      action: 'report',
      outcome: {
        state: { kind: 'valid', certificate: serving, renewal },
        requeueAfterMs: Math.max(1_000, failed.retryAt.getTime() - now.getTime()),
      },
    };
  }
  if (due) {
    const recordName = dns01RecordName(input);
    return {
      action: 'order',
      kind: 'renewal',
      ...(serving.ari?.certId ? { replaces: serving.ari.certId } : {}),
      ...(recordName !== undefined ? { dns01RecordName: recordName } : {}),
      priorFailures: input.failure?.failedAttempts ?? 0,
      started: {
        state: { kind: 'valid', certificate: serving, renewal: { kind: 'in-progress', since: now } },
        orderStarted: true,
      },
      queued: (turn) => ({
        state: { kind: 'valid', certificate: serving, renewal: turn },
        requeueAfterMs: queuedRecheckMs(turn, now),
      }),
    };
  }
  // Past its renewal time but not verified: the DNS schedule re-queues the domain; a timed re-check
  // here would fire every second, the time having passed. The status says why it waits.
  const outcome: CertificateOutcome =
    renewalMs > 0
      ? { state: { kind: 'valid', certificate: serving }, requeueAfterMs: renewalMs }
      : { state: { kind: 'valid', certificate: serving, renewal: { kind: 'awaiting-verification' } } };
  return { action: 'report', outcome };
}

/**
 * When to look at a waiting domain again, milliseconds from now: at its expected time, or in a
 * second when that has passed (the order budget repeats an answer up to 5 s past its time while the
 * turn is due; acme/order-decision.ts IMMINENT_TURN_MS), so it is told afresh or admitted without waiting
 * for the next resync.
 */
export function queuedRecheckMs(queued: { expectedAt: Date }, now: Date): number {
  return Math.max(1_000, queued.expectedAt.getTime() - now.getTime());
}
