/**
 * DNS-01 by CNAME delegation (RFC 8555 §8.4; the same arrangement as cert-manager's
 * `cnameStrategy: Follow` and Cloudflare for SaaS's pre-validation). The customer adds, once,
 *
 *     _acme-challenge.<hostname>  CNAME  <label>.<challenge zone>
 *
 * and from then on the platform answers DNS-01 for the hostname by writing the TXT record at
 * `<label>.<challenge zone>`, a zone it serves itself (RFC 2136 updates, `update-client.ts`). The
 * certificate can then be issued before the hostname's own CNAME points at the platform: a live
 * site moves without a window where browsers see no valid certificate. Pure: no I/O.
 *
 * The label is derived from the namespace and the hostname: stable for as long as the domain lives in
 * that namespace (re-creating the CustomDomain keeps it, so the customer's record stays right) and
 * different for a claim of the same hostname from another namespace, whose certificate the customer's
 * record must not serve.
 */
import { createHash } from 'node:crypto';
import type { ChallengeDelegationStatus } from '../api/customdomain.js';
import type { RRsetAnswer } from './answers.js';

/** The label RFC 8555 §8.4 puts before the hostname for DNS-01. */
export const ACME_CHALLENGE_LABEL = '_acme-challenge';

/** Hex characters of SHA-256 kept in the label: 128 bits. */
const LABEL_HEX_CHARACTERS = 32;

/** `_acme-challenge.<hostname>`, where the CA looks for the TXT record (RFC 8555 §8.4). */
export function acmeChallengeName(hostname: string): string {
  return `${ACME_CHALLENGE_LABEL}.${hostname}`;
}

/**
 * The name in the challenge zone that `_acme-challenge.<hostname>` must be a CNAME of:
 * `<32 hex characters of SHA-256("<namespace>/<hostname>")>.<zone>`.
 *
 * @param zone the platform's challenge zone, e.g. `acme-challenges.example.net` (a trailing dot is dropped)
 * @param hostname the domain's normalized hostname (lowercase, A-labels)
 */
export function delegationTarget(zone: string, namespace: string, hostname: string): string {
  const label = createHash('sha256')
    .update(`${namespace}/${hostname}`)
    .digest('hex')
    .slice(0, LABEL_HEX_CHARACTERS);
  return `${label}.${zone.toLowerCase().replace(/\.$/, '')}`;
}

/** What the CNAME lookup of `_acme-challenge.<hostname>` says about the delegation. */
export type DelegationVerdict =
  /** The CNAME names the target: DNS-01 through the challenge zone can work. */
  | { kind: 'delegated' }
  /** No CNAME there (NXDOMAIN or no data): the customer has not taken the option. */
  | { kind: 'absent' }
  /** A CNAME to another name: DNS-01 would look there, not in the platform's zone. */
  | { kind: 'pointsElsewhere'; target: string }
  /** The lookup failed (SERVFAIL, timeout, ...): unknown, asked again at the next check. */
  | { kind: 'unknown'; answer: string };

/**
 * Judges the answer to the CNAME query of `_acme-challenge.<hostname>` against the target.
 * Names compare case-insensitively and without a trailing dot (RFC 4343).
 */
export function delegationVerdict(cname: RRsetAnswer, target: string): DelegationVerdict {
  const normalize = (name: string): string => name.toLowerCase().replace(/\.$/, '');
  switch (cname.kind) {
    case 'records': {
      const [first] = cname.values;
      if (first === undefined) return { kind: 'absent' };
      return normalize(first) === normalize(target)
        ? { kind: 'delegated' }
        : { kind: 'pointsElsewhere', target: normalize(first) };
    }
    case 'nxdomain':
    case 'nodata':
      return { kind: 'absent' };
    default:
      return { kind: 'unknown', answer: cname.kind };
  }
}

/** `verdict` as `status.observed.challengeDelegation` records it. */
export function delegationStatus(verdict: DelegationVerdict, target: string): ChallengeDelegationStatus {
  switch (verdict.kind) {
    case 'delegated':
      return { result: 'Delegated', target };
    case 'absent':
      return { result: 'Absent', target };
    case 'pointsElsewhere':
      return { result: 'PointsElsewhere', target, found: verdict.target };
    case 'unknown':
      return { result: 'Unknown', target, found: verdict.answer };
  }
}

/**
 * The verdict a recorded `status.observed.challengeDelegation` stands for, when it was made for
 * `target` (a status written for another namespace or zone counts as no verdict: undefined).
 */
export function recordedDelegation(
  status: ChallengeDelegationStatus | undefined,
  target: string,
): DelegationVerdict | undefined {
  if (status === undefined || status.target !== target) return undefined;
  switch (status.result) {
    case 'Delegated':
      return { kind: 'delegated' };
    case 'Absent':
      return { kind: 'absent' };
    case 'PointsElsewhere':
      return { kind: 'pointsElsewhere', target: status.found ?? '' };
    case 'Unknown':
      return { kind: 'unknown', answer: status.found ?? '' };
  }
}
