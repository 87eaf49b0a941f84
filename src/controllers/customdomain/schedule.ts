/**
 * When Portico checks DNS on its own, and when it retries a failed order. Pure. Published in
 * docs/customdomains.md ("Schedules").
 *
 * - Unverified: the first checks come fast, then back off: the delay is a tenth of the time spent
 *   waiting so far, at least 5 s and at most 10 min, so a record created minutes after the domain is
 *   seen within seconds to a minute, and checks go on through the 48-hour propagation window (docs/customdomains.md, "Schedules").
 * - Verified: re-checked every hour, so a record that is later removed or changed is noticed.
 * - Transient resolver failures (SERVFAIL, timeout): retried after 15 s.
 * - A verified domain whose DNS stopped matching: re-checked every minute (and at the end of the
 *   grace period) while its verified answer still stands (dns-outcome.ts).
 * - A failed certificate order: retried after 1, 2, 4 … minutes, at most 1 hour apart (the first
 *   delay is `--issuance-first-retry-seconds`, 60 by default; tests set it short).
 */
import type { CustomDomain } from '../../api/customdomain.js';
import { VERIFY_REQUESTED_AT_ANNOTATION } from '../../api/customdomain.js';

export const MIN_UNVERIFIED_CHECK_MS = 5_000;
export const MAX_UNVERIFIED_CHECK_MS = 10 * 60_000;
export const VERIFIED_RECHECK_MS = 60 * 60_000;
export const TRANSIENT_RETRY_MS = 15_000;
export const MISMATCH_RECHECK_MS = 60_000;

/**
 * Milliseconds until the next DNS check.
 * @param waitingMs how long the domain has been unverified (0 on the first check)
 */
export function nextDnsCheckDelayMs(
  verdict: { verified: boolean; transient: boolean },
  waitingMs: number,
): number {
  if (verdict.verified) return VERIFIED_RECHECK_MS;
  if (verdict.transient) return TRANSIENT_RETRY_MS;
  return Math.min(MAX_UNVERIFIED_CHECK_MS, Math.max(MIN_UNVERIFIED_CHECK_MS, Math.round(waitingMs / 10)));
}

/** The first retry of a failed certificate order comes this long after the failure, by default (ms). */
export const DEFAULT_ISSUANCE_FIRST_RETRY_MS = 60_000;
/** Retries of a failed certificate order are never further apart than this (ms). */
export const MAX_ISSUANCE_RETRY_MS = 60 * 60_000;

/**
 * Milliseconds before retry number `failures` of a failed certificate order: `firstRetryMs`, then
 * doubling, at most 60 minutes (1, 2, 4 … 60 minutes with the default).
 *
 * @param firstRetryMs the first delay (`--issuance-first-retry-seconds`), ms
 */
export function issuanceRetryDelayMs(
  failures: number,
  firstRetryMs = DEFAULT_ISSUANCE_FIRST_RETRY_MS,
): number {
  return Math.min(MAX_ISSUANCE_RETRY_MS, firstRetryMs * 2 ** Math.max(0, failures - 1));
}

/**
 * Why a DNS check is due: never checked, the spec changed, a verify request not yet acted on
 * (docs/customdomains.md, "Verify and re-verify"), or its scheduled time has come.
 */
export type DnsCheckReason = 'first' | 'spec-changed' | 'requested' | 'scheduled';

/** Why a DNS check is due now, or undefined when the last verdict still stands. */
export function dnsCheckDue(domain: CustomDomain, now: Date): DnsCheckReason | undefined {
  const status = domain.status;
  if (!status?.observed) return 'first';
  if (status.observedGeneration !== domain.metadata.generation) return 'spec-changed';
  const requested = domain.metadata.annotations?.[VERIFY_REQUESTED_AT_ANNOTATION];
  if (requested !== undefined && requested !== status.lastVerifyRequest) return 'requested';
  const next = status.observed.nextCheckAt ? Date.parse(status.observed.nextCheckAt) : 0;
  return next <= now.getTime() ? 'scheduled' : undefined;
}
