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
 *   a domain that lost its verification gives up its place in line.
 */
import type { CertificateStatus, IssuanceStatus } from '../../../api/customdomain.js';
import type { OrderKind } from '../../../acme/order-budget.js';
import type { IssuanceFailure } from '../issuance-state.js';
import { pendingRetry } from '../issuance-state.js';
import { abandonsOrderInFlight } from '../overdue.js';
import type { CertificateState, QueuedOrder } from '../status.js';

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
      readonly started: CertificateOutcome;
      readonly queued: (turn: QueuedOrder) => CertificateOutcome;
    };

/**
 * Whether an order could be placed in this reconcile, were the certificate missing or due: DNS
 * verified, no order in flight, and no failure whose next attempt is still ahead. The runner reads
 * the Secret live only then (an order costs the CA budget).
 */
export function orderMayStart(
  verified: boolean,
  inFlight: { startedAt: Date } | undefined,
  failure: IssuanceFailure | undefined,
  now: Date,
): boolean {
  return verified && !inFlight && !pendingRetry(failure, now);
}

/** The certificate decision of one reconcile (see the module comment for the rules). Pure. */
export function decideCertificate(input: CertificateDecisionInput): CertificateDecision {
  if (input.stored.kind === 'usable') return decideRenewal(input, input.stored.certificate);
  const { verified, inFlight, now } = input;
  if (!verified) {
    const outcome = { state: { kind: 'not-requested' } } as const;
    // A domain that lost its verification while waiting in line gives its place to the next: kept,
    // it stood at the front unasked, and the room it was given went unused until the line's
    // staleness sweep (an hour).
    return inFlight ? { action: 'report', outcome } : { action: 'withdraw', outcome };
  }
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
  return {
    action: 'order',
    kind: 'first-issuance',
    priorFailures: input.failure?.failedAttempts ?? 0,
    ...(unusable !== undefined ? { unusable } : {}),
    started: { state: { kind: 'issuing', since: now, ...replacing }, orderStarted: unusable === undefined },
    queued: (turn) => ({ state: turn, requeueAfterMs: queuedRecheckMs(turn, now) }),
  };
}

/** A certificate serves: renew it when due (ARI or 2/3 of its lifetime) and DNS is verified. */
function decideRenewal(input: CertificateDecisionInput, serving: CertificateStatus): CertificateDecision {
  const { verified, inFlight, now } = input;
  const failed = pendingRetry(input.failure, now);
  const renewalMs = Date.parse(serving.renewalTime) - now.getTime();
  const due = renewalMs <= 0 && verified;
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
    return {
      action: 'order',
      kind: 'renewal',
      ...(serving.ari?.certId ? { replaces: serving.ari.certId } : {}),
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
 * turn is due; order-budget.ts IMMINENT_TURN_MS), so it is told afresh or admitted without waiting
 * for the next resync.
 */
export function queuedRecheckMs(queued: { expectedAt: Date }, now: Date): number {
  return Math.max(1_000, queued.expectedAt.getTime() - now.getTime());
}
