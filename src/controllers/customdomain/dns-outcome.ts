/**
 * The DNSVerified condition and the DNS part of the status, from a fresh verdict or carried over
 * from the last check while no new check is due. Pure.
 */
import type { CustomDomainStatus, RequiredDnsRecord } from '../../api/customdomain.js';
import { findCondition } from '../../kube/conditions.js';
import type { Verdict } from '../../dns/verdict.js';
import { nextDnsCheckDelayMs } from './schedule.js';
import type { ObservedState } from './status.js';

export interface DnsOutcome {
  condition: ObservedState['dnsVerified'];
  carried: Pick<CustomDomainStatus, 'dnsRecords' | 'observed' | 'verifiedAt' | 'lastVerifyRequest'>;
  /** Milliseconds until the next scheduled check. */
  nextCheckMs: number;
}

export interface DnsStatusBase {
  dnsRecords: RequiredDnsRecord[];
  lastVerifyRequest: string | undefined;
}

function withOptional(
  base: DnsStatusBase,
  extra: Pick<CustomDomainStatus, 'observed'>,
  verifiedAt: string | undefined,
): DnsOutcome['carried'] {
  return {
    dnsRecords: base.dnsRecords,
    ...extra,
    ...(base.lastVerifyRequest !== undefined ? { lastVerifyRequest: base.lastVerifyRequest } : {}),
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
 */
export function freshDnsOutcome(
  verdict: Verdict,
  previous: CustomDomainStatus | undefined,
  base: DnsStatusBase,
  now: Date,
): DnsOutcome {
  const old = findCondition(previous?.conditions, 'DNSVerified');
  const wasVerified = old?.status === 'True';
  const unverifiedSince = old && !wasVerified ? Date.parse(old.lastTransitionTime) : now.getTime();
  const nextCheckMs = nextDnsCheckDelayMs(verdict, now.getTime() - unverifiedSince);
  const keep = wasVerified || !verdict.verified ? previous?.verifiedAt : undefined;
  const verifiedAt = keep ?? (verdict.verified ? now.toISOString() : undefined);
  const observed = {
    checkedAt: now.toISOString(),
    nextCheckAt: new Date(now.getTime() + nextCheckMs).toISOString(),
    result: verdict.reason,
    message: verdict.message,
    records: verdict.records,
  };
  return {
    condition: {
      type: 'DNSVerified',
      status: verdict.verified ? 'True' : 'False',
      reason: verdict.reason,
      message: verdict.message,
    },
    carried: withOptional(base, { observed }, verifiedAt),
    nextCheckMs,
  };
}
