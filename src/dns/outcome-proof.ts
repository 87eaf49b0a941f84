/**
 * The operator's proof of a DNS outcome it wrote into a CustomDomain's status (docs/customdomains.md,
 * "What status Portico trusts"). Pure: no I/O; the key is an input.
 *
 * The DNS outcome (`DNSVerified`, `status.verifiedAt`, `status.observed`) is carried from one
 * reconcile to the next while no check is due, and it gates the routing and the certificate order.
 * Status can be written by anyone allowed to update `customdomains/status`, so the outcome carries
 * `status.observed.proof`: an HMAC-SHA256 (RFC 2104) by the operator's ownership key
 * (src/dns/ownership.ts) over the CustomDomain's uid, its hostname and the fields below. An outcome
 * whose proof does not match (written by someone else, changed, copied from another CustomDomain, or
 * written before proofs existed) is not carried: DNS is checked again as for a new domain.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { OWNERSHIP_KEY_MIN_BYTES } from './ownership.js';

/** The fields of a DNS outcome a proof covers; the messages are not covered (they decide nothing). */
export interface DnsOutcomeFields {
  hostname: string;
  /** The DNSVerified condition's status and reason. */
  verified: 'True' | 'False' | 'Unknown';
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
}

/**
 * The proof of `outcome`: base64url of HMAC-SHA256(key, `portico-dns-outcome/v1`, uid, and each
 * field of `DnsOutcomeFields` in its order, one per line; an absent field is an empty line).
 *
 * @param key the operator's ownership key, at least 32 bytes
 * @param uid the CustomDomain's metadata.uid
 * @throws RangeError for a key shorter than 32 bytes or an empty uid
 */
export function dnsOutcomeProof(key: Uint8Array, uid: string, outcome: DnsOutcomeFields): string {
  if (key.length < OWNERSHIP_KEY_MIN_BYTES)
    throw new RangeError(`the ownership key must be at least ${OWNERSHIP_KEY_MIN_BYTES} bytes`);
  if (uid === '') throw new RangeError('a DNS outcome proof needs the CustomDomain uid');
  const d = outcome.delegation;
  const fields = [
    'portico-dns-outcome/v1',
    uid,
    outcome.hostname,
    outcome.verified,
    outcome.reason,
    outcome.verifiedAt ?? '',
    outcome.checkedAt ?? '',
    outcome.nextCheckAt ?? '',
    outcome.failingSince ?? '',
    outcome.result ?? '',
    d ? `${d.result} ${d.target} ${d.found ?? ''}` : '',
  ];
  return createHmac('sha256', key).update(fields.join('\n')).digest('base64url');
}

/**
 * Whether `proof` is `dnsOutcomeProof(key, uid, outcome)` (compared in constant time). False for a
 * missing proof, an empty uid or a short key; never throws.
 */
export function isDnsOutcomeProof(
  key: Uint8Array,
  uid: string,
  outcome: DnsOutcomeFields,
  proof: string | undefined,
): boolean {
  if (proof === undefined || uid === '' || key.length < OWNERSHIP_KEY_MIN_BYTES) return false;
  const expected = Buffer.from(dnsOutcomeProof(key, uid, outcome));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
