/**
 * Whether a CustomDomain must show the ownership TXT record (src/dns/ownership.ts): the decision is
 * made once per CustomDomain and hostname and then kept in `status.ownership`. Pure.
 */
import type { CustomDomainStatus, OwnershipStatus } from '../../api/customdomain.js';
import {
  ownershipRequirement,
  type ClaimantNamespace,
  type HostnameRelease,
  type OwnershipPolicy,
} from '../../dns/ownership.js';

/**
 * The decision that stands for `hostname` (normalized) without asking anything: the one in `status`
 * when made for this hostname and genuine (`genuine`: it carries the operator's proof, i.e.
 * `isOwnershipProof` with its key and the CustomDomain's uid); undefined when it must be made now
 * (`decideOwnership`). Nothing in status counts without the proof: not a decision written by anyone
 * else (any status writer could say `required: false`, or add a `verifiedAt`), and not a `verifiedAt`
 * alone.
 */
export function standingOwnership(
  status: CustomDomainStatus | undefined,
  hostname: string,
  genuine: (decision: OwnershipStatus) => boolean,
): OwnershipStatus | undefined {
  const previous = status?.ownership;
  return previous?.hostname === hostname && genuine(previous) ? previous : undefined;
}

/**
 * A new decision for a domain of `namespace` (its name and uid; ownership.ts, `ownershipRequirement`).
 *
 * @param release the hostname's last release on record (read only for `recently-claimed`)
 * @param recentMs milliseconds within which a release by another project requires the record
 */
export function decideOwnership(
  hostname: string,
  namespace: ClaimantNamespace,
  policy: OwnershipPolicy,
  release: HostnameRelease | undefined,
  recentMs: number,
  now: Date,
): OwnershipStatus {
  return { hostname, ...ownershipRequirement(policy, namespace, release, recentMs, now) };
}
