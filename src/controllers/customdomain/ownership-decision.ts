/**
 * Whether a CustomDomain must show the ownership TXT record (src/dns/ownership.ts): the decision is
 * made once per CustomDomain and hostname and then kept in `status.ownership`. Pure.
 */
import type { CustomDomainStatus, OwnershipStatus } from '../../api/customdomain.js';
import { ownershipRequirement, type HostnameRelease, type OwnershipPolicy } from '../../dns/ownership.js';

/**
 * The decision that stands for `hostname` (normalized) without asking anything: the one in
 * `status` when made for this hostname; `VerifiedBefore` (not required) for a domain verified
 * before ownership verification existed (a `verifiedAt` and no decision); undefined when it must
 * be made now (`decideOwnership`).
 */
export function standingOwnership(
  status: CustomDomainStatus | undefined,
  hostname: string,
): OwnershipStatus | undefined {
  const previous = status?.ownership;
  if (previous?.hostname === hostname) return previous;
  if (!previous && status?.verifiedAt !== undefined) {
    return {
      hostname,
      required: false,
      reason: 'VerifiedBefore',
      message: 'Verified before ownership verification was in place; nothing to show.',
    };
  }
  return undefined;
}

/**
 * A new decision for a domain of `namespace` (ownership.ts, `ownershipRequirement`).
 *
 * @param release the hostname's last release on record (read only for `recently-claimed`)
 * @param recentMs milliseconds within which a release by another project requires the record
 */
export function decideOwnership(
  hostname: string,
  namespace: string,
  policy: OwnershipPolicy,
  release: HostnameRelease | undefined,
  recentMs: number,
  now: Date,
): OwnershipStatus {
  return { hostname, ...ownershipRequirement(policy, namespace, release, recentMs, now) };
}
