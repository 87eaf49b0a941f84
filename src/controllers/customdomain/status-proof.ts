/**
 * The operator's proof of what it wrote into a CustomDomain's status and later decides by
 * (docs/customdomains.md, "What status Portico trusts"). Pure: no I/O; the key is an input.
 *
 * The DNS outcome (`DNSVerified`, `status.verifiedAt`, `status.observed`) is carried from one
 * reconcile to the next while no check is due, and it gates the routing and the certificate order;
 * the `Accepted` condition and `status.certificate` tell the claim rules whether a domain serves its
 * hostname (claim-precedence.ts), and the `Accepted` condition latches the deploy gate and keeps a
 * holder's claim past its grace (acceptance.ts `acceptedBefore`). Status can be written by anyone allowed to update
 * `customdomains/status`, so the operator's status carries `status.observed.proof`: an HMAC-SHA256
 * (RFC 2104) by the operator's ownership key (src/dns/ownership.ts) over the CustomDomain's uid, its
 * hostname and the fields below. A status whose proof does not match (written by someone else,
 * changed, copied from another CustomDomain, or written before proofs existed) has its DNS outcome
 * checked again as for a new domain, does not make its domain serve its hostname, and its
 * `Accepted=True` counts only where a routing object of the operator's shows the domain accepted.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CustomDomainStatus } from '../../api/customdomain.js';
import { OWNERSHIP_KEY_MIN_BYTES } from '../../dns/ownership.js';
import { findCondition } from '../../kube/conditions.js';

/** The fields of a status a proof covers; the messages are not covered (they decide nothing). */
export interface StatusProofFields {
  hostname: string;
  /** The Accepted condition's status. */
  accepted: string;
  /** The DNSVerified condition's status and reason. */
  verified: string;
  reason: string;
  /** RFC 3339 times of `status.verifiedAt` and `status.observed`. */
  verifiedAt?: string | undefined;
  checkedAt?: string | undefined;
  nextCheckAt?: string | undefined;
  failingSince?: string | undefined;
  /** `status.observed.result`. */
  result?: string | undefined;
  /** `status.observed.challengeDelegation`: result, target and found, as written. */
  delegation?: { result: string; target: string; found?: string | undefined } | undefined;
  /** `status.certificate`: the names and the end of validity (RFC 3339) the claim rules read. */
  certificate?: { dnsNames: readonly string[]; notAfter: string } | undefined;
}

/**
 * The proof of `fields`: base64url of HMAC-SHA256(key, `portico-status/v1`, uid, and each field of
 * `StatusProofFields` in its order, one per line; an absent field is an empty line).
 *
 * @param key the operator's ownership key, at least 32 bytes
 * @param uid the CustomDomain's metadata.uid
 * @throws RangeError for a key shorter than 32 bytes or an empty uid
 */
export function statusProof(key: Uint8Array, uid: string, fields: StatusProofFields): string {
  if (key.length < OWNERSHIP_KEY_MIN_BYTES)
    throw new RangeError(`the ownership key must be at least ${OWNERSHIP_KEY_MIN_BYTES} bytes`);
  if (uid === '') throw new RangeError('a status proof needs the CustomDomain uid');
  const d = fields.delegation;
  const c = fields.certificate;
  const lines = [
    'portico-status/v1',
    uid,
    fields.hostname,
    fields.accepted,
    fields.verified,
    fields.reason,
    fields.verifiedAt ?? '',
    fields.checkedAt ?? '',
    fields.nextCheckAt ?? '',
    fields.failingSince ?? '',
    fields.result ?? '',
    d ? `${d.result} ${d.target} ${d.found ?? ''}` : '',
    c ? `${c.dnsNames.join(',')} ${c.notAfter}` : '',
  ];
  return createHmac('sha256', key).update(lines.join('\n')).digest('base64url');
}

/**
 * Whether `proof` is `statusProof(key, uid, fields)` (compared in constant time). False for a
 * missing proof, an empty uid or a short key; never throws.
 */
export function isStatusProof(
  key: Uint8Array,
  uid: string,
  fields: StatusProofFields,
  proof: string | undefined,
): boolean {
  if (proof === undefined || uid === '' || key.length < OWNERSHIP_KEY_MIN_BYTES) return false;
  const expected = Buffer.from(statusProof(key, uid, fields));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** What a proof covers of `status`, for the CustomDomain of `hostname` (normalized). */
export function statusFields(hostname: string, status: CustomDomainStatus): StatusProofFields {
  const observed = status.observed;
  const delegation = observed?.challengeDelegation;
  const dnsVerified = findCondition(status.conditions, 'DNSVerified');
  const certificate = status.certificate;
  return {
    hostname,
    accepted: findCondition(status.conditions, 'Accepted')?.status ?? '',
    verified: dnsVerified?.status ?? '',
    reason: dnsVerified?.reason ?? '',
    verifiedAt: status.verifiedAt,
    checkedAt: observed?.checkedAt,
    nextCheckAt: observed?.nextCheckAt,
    failingSince: observed?.failingSince,
    result: observed?.result,
    ...(delegation
      ? { delegation: { result: delegation.result, target: delegation.target, found: delegation.found } }
      : {}),
    ...(certificate
      ? { certificate: { dnsNames: certificate.dnsNames, notAfter: certificate.notAfter } }
      : {}),
  };
}

/**
 * `status` with the operator's proof in `observed.proof` (replacing any); as it is when it has no
 * `observed` (a domain not accepted: nothing there to carry) or the uid is empty.
 *
 * @param key the operator's ownership key, at least 32 bytes
 */
export function withStatusProof(
  key: Uint8Array,
  uid: string,
  hostname: string,
  status: CustomDomainStatus,
): CustomDomainStatus {
  if (!status.observed || uid === '') return status;
  return {
    ...status,
    observed: { ...status.observed, proof: statusProof(key, uid, statusFields(hostname, status)) },
  };
}

/** Whether `status` carries the operator's proof for the CustomDomain `uid` of `hostname`. */
export function isProvenStatus(
  key: Uint8Array,
  uid: string,
  hostname: string,
  status: CustomDomainStatus | undefined,
): boolean {
  return (
    status !== undefined && isStatusProof(key, uid, statusFields(hostname, status), status.observed?.proof)
  );
}
