/**
 * The DNSVerified condition and the DNS part of the status, from a fresh verdict or carried over
 * from the last check while no new check is due. Pure.
 */
import type {
  CustomDomainStatus,
  ObservedDns,
  OwnershipStatus,
  RequiredDnsRecord,
} from '../../api/customdomain.js';
import { findCondition } from '../../kube/conditions.js';
import type { Verdict } from '../../dns/verdict.js';
import { MISMATCH_RECHECK_MS, nextDnsCheckDelayMs, TRANSIENT_RETRY_MS } from './schedule.js';
import type { ObservedState } from './status.js';

export interface DnsOutcome {
  condition: ObservedState['dnsVerified'];
  carried: Pick<
    CustomDomainStatus,
    'dnsRecords' | 'observed' | 'verifiedAt' | 'lastVerifyRequest' | 'ownership'
  >;
  /** Milliseconds until the next scheduled check. */
  nextCheckMs: number;
}

export interface DnsStatusBase {
  dnsRecords: RequiredDnsRecord[];
  lastVerifyRequest: string | undefined;
  /** The ownership decision and its progress (src/dns/ownership.ts), carried as it is. */
  ownership?: OwnershipStatus | undefined;
}

/** The reason of DNSVerified for a dangling record (see `freshDnsOutcome`). */
export const DANGLING_REASON = 'DanglingRecord';

function withOptional(
  base: DnsStatusBase,
  extra: Pick<CustomDomainStatus, 'observed'>,
  verifiedAt: string | undefined,
): DnsOutcome['carried'] {
  return {
    dnsRecords: base.dnsRecords,
    ...extra,
    ...(base.lastVerifyRequest !== undefined ? { lastVerifyRequest: base.lastVerifyRequest } : {}),
    ...(base.ownership !== undefined ? { ownership: base.ownership } : {}),
    ...(verifiedAt !== undefined ? { verifiedAt } : {}),
  };
}

/** The last verdict, unchanged, when the status holds one; undefined when a check must run. */
export function carriedDnsOutcome(
  previous: CustomDomainStatus | undefined,
  base: DnsStatusBase,
  now: Date,
): DnsOutcome | undefined {
  const old = findCondition(previous?.conditions, 'DNSVerified');
  if (!old || !previous?.observed) return undefined;
  const nextAt = previous.observed.nextCheckAt ? Date.parse(previous.observed.nextCheckAt) : now.getTime();
  return {
    condition: {
      type: 'DNSVerified',
      status: old.status === 'True' ? 'True' : 'False',
      reason: old.reason,
      message: old.message,
    },
    carried: withOptional(base, { observed: previous.observed }, previous.verifiedAt),
    nextCheckMs: Math.max(0, nextAt - now.getTime()),
  };
}

/**
 * The outcome of a check that just ran. The next check is scheduled from how long the domain has
 * been unverified (the DNSVerified condition's lastTransitionTime); `verifiedAt` is kept while the
 * domain stays verified and set when it turns verified.
 *
 * A verified domain is not taken out of service by one answer (docs/customdomains.md, "DNS faults on a verified domain"): a transient
 * failure (SERVFAIL, timeout, another resolver error) never unverifies it, and a definite answer
 * that no longer matches (the record missing, changed or conflicting) does only once DNS has
 * disagreed for `graceMs` (milliseconds), counted from `observed.failingSince`, the first
 * disagreeing answer. Meanwhile DNSVerified stays True with the same reason (so no Event is recorded
 * and Ready holds) and its message says what the latest check found and until when the verified
 * answer stands.
 *
 * A dangling record (docs/customdomains.md, "Dangling records"): once the grace period is over, a domain that was
 * verified (`verifiedAt`: its routing and certificate stay, and its claim on the hostname) keeps
 * `observed.failingSince` while DNS still definitely disagrees; from `danglingAfterMs`
 * (milliseconds) after it, DNSVerified's reason is `DanglingRecord` and its message says that the
 * domain is still attached while DNS points elsewhere, and what to do. A resolver failure neither
 * starts nor ends it.
 */
export function freshDnsOutcome(
  verdict: Verdict,
  previous: CustomDomainStatus | undefined,
  base: DnsStatusBase,
  now: Date,
  graceMs = 0,
  danglingAfterMs = Number.POSITIVE_INFINITY,
): DnsOutcome {
  const old = findCondition(previous?.conditions, 'DNSVerified');
  const wasVerified = old?.status === 'True';
  if (wasVerified && !verdict.verified) {
    const standing = verifiedAnswerStands(verdict, old, previous, base, now, graceMs);
    if (standing) return standing;
  }
  const unverifiedSince = old && !wasVerified ? Date.parse(old.lastTransitionTime) : now.getTime();
  const nextCheckMs = nextDnsCheckDelayMs(verdict, now.getTime() - unverifiedSince);
  const verifiedAt = verifiedAtAfter(verdict, wasVerified, previous, now);
  const failingSince = failingSinceOf(verdict, previous, verifiedAt, now);
  const observed = observedOf(verdict, now, nextCheckMs, failingSince);
  return {
    condition: unverifiedCondition(verdict, old, failingSince, now, danglingAfterMs) ?? {
      type: 'DNSVerified',
      status: verdict.verified ? 'True' : 'False',
      reason: verdict.reason,
      message: verdict.message,
    },
    carried: withOptional(base, { observed }, verifiedAt),
    nextCheckMs,
  };
}

/** `verifiedAt` after a check: kept while verified or not verified again, set when it turns verified. */
function verifiedAtAfter(
  verdict: Verdict,
  wasVerified: boolean,
  previous: CustomDomainStatus | undefined,
  now: Date,
): string | undefined {
  const keep = wasVerified || !verdict.verified ? previous?.verifiedAt : undefined;
  return keep ?? (verdict.verified ? now.toISOString() : undefined);
}

/**
 * `observed.failingSince` after a check once the verified answer no longer stands: kept (or, for a
 * definite answer, started) while a domain that was verified is attached and DNS disagrees.
 */
function failingSinceOf(
  verdict: Verdict,
  previous: CustomDomainStatus | undefined,
  verifiedAt: string | undefined,
  now: Date,
): string | undefined {
  if (verdict.verified || verifiedAt === undefined) return undefined;
  const since = previous?.observed?.failingSince;
  return verdict.transient ? since : (since ?? now.toISOString());
}

/** DNSVerified for a dangling record, or undefined when the verdict's own condition applies. */
function unverifiedCondition(
  verdict: Verdict,
  old: { reason: string; message: string } | undefined,
  failingSince: string | undefined,
  now: Date,
  danglingAfterMs: number,
): ObservedState['dnsVerified'] | undefined {
  if (verdict.verified || failingSince === undefined) return undefined;
  // A resolver failure says nothing new about where the record points: the report stands.
  if (verdict.transient)
    return old?.reason === DANGLING_REASON
      ? { type: 'DNSVerified', status: 'False', reason: DANGLING_REASON, message: old.message }
      : undefined;
  if (now.getTime() - Date.parse(failingSince) < danglingAfterMs) return undefined;
  return {
    type: 'DNSVerified',
    status: 'False',
    reason: DANGLING_REASON,
    message: `DNS has not pointed at the platform since ${failingSince}; the latest check found: ${verdict.message} (${verdict.reason}). The domain is still attached (its routing, certificate and claim on the hostname remain) while its DNS points elsewhere: if the customer has moved the domain away, delete this CustomDomain to release the hostname; otherwise restore the record.`,
  };
}

function observedOf(verdict: Verdict, now: Date, nextCheckMs: number, failingSince?: string): ObservedDns {
  return {
    checkedAt: now.toISOString(),
    nextCheckAt: new Date(now.getTime() + nextCheckMs).toISOString(),
    result: verdict.reason,
    message: verdict.message,
    records: verdict.records,
    ...(failingSince !== undefined ? { failingSince } : {}),
  };
}

/**
 * The outcome while a verified domain's verified answer still stands despite a check that did not
 * confirm it, or undefined when the grace period is over (a definite answer only).
 */
function verifiedAnswerStands(
  verdict: Verdict,
  old: { reason: string },
  previous: CustomDomainStatus | undefined,
  base: DnsStatusBase,
  now: Date,
  graceMs: number,
): DnsOutcome | undefined {
  const since = verdict.transient
    ? previous?.observed?.failingSince
    : (previous?.observed?.failingSince ?? now.toISOString());
  const verifiedSince = previous?.verifiedAt ? ` since ${previous.verifiedAt}` : '';
  let nextCheckMs: number;
  let message: string;
  if (verdict.transient) {
    nextCheckMs = TRANSIENT_RETRY_MS;
    message = `Verified${verifiedSince}; the latest check failed (${verdict.reason}: ${verdict.message}). A resolver failure does not take a verified domain out of service; DNS is checked again every ${TRANSIENT_RETRY_MS / 1000} seconds.`;
  } else {
    const until = Date.parse(since ?? '') + graceMs;
    const leftMs = until - now.getTime();
    if (!(leftMs > 0)) return undefined;
    nextCheckMs = Math.max(1_000, Math.min(MISMATCH_RECHECK_MS, leftMs));
    message = `Verified${verifiedSince}, but the latest check found: ${verdict.message} (${verdict.reason}). The verified answer stands until ${new Date(until).toISOString()}; if DNS still disagrees then, the domain is no longer verified.`;
  }
  return {
    condition: { type: 'DNSVerified', status: 'True', reason: old.reason, message },
    carried: withOptional(
      base,
      { observed: observedOf(verdict, now, nextCheckMs, since) },
      previous?.verifiedAt,
    ),
    nextCheckMs,
  };
}

/**
 * `status` as the reconcile may trust it (docs/customdomains.md, "What status Portico trusts"): as it
 * is when it carries the operator's proof (`genuine`: status-proof.ts `isProvenStatus` with the key
 * and the CustomDomain's uid), else without the DNS outcome (the
 * DNSVerified condition, `verifiedAt` and `observed`), so that no decision rests on a DNS outcome
 * someone else wrote: the next DNS check is due at once (schedule.ts, `first`) and is judged as a
 * new domain's. A status with no DNS outcome at all is returned as it is. Pure.
 */
export function provenDnsStatus(
  status: CustomDomainStatus | undefined,
  genuine: (status: CustomDomainStatus) => boolean,
): CustomDomainStatus | undefined {
  if (!status) return status;
  const condition = findCondition(status.conditions, 'DNSVerified');
  if (!condition && !status.observed && status.verifiedAt === undefined) return status;
  // NotAccepted (Unknown) is written without an outcome and decides nothing.
  if (condition?.status === 'Unknown' && !status.observed && status.verifiedAt === undefined) return status;
  return genuine(status) ? status : withoutDnsOutcome(status);
}

/** `status` without its DNS outcome: the DNSVerified condition, `verifiedAt` and `observed`. Pure. */
export function withoutDnsOutcome(status: CustomDomainStatus): CustomDomainStatus {
  const rest = { ...status };
  delete rest.observed;
  delete rest.verifiedAt;
  return { ...rest, conditions: (status.conditions ?? []).filter((c) => c.type !== 'DNSVerified') };
}
