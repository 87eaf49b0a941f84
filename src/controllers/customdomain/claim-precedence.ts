/**
 * Which CustomDomain a HostnameClaim should name (docs/customdomains.md, "Who holds a hostname"). Pure:
 * every input is a value, the clock included; hostname-claims.ts reads the claim, its holder and the
 * rivals and acts on the verdict.
 *
 * Two rules on top of "the first create wins":
 *
 * - A claim counts (is *honoured*) only if the CustomDomain it names exists with the same uid and
 *   its spec.hostname is the claim's hostname. Any other claim (its holder gone, created again, or
 *   a claim made by hand for a domain of another name) is replaced like the claim of a vanished
 *   holder.
 * - A domain that serves the hostname (`servesHostname`) comes first: when the claim is missing or
 *   names a domain that does not serve it, the serving domain takes it, and no other domain may,
 *   even when it finds the hostname free. So a Live domain whose claim disappears gets it back
 *   before anyone else.
 *
 * And one that ends a hold nobody uses (docs/customdomains.md, "A holder that never deploys"):
 *
 * - A holder that has never been accepted (its project never deployed: Accepted is not True in the
 *   status the API server holds, or is True but not the operator's: `acceptedBefore`, acceptance.ts)
 *   keeps the claim for a grace period from its own creation (its
 *   metadata.creationTimestamp, which no one can change, so deleting and taking the claim again does
 *   not restart it); after it, a claimant that is deployed (`deployed`) takes the claim over
 *   (`take-over`).
 */
import { FINALIZER, objectKey, type CustomDomain } from '../../api/customdomain.js';
import type { HostnameClaim } from '../../api/hostnameclaim.js';
import { normalizeDnsName } from '../../domain/hostname.js';
import { findCondition } from '../../kube/conditions.js';

/**
 * True when `domain`'s status shows it serving `hostname` (normalized) with a certificate of the
 * operator's, i.e. it has been Live: its spec.hostname is `hostname`, its Accepted condition is True
 * (so it held the claim when the operator last wrote its status), and status.certificate lists
 * `hostname` in dnsNames with notAfter after `now`. A domain being deleted counts while Portico's
 * finalizer is on it (its routing may still exist; the finalizer goes once the routing is gone).
 *
 * Ready / phase Live is deliberately not required: a Live domain whose DNS check fails for a while,
 * or whose backend scaled to zero, keeps its routing and its certificate, and with them its place.
 *
 * @param proven whether `domain`'s status carries the operator's proof (status-proof.ts
 *   `isProvenStatus`): an Accepted condition and a certificate written by anyone else never make a
 *   domain serve (docs/customdomains.md, "What status Portico trusts")
 */
export function servesHostname(
  domain: CustomDomain,
  hostname: string,
  now: Date,
  proven: (domain: CustomDomain) => boolean,
): boolean {
  if (normalizeDnsName(domain.spec.hostname) !== hostname) return false;
  if (domain.metadata.deletionTimestamp && !(domain.metadata.finalizers ?? []).includes(FINALIZER))
    return false;
  if (findCondition(domain.status?.conditions, 'Accepted')?.status !== 'True') return false;
  const certificate = domain.status?.certificate;
  if (!certificate) return false;
  const notAfter = Date.parse(certificate.notAfter);
  return (
    certificate.dnsNames.some((name) => normalizeDnsName(name) === hostname) &&
    !Number.isNaN(notAfter) &&
    notAfter > now.getTime() &&
    proven(domain)
  );
}

/**
 * Why a claim does not count, or undefined when it does (`holder` is the CustomDomain the claim's
 * customDomainRef names, as read from the API server; undefined when there is none).
 */
export type UnhonouredReason = 'holder-gone' | 'holder-recreated' | 'hostname-mismatch';

export function unhonouredReason(
  claim: HostnameClaim,
  holder: CustomDomain | undefined,
): UnhonouredReason | undefined {
  if (!holder) return 'holder-gone';
  if (holder.metadata.uid !== claim.spec.customDomainRef.uid) return 'holder-recreated';
  if (normalizeDnsName(holder.spec.hostname) !== claim.metadata.name) return 'hostname-mismatch';
  return undefined;
}

/**
 * The serving domain that comes first for `hostname`, or undefined when none serves it. Among two
 * or more (which the claim normally makes impossible), the oldest by metadata.creationTimestamp,
 * then the smallest `namespace/name`: every reconcile of the hostname picks the same one.
 */
export function firstServing(
  domains: readonly CustomDomain[],
  hostname: string,
  now: Date,
  proven: (domain: CustomDomain) => boolean,
): CustomDomain | undefined {
  const serving = domains.filter((d) => servesHostname(d, hostname, now, proven));
  return serving.sort(byAge)[0];
}

function byAge(a: CustomDomain, b: CustomDomain): number {
  const at = Date.parse(a.metadata.creationTimestamp?.toString() ?? '');
  const bt = Date.parse(b.metadata.creationTimestamp?.toString() ?? '');
  if (at !== bt && !Number.isNaN(at) && !Number.isNaN(bt)) return at - bt;
  const ak = objectKey(a);
  const bk = objectKey(b);
  return ak < bk ? -1 : ak > bk ? 1 : 0;
}

/**
 * What `me` should do about the claim of its hostname:
 *
 * - `held`: the claim names `me` and counts; keep it.
 * - `taken`: another domain has it or comes first; do not touch the claim.
 * - `create`: there is no claim and nobody comes first; create one (409 means someone was quicker).
 * - `replace`: the claim does not count, or names a domain that does not serve the hostname while
 *   `me` does and comes first; delete it (uid precondition) and create one for `me`.
 * - `take-over`: the claim names another domain that has never been accepted, its grace is over, and
 *   `me` is deployed while no serving domain comes first; delete it (uid precondition) and create
 *   one for `me` that records whose hold ended.
 */
export type ClaimVerdict = 'held' | 'taken' | 'create' | 'replace' | 'take-over';

/**
 * True when `domain`'s Accepted condition is True in its status as written. Written by the operator,
 * it passed every gate, the deploy gate included, and (the gate being latched) its project has had a
 * deploy; but anyone allowed to update `customdomains/status` can write it, so no decision reads it
 * alone: `acceptedBefore` (acceptance.ts) asks the operator's evidence as well.
 */
export function isAccepted(domain: CustomDomain): boolean {
  return findCondition(domain.status?.conditions, 'Accepted')?.status === 'True';
}

/**
 * When the hold of `holder` lapses if it is never accepted: its metadata.creationTimestamp plus
 * `graceMs`; undefined when it has no creation time (an object the API server has not stored) or
 * the grace is not finite.
 */
export function holdLapsesAt(holder: CustomDomain, graceMs: number): Date | undefined {
  const created = Date.parse(holder.metadata.creationTimestamp?.toString() ?? '');
  if (Number.isNaN(created) || !Number.isFinite(graceMs)) return undefined;
  return new Date(created + graceMs);
}

/**
 * True when `holder` has lost its hold to a deployed claimant: it is not accepted (`accepted`, the
 * operator's view of it: `ClaimFacts.acceptedBefore`) and the grace from its creation
 * (`holdLapsesAt`) is over at `now`.
 */
export function holdLapsed(
  holder: CustomDomain,
  graceMs: number,
  now: Date,
  accepted: (domain: CustomDomain) => boolean,
): boolean {
  if (accepted(holder)) return false;
  const lapsesAt = holdLapsesAt(holder, graceMs);
  return lapsesAt !== undefined && lapsesAt.getTime() <= now.getTime();
}

export interface ClaimFacts {
  /** The domain being reconciled. */
  me: CustomDomain;
  /** Its normalized hostname (the claim's name). */
  hostname: string;
  /** The claim as read, or undefined when there is none. */
  claim: HostnameClaim | undefined;
  /** The CustomDomain the claim names, as read (undefined: none, or no claim). */
  holder: CustomDomain | undefined;
  /** The other CustomDomains of the hostname (a cache's copies; `me` among them is ignored). */
  rivals: readonly CustomDomain[];
  now: Date;
  /**
   * `me`'s project is deployed: its Service has a ready endpoint, it has no Service (a redirect), or
   * it was accepted before as the operator proves it (acceptance.ts `deployState`). Only a deployed
   * claimant takes a claim over (`take-over`).
   */
  deployed: boolean;
  /**
   * Milliseconds a holder that is never accepted keeps the claim, from its own creation
   * (`--undeployed-claim-grace-seconds`); Infinity: forever.
   */
  undeployedGraceMs: number;
  /**
   * Whether a domain's status carries the operator's proof (status-proof.ts `isProvenStatus`); a
   * domain whose status does not never serves (`servesHostname`).
   */
  proven: (domain: CustomDomain) => boolean;
  /**
   * Whether a domain was accepted before, as the operator proves it (acceptance.ts
   * `acceptedBefore`: `Accepted=True` in its status with the operator's proof, or a route of the
   * operator's for it); a holder for which it is false keeps the claim only for the grace.
   */
  acceptedBefore: (domain: CustomDomain) => boolean;
}

export function claimVerdict(f: ClaimFacts): ClaimVerdict {
  const uid = f.me.metadata.uid;
  const others = f.rivals.filter((d) => d.metadata.uid !== uid);
  const first = firstServing([f.me, ...others], f.hostname, f.now, f.proven);
  const someoneElseFirst = first !== undefined && first.metadata.uid !== uid;
  if (!f.claim) return someoneElseFirst ? 'taken' : 'create';
  if (unhonouredReason(f.claim, f.holder) !== undefined) return someoneElseFirst ? 'taken' : 'replace';
  const holder = f.holder as CustomDomain;
  if (holder.metadata.uid === uid) {
    // Mine, but a serving rival comes first unless I serve as well (then the holder stays).
    const iServe = servesHostname(f.me, f.hostname, f.now, f.proven);
    return someoneElseFirst && !iServe ? 'taken' : 'held';
  }
  // Held by another: a serving holder always keeps it (two serving domains never swap it back and
  // forth); one that does not serve gives way to the serving domain that comes first.
  if (servesHostname(holder, f.hostname, f.now, f.proven)) return 'taken';
  if (first?.metadata.uid === uid) return 'replace';
  // A hold nobody uses ends after the grace, for a claimant that is deployed, unless a serving
  // domain comes first (it takes the claim itself).
  if (someoneElseFirst || !f.deployed) return 'taken';
  return holdLapsed(holder, f.undeployedGraceMs, f.now, f.acceptedBefore) ? 'take-over' : 'taken';
}
