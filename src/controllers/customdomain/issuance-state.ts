/**
 * Which certificate failure the next attempt of a CustomDomain waits for, from the operator's memory
 * (the IssuanceTracker's last outcome) and from what status recorded (`status.issuance`). Pure.
 *
 * The rule, after cert-manager's `shouldBackoffReissuingOnFailure` (failure state lives in status,
 * not in memory): while the process lives, its memory is the source (the status may lag it by one
 * write); a process that has no outcome for the domain (a restart, a new leader, or an order that
 * was dropped) resumes from status, so no order is placed before the recorded next attempt. A
 * re-verify (docs/customdomains.md, "Verify and re-verify") starts a fresh attempt now, whatever either says.
 */
import type { IssuanceOutcome } from '../../acme/issuance-tracker.js';
import type { IssuanceStatus } from '../../api/customdomain.js';
import { issuanceRetryDelayMs } from './schedule.js';
import type { CertificateState } from './status.js';

/** The failed attempts in a row that the next one follows, with its times as Dates. */
export interface IssuanceFailure {
  /** Failed attempts in a row, at least 1. */
  failedAttempts: number;
  lastFailureTime: Date;
  /** UpperCamelCase (a CertificateReady reason). */
  reason: string;
  message: string;
  /** No order before this time: the backoff after the failure, or `retryAfter` when later. */
  nextAttemptTime: Date;
  /** The CA's Retry-After (RFC 8555 §6.6), when it gave one. */
  retryAfter?: Date;
}

/**
 * The failure the next attempt waits for, or undefined when there is none.
 *
 * - `memory` failed: that failure; the next attempt is `issuanceRetryDelayMs(failures)` after it
 *   (1, 2, 4 … 60 minutes), or the CA's Retry-After when later.
 * - `memory` succeeded: none (a certificate was stored since).
 * - no `memory`: `recorded` (status.issuance) as written, unless `freshAttempt`; a record whose
 *   times do not parse counts as none.
 *
 * @param freshAttempt a re-verify is being acted on: the attempt starts now
 * @param firstRetryMs the backoff's first delay (`--issuance-first-retry-seconds`), ms
 */
export function lastIssuanceFailure(
  memory: IssuanceOutcome | undefined,
  recorded: IssuanceStatus | undefined,
  freshAttempt: boolean,
  firstRetryMs?: number,
): IssuanceFailure | undefined {
  if (memory?.state === 'failed') {
    const backoffEnd = memory.finishedAt.getTime() + issuanceRetryDelayMs(memory.failures, firstRetryMs);
    return {
      failedAttempts: memory.failures,
      lastFailureTime: memory.finishedAt,
      reason: memory.reason,
      message: memory.message,
      nextAttemptTime: new Date(Math.max(backoffEnd, memory.retryAfter?.getTime() ?? 0)),
      ...(memory.retryAfter ? { retryAfter: memory.retryAfter } : {}),
    };
  }
  if (memory !== undefined || freshAttempt || recorded === undefined) return undefined;
  return fromStatus(recorded);
}

function fromStatus(recorded: IssuanceStatus): IssuanceFailure | undefined {
  const lastFailureTime = Date.parse(recorded.lastFailureTime);
  const next = Date.parse(recorded.nextAttemptTime);
  const retryAfter = recorded.retryAfter === undefined ? undefined : Date.parse(recorded.retryAfter);
  if (Number.isNaN(lastFailureTime) || Number.isNaN(next)) return undefined;
  const hasRetryAfter = retryAfter !== undefined && !Number.isNaN(retryAfter);
  return {
    failedAttempts: Math.max(1, Math.floor(recorded.failedAttempts)),
    lastFailureTime: new Date(lastFailureTime),
    reason: recorded.lastFailureReason,
    message: recorded.lastFailureMessage ?? '',
    // The Retry-After is honoured even if a status written by hand put nextAttemptTime before it.
    nextAttemptTime: new Date(hasRetryAfter ? Math.max(next, retryAfter) : next),
    ...(hasRetryAfter ? { retryAfter: new Date(retryAfter) } : {}),
  };
}

/**
 * The failure while its next attempt is not yet due (`now` before `nextAttemptTime`), as the
 * certificate states of status.ts carry it; undefined when the next attempt may start now.
 */
export function pendingRetry(
  failure: IssuanceFailure | undefined,
  now: Date,
): { reason: string; message: string; retryAt: Date } | undefined {
  if (!failure || now >= failure.nextAttemptTime) return undefined;
  return { reason: failure.reason, message: failure.message, retryAt: failure.nextAttemptTime };
}

/**
 * What `status.issuance` should say: `failure` in RFC 3339 times, or undefined (the field is
 * removed) when there is none, or when a certificate serves and no renewal is under way, due or
 * failed (an attempt that failed before it was stored no longer matters: the domain needs nothing).
 */
export function issuanceStatus(
  failure: IssuanceFailure | undefined,
  certificate: CertificateState,
): IssuanceStatus | undefined {
  if (!failure) return undefined;
  if (certificate.kind === 'valid' && certificate.renewal === undefined) return undefined;
  return {
    failedAttempts: failure.failedAttempts,
    lastFailureTime: failure.lastFailureTime.toISOString(),
    lastFailureReason: failure.reason,
    ...(failure.message !== '' ? { lastFailureMessage: failure.message } : {}),
    nextAttemptTime: failure.nextAttemptTime.toISOString(),
    ...(failure.retryAfter ? { retryAfter: failure.retryAfter.toISOString() } : {}),
  };
}
