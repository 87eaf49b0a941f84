/**
 * DNS verification verdicts for a custom domain (docs/customdomains.md, "DNS instructions" and
 * "Conditions and reasons"; docs/troubleshooting.md, "Verification fails"). Pure: reads answers,
 * returns a verdict.
 *
 * - A subdomain is verified by a CNAME whose value equals the platform target exactly
 *   (case-insensitive, trailing dot ignored, RFC 4343). Any other record at the name (A, AAAA, MX,
 *   TXT, NS) is a conflict, named as such: a CNAME shares its name with no other data (RFC 1034
 *   §3.6.2).
 * - An apex cannot hold a CNAME (RFC 1034 §3.6.2, RFC 2181 §10.1); its ALIAS/ANAME shows in DNS as
 *   A/AAAA records, which must equal the target's addresses. Any address beside them is a conflict.
 */
import type { ObservedRecord } from '../api/customdomain.js';
import { normalizeDnsName, recordValues, type HostnameAnswers, type RRsetAnswer } from './answers.js';

/**
 * Why a domain is, or is not, verified. UpperCamelCase, used as the DNSVerified condition reason.
 * `OwnershipNotVerified`: the record matches, but the ownership TXT record the platform asks for is
 * not shown (ownership.ts).
 */
export const VERDICT_REASONS = [
  'RecordMatches',
  'RecordNotFound',
  'ConflictingRecord',
  'CNAMEMismatch',
  'AddressMismatch',
  'DNSServerFailure',
  'DNSTimeout',
  'DNSError',
  'TargetUnresolvable',
  'OwnershipNotVerified',
] as const;

/** One of VERDICT_REASONS. */
export type VerdictReason = (typeof VERDICT_REASONS)[number];

export interface Verdict {
  verified: boolean;
  reason: VerdictReason;
  /** A sentence for a person: what DNS returned, what is wanted, what to do. */
  message: string;
  /** The records DNS returned for the hostname. */
  records: ObservedRecord[];
  /** True when the failure is the resolver's, not the customer's records: retry sooner. */
  transient: boolean;
}

/**
 * The note on DNS propagation that the message of every verdict that is not verified carries, so
 * that a dashboard showing the message as it is tells the customer to wait (docs/customdomains.md,
 * "DNS instructions").
 */
export const PROPAGATION_NOTE =
  'DNS changes can take up to 48 hours to propagate; most resolve within minutes.';

function observedRecords(hostname: string, answers: HostnameAnswers): ObservedRecord[] {
  const out: ObservedRecord[] = [];
  for (const value of recordValues(answers.cname)) out.push({ type: 'CNAME', name: hostname, value });
  for (const value of recordValues(answers.a)) out.push({ type: 'A', name: hostname, value });
  for (const value of recordValues(answers.aaaa)) out.push({ type: 'AAAA', name: hostname, value });
  if (answers.others !== undefined) {
    for (const value of recordValues(answers.others.mx)) out.push({ type: 'MX', name: hostname, value });
    for (const value of recordValues(answers.others.txt)) out.push({ type: 'TXT', name: hostname, value });
    for (const value of recordValues(answers.others.ns)) out.push({ type: 'NS', name: hostname, value });
  }
  return out;
}

/** Record types a CNAME cannot share its name with, as read here (RFC 1034 §3.6.2). */
const CNAME_CONFLICTS: ReadonlySet<string> = new Set(['A', 'AAAA', 'MX', 'TXT', 'NS']);

function describe(records: readonly ObservedRecord[]): string {
  return records.map((r) => `${r.type} ${r.name} -> ${r.value}`).join(', ');
}

/** A verdict for a resolver failure, or undefined when every answer is usable. */
function resolverFailure(
  hostname: string,
  answers: readonly RRsetAnswer[],
  records: ObservedRecord[],
): Verdict | undefined {
  const failed = answers.find((a) => a.kind === 'servfail' || a.kind === 'timeout' || a.kind === 'error');
  if (!failed) return undefined;
  const base = { verified: false, records, transient: true } as const;
  switch (failed.kind) {
    case 'servfail':
      return {
        ...base,
        reason: 'DNSServerFailure',
        message: `The DNS server answered SERVFAIL for ${hostname}: the domain's nameservers are failing or misconfigured (DNSSEC, lame delegation). Portico will check again. ${PROPAGATION_NOTE}`,
      };
    case 'timeout':
      return {
        ...base,
        reason: 'DNSTimeout',
        message: `No DNS answer for ${hostname} within the timeout. Portico will check again. ${PROPAGATION_NOTE}`,
      };
    case 'error':
      return {
        ...base,
        reason: 'DNSError',
        message: `DNS lookup of ${hostname} failed (${failed.code}). Portico will check again. ${PROPAGATION_NOTE}`,
      };
  }
}

/**
 * The verdict for a subdomain: a CNAME to `target` is wanted.
 *
 * @param hostname the customer's hostname, normalized
 * @param target the platform's CNAME target ({platform_cname_target}), normalized
 * @param answers the CNAME, A and AAAA answers for `hostname`, and its MX, TXT and NS answers when
 *   read (`HostnameAnswers.others`); a failed answer among those is ignored
 */
export function verifySubdomain(hostname: string, target: string, answers: HostnameAnswers): Verdict {
  const records = observedRecords(hostname, answers);
  const wanted = `CNAME ${hostname} -> ${target}`;
  const cnames = recordValues(answers.cname).map(normalizeDnsName);
  if (cnames.length > 0) {
    if (cnames.every((c) => c === normalizeDnsName(target))) {
      return {
        verified: true,
        reason: 'RecordMatches',
        message: `Found ${wanted}.`,
        records,
        transient: false,
      };
    }
    const found = records.filter((r) => r.type === 'CNAME');
    return {
      verified: false,
      reason: 'CNAMEMismatch',
      message: `Found ${describe(found)}, but ${wanted} is wanted: change the CNAME's value to ${target} exactly. ${PROPAGATION_NOTE}`,
      records,
      transient: false,
    };
  }
  const failure = resolverFailure(hostname, [answers.cname], records);
  if (failure) return failure;
  // No CNAME at the name: any other record there conflicts with the CNAME that is wanted, since a
  // name with a CNAME holds no other data (RFC 1034 §3.6.2); DNS providers refuse to add the CNAME.
  const conflicting = records.filter((r) => CNAME_CONFLICTS.has(r.type));
  if (conflicting.length > 0) {
    const plural = conflicting.length > 1 ? 's' : '';
    const delegated = conflicting.some((r) => r.type === 'NS')
      ? ` The NS record${conflicting.filter((r) => r.type === 'NS').length > 1 ? 's make' : ' makes'} ${hostname} a zone of its own, whose apex cannot hold a CNAME: remove the delegation, or create ALIAS (or ANAME) ${hostname} -> ${target} in that zone and attach it as an apex.`
      : '';
    return {
      verified: false,
      reason: 'ConflictingRecord',
      message: `Found ${describe(conflicting)} where ${wanted} is wanted: a name with a CNAME can have no other records (RFC 1034 §3.6.2), so delete the conflicting record${plural} (move mail or TXT records elsewhere first if they are still needed) and create the CNAME.${delegated} ${PROPAGATION_NOTE}`,
      records,
      transient: false,
    };
  }
  const nameState = answers.cname.kind === 'nxdomain' ? 'does not exist (NXDOMAIN)' : 'has no CNAME record';
  return {
    verified: false,
    reason: 'RecordNotFound',
    message: `${hostname} ${nameState}: create ${wanted}. ${PROPAGATION_NOTE}`,
    records,
    transient: false,
  };
}

/**
 * The verdict for an apex: its A/AAAA records (an ALIAS/ANAME as DNS shows it) must equal the
 * addresses of the platform target.
 *
 * @param hostname the apex, normalized
 * @param target the platform's target, normalized
 * @param answers the CNAME, A and AAAA answers for `hostname`
 * @param targetAddresses the target's A and AAAA answers, or a configured list of apex addresses
 */
export function verifyApex(
  hostname: string,
  target: string,
  answers: HostnameAnswers,
  targetAddresses: { a: RRsetAnswer; aaaa: RRsetAnswer },
): Verdict {
  const records = observedRecords(hostname, answers);
  const wanted = `ALIAS (or ANAME) ${hostname} -> ${target}`;
  const failure = resolverFailure(hostname, [answers.a, answers.aaaa], records);
  if (failure) return failure;
  const allowed = new Set([...recordValues(targetAddresses.a), ...recordValues(targetAddresses.aaaa)]);
  if (allowed.size === 0) {
    return {
      verified: false,
      reason: 'TargetUnresolvable',
      message: `The platform target ${target} has no A or AAAA records, so ${hostname} cannot be compared with it. This is the platform's problem, not the customer's; Portico will check again. ${PROPAGATION_NOTE}`,
      records,
      transient: true,
    };
  }
  const addresses = records.filter((r) => r.type === 'A' || r.type === 'AAAA');
  if (addresses.length === 0) {
    return {
      verified: false,
      reason: 'RecordNotFound',
      message: `${hostname} has no A or AAAA records: create ${wanted}; not every DNS provider supports ALIAS/ANAME at the apex. ${PROPAGATION_NOTE}`,
      records,
      transient: false,
    };
  }
  const stray = addresses.filter((r) => !allowed.has(r.value));
  if (stray.length > 0) {
    return {
      verified: false,
      reason: stray.length === addresses.length ? 'AddressMismatch' : 'ConflictingRecord',
      message: `Found ${describe(stray)}, which ${stray.length > 1 ? 'are' : 'is'} not an address of ${target} (${[...allowed].join(', ')}): remove ${stray.length > 1 ? 'them' : 'it'} and create ${wanted}. ${PROPAGATION_NOTE}`,
      records,
      transient: false,
    };
  }
  return {
    verified: true,
    reason: 'RecordMatches',
    message: `The addresses of ${hostname} (${addresses.map((r) => r.value).join(', ')}) are those of ${target}.`,
    records,
    transient: false,
  };
}
