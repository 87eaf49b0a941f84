/**
 * The DNS phase of a CustomDomain reconcile: whether the domain must show the ownership TXT record,
 * the records it must publish, and, when a check is due (schedule.ts dnsCheckDue) the resolver's
 * answers judged by src/dns/verdict.ts; otherwise the outcome its status carries (dns-outcome.ts).
 * A verify request clears the order's failure (a fresh attempt, docs/customdomains.md "Verify and
 * re-verify"). I/O: the DNS resolver and the ownership store.
 */
import type { Logger } from 'pino';
import {
  VERIFY_REQUESTED_AT_ANNOTATION,
  type CustomDomain,
  type OwnershipStatus,
  type RequiredDnsRecord,
} from '../../../api/customdomain.js';
import { isIPv4, isIPv6 } from 'node:net';
import { normalizeDnsName, type RRsetAnswer } from '../../../dns/answers.js';
import { delegationRecord, isApex, requiredDnsRecords } from '../../../dns/records.js';
import {
  acmeChallengeName,
  delegationStatus,
  delegationTarget,
  delegationVerdict,
  recordedDelegation,
  type DelegationVerdict,
} from '../../../dns/challenge-delegation.js';
import { verifyApex, verifySubdomain, type Verdict } from '../../../dns/verdict.js';
import {
  isOwnershipProof,
  ownershipProof,
  ownershipRecord,
  ownershipRecordName,
  ownershipToken,
  verifyOwnership,
  withOwnership,
} from '../../../dns/ownership.js';
import { isProvenStatus } from '../status-proof.js';
import { findCondition } from '../../../kube/conditions.js';
import {
  carriedDnsOutcome,
  freshDnsOutcome,
  provenDnsStatus,
  withoutDnsOutcome,
  type DnsOutcome,
  type DnsStatusBase,
} from '../dns-outcome.js';
import { decideOwnership, standingOwnership } from '../ownership-decision.js';
import type { ChallengeDelegation } from './certificate-decision.js';
import type { DnsCheckReason } from '../schedule.js';
import type { CustomDomainReconcilerDeps } from './deps.js';

/**
 * What the DNS phase found: the outcome (condition and the DNS part of the status), and with a
 * DNS-01 challenge zone configured, the delegation of `_acme-challenge.<hostname>` (`target`, the
 * name it must be a CNAME of, and the verdict of the last check; undefined before the first).
 */
export interface DnsPhaseOutcome extends DnsOutcome {
  readonly delegation?: ChallengeDelegation;
}

/** The DNS phase: ownership decision, the DNS check when due (else the carried outcome), the verdict. */
export class DnsPhase {
  readonly #d: CustomDomainReconcilerDeps;

  constructor(deps: CustomDomainReconcilerDeps) {
    this.#d = deps;
  }

  /**
   * `domain` as the reconcile may trust it: its DNS outcome (DNSVerified, `verifiedAt`, `observed`)
   * kept only when it carries the operator's proof (dns-outcome.ts `provenDnsStatus`), so that a
   * DNS outcome written by anyone else gates nothing and DNS is checked again at once.
   *
   * @throws OwnershipKeyError, ApiException as `OwnershipStore.key`
   */
  async trusted(domain: CustomDomain): Promise<CustomDomain> {
    const key = await this.#d.ownership.store.key();
    const uid = domain.metadata.uid ?? '';
    const hostname = normalizeDnsName(domain.spec.hostname);
    const status = provenDnsStatus(domain.status, (s) => isProvenStatus(key, uid, hostname, s));
    return status === domain.status ? domain : { ...domain, ...(status ? { status } : {}) };
  }

  /**
   * The DNS outcome of `domain` (as `trusted` returns it; the reconcile signs the status it writes,
   * status-proof.ts): checked now when `due` (schedule.ts `dnsCheckDue`, computed once by
   * the reconcile, which also acts on a verify request by it), else the one its status carries.
   */
  async verify(
    domain: CustomDomain,
    key: string,
    due: DnsCheckReason | undefined,
    now: Date,
    log: Logger,
  ): Promise<DnsPhaseOutcome> {
    const hostname = normalizeDnsName(domain.spec.hostname);
    const requested = domain.metadata.annotations?.[VERIFY_REQUESTED_AT_ANNOTATION];
    const ownershipKey = await this.#d.ownership.store.key();
    const uid = domain.metadata.uid ?? '';
    const ownership = await this.#ownershipDecision(domain, hostname, now, ownershipKey);
    const pending = ownership.required && ownership.verifiedAt === undefined;
    const token = pending ? ownershipToken(ownershipKey, uid, hostname) : undefined;
    const { records, target } = this.#records(domain, hostname);
    const base: DnsStatusBase = {
      dnsRecords: token === undefined ? records : [...records, ownershipRecord(hostname, token)],
      lastVerifyRequest: requested ?? domain.status?.lastVerifyRequest,
      ownership,
    };
    // A verified outcome does not stand while the ownership record is asked for and not found (an
    // ownership decision made again): the domain is judged as a new one.
    const previous = pending ? unverifiedBefore(domain.status) : domain.status;
    const carried = due ? undefined : carriedDnsOutcome(previous, base, now);
    if (carried)
      return withCarriedDelegation(carried, hostname, target, pendingOwnership(base.ownership, hostname));
    // Re-verify (docs/customdomains.md, "Verify and re-verify"): a verified domain whose order failed gets a fresh attempt.
    if (due === 'requested') this.#d.tracker.clearFailure(key);
    const [hostnameVerdict, delegation] = await Promise.all([
      this.#lookupVerdict(hostname, this.#d.platformCnameTarget),
      this.#lookupDelegation(hostname, target, domain),
    ]);
    let verdict = hostnameVerdict;
    if (token !== undefined) {
      const txt = await this.#d.resolver.lookupTxt(ownershipRecordName(hostname));
      const shown = verifyOwnership(hostname, token, txt);
      verdict = withOwnership(verdict, shown);
      if (shown.shown) {
        log.info('ownership TXT record found');
        base.ownership = withOwnershipProof(ownershipKey, uid, {
          ...ownership,
          verifiedAt: now.toISOString(),
        });
        base.dnsRecords = records;
      }
    }
    this.#d.metrics.dnsChecksTotal.inc({ reason: verdict.reason });
    log.debug({ due, verdict: verdict.reason }, 'DNS checked');
    const outcome = freshDnsOutcome(
      verdict,
      previous,
      base,
      now,
      this.#d.dnsMismatchGraceMs,
      this.#d.danglingAfterMs,
    );
    return withFreshDelegation(
      outcome,
      hostname,
      target,
      delegation,
      pendingOwnership(base.ownership, hostname),
    );
  }

  /**
   * The records for `status.dnsRecords`, and with a DNS-01 challenge zone the delegation target of
   * the domain (`challenge-delegation.ts delegationTarget`) and its optional record.
   */
  #records(domain: CustomDomain, hostname: string): { records: RequiredDnsRecord[]; target?: string } {
    const required = requiredDnsRecords(hostname, this.#d.platformCnameTarget, this.#d.apexAddresses);
    const zone = this.#d.dns01ChallengeZone;
    if (zone === undefined) return { records: required };
    const target = delegationTarget(zone, domain.metadata.namespace, hostname);
    return { records: [...required, delegationRecord(hostname, target)], target };
  }

  /**
   * The verdict on the CNAME at `_acme-challenge.<hostname>` (challenge-delegation.ts). A failed
   * lookup keeps the verdict the status holds, so one SERVFAIL does not take DNS-01 away.
   */
  async #lookupDelegation(
    hostname: string,
    target: string | undefined,
    domain: CustomDomain,
  ): Promise<DelegationVerdict | undefined> {
    if (target === undefined) return undefined;
    const answer = await this.#d.resolver.lookupCname(acmeChallengeName(hostname));
    const verdict = delegationVerdict(answer, target);
    if (verdict.kind !== 'unknown') return verdict;
    return recordedDelegation(domain.status?.observed?.challengeDelegation, target) ?? verdict;
  }

  /**
   * Whether `domain` must show the ownership TXT record: the decision in its status when made for
   * this hostname; else made now (docs/customdomains.md, "Ownership verification"). A domain
   * verified before ownership verification existed (no decision in its status) is not asked.
   *
   * @throws ApiException when the release record cannot be read (the work queue retries)
   */
  async #ownershipDecision(
    domain: CustomDomain,
    hostname: string,
    now: Date,
    key: Buffer,
  ): Promise<OwnershipStatus> {
    const uid = domain.metadata.uid ?? '';
    const standing = standingOwnership(domain.status, hostname, (o) =>
      isOwnershipProof(key, uid, o, o.proof),
    );
    if (standing) return standing;
    const { policy, recentMs, store } = this.#d.ownership;
    const release = policy === 'recently-claimed' ? await store.lastRelease(hostname) : undefined;
    const namespace = {
      name: domain.metadata.namespace,
      uid: this.#d.view.namespaceUid(domain.metadata.namespace),
    };
    const decided = decideOwnership(hostname, namespace, policy, release, recentMs, now);
    return withOwnershipProof(key, uid, decided);
  }

  async #lookupVerdict(hostname: string, target: string): Promise<Verdict> {
    const apex = isApex(hostname);
    const answers = await this.#d.resolver.lookupHostname(hostname, { otherRecords: !apex });
    if (!apex) return verifySubdomain(hostname, target, answers);
    const configured = this.#d.apexAddresses;
    const targetAddresses =
      configured.length > 0
        ? {
            a: recordsOrNodata(configured.filter((ip) => isIPv4(ip))),
            aaaa: recordsOrNodata(configured.filter((ip) => isIPv6(ip))),
          }
        : await this.#d.resolver.lookupAddresses(target);
    return verifyApex(hostname, target, answers, targetAddresses);
  }
}

/** A carried outcome with the delegation verdict its status records (none without a challenge zone). */
function withCarriedDelegation(
  carried: DnsOutcome,
  hostname: string,
  target: string | undefined,
  ownershipPending: string | undefined,
): DnsPhaseOutcome {
  if (target === undefined) return carried;
  const verdict = recordedDelegation(carried.carried.observed?.challengeDelegation, target);
  return { ...carried, delegation: challengeDelegation(hostname, target, verdict, ownershipPending) };
}

/** The name of the ownership TXT record while it is asked for and not found; else undefined. */
function pendingOwnership(ownership: OwnershipStatus | undefined, hostname: string): string | undefined {
  return ownership?.required === true && ownership.verifiedAt === undefined
    ? ownershipRecordName(hostname)
    : undefined;
}

function challengeDelegation(
  hostname: string,
  target: string,
  verdict: DelegationVerdict | undefined,
  ownershipPending: string | undefined,
): ChallengeDelegation {
  return {
    name: acmeChallengeName(hostname),
    target,
    verdict,
    ...(ownershipPending !== undefined ? { ownershipPending } : {}),
  };
}

/** A fresh outcome with the delegation just checked, recorded in `observed.challengeDelegation`. */
function withFreshDelegation(
  outcome: DnsOutcome,
  hostname: string,
  target: string | undefined,
  verdict: DelegationVerdict | undefined,
  ownershipPending: string | undefined,
): DnsPhaseOutcome {
  if (target === undefined || verdict === undefined) return outcome;
  const observed = outcome.carried.observed;
  return {
    ...outcome,
    carried: {
      ...outcome.carried,
      ...(observed
        ? { observed: { ...observed, challengeDelegation: delegationStatus(verdict, target) } }
        : {}),
    },
    delegation: challengeDelegation(hostname, target, verdict, ownershipPending),
  };
}

/**
 * `status` without a verified DNS outcome (DNSVerified True, or a `verifiedAt`), for a domain that
 * must still show the ownership record; an unverified outcome stays (its schedule counts from it).
 */
function unverifiedBefore(status: CustomDomain['status']): CustomDomain['status'] {
  if (!status) return status;
  const verified = findCondition(status.conditions, 'DNSVerified')?.status === 'True';
  return verified || status.verifiedAt !== undefined ? withoutDnsOutcome(status) : status;
}

/** `decision` with the operator's proof over it (src/dns/ownership.ts `ownershipProof`). */
function withOwnershipProof(key: Buffer, uid: string, decision: OwnershipStatus): OwnershipStatus {
  const { hostname, required, reason, message, verifiedAt } = decision;
  const fields = { hostname, required, reason, message, ...(verifiedAt ? { verifiedAt } : {}) };
  return { ...fields, proof: ownershipProof(key, uid, fields) };
}

export function recordsOrNodata(values: string[]): RRsetAnswer {
  return values.length > 0 ? { kind: 'records', values } : { kind: 'nodata' };
}
