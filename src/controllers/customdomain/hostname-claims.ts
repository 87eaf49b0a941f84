/**
 * Takeover safety (docs/customdomains.md, "Who holds a hostname"): a hostname belongs to at most one CustomDomain in the cluster.
 *
 * The claim is a cluster-scoped HostnameClaim named after the hostname (crds/
 * portico.dev_hostnameclaims.yaml). Creating it is atomic in the API server: when two CustomDomains
 * of the same hostname are reconciled at the same moment, one create succeeds and the other gets
 * 409 AlreadyExists, so there is never an instant with two holders, whatever the informer caches
 * have seen. The holder keeps the claim until its routing is gone: the reconcile releases it on
 * removal (after the Ingress / HTTPRoute is confirmed deleted) and when the holder's plan no longer
 * allows custom domains. A claim that does not count (claim-precedence.ts: its CustomDomain no
 * longer exists, was created again with a new uid, or has another hostname, e.g. a claim made by
 * hand) is replaced by the next claimant, and a CustomDomain that serves the hostname comes before
 * any other, so a Live domain whose claim disappears or is replaced by hand gets it back first.
 */
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { eventTypeOf, type CustomDomainReason } from '../../api/reasons.js';
import {
  API_VERSION,
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  VERSION,
  type CustomDomain,
} from '../../api/customdomain.js';
import {
  HOSTNAME_CLAIM_KIND,
  HOSTNAME_CLAIM_PLURAL,
  TAKEN_OVER_FROM_ANNOTATION,
  type CustomDomainRef,
  type HostnameClaim,
} from '../../api/hostnameclaim.js';
import { normalizeDnsName } from '../../domain/hostname.js';
import { isConflict, isNotFound } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import { claimVerdict, holdLapsesAt, unhonouredReason } from './claim-precedence.js';

/**
 * `held`: this CustomDomain holds the hostname now. `taken`: another existing CustomDomain does.
 * `yielded`: another does, having taken the claim over from this one, which was never accepted
 * within the grace (claim-precedence.ts, `take-over`).
 */
export type ClaimState = 'held' | 'taken' | 'yielded';

/** What `HostnameClaims.acquire` found. */
export interface ClaimOutcome {
  state: ClaimState;
  /**
   * `taken` by a holder never accepted while this domain is deployed: when its hold lapses and this
   * domain takes it over, so the caller looks again then. Undefined otherwise.
   */
  lapsesAt?: Date;
  /** `yielded`: when the claim was taken over (the new claim's creation), when known. */
  takenOverAt?: Date;
}

/** Thrown when the claim changed hands on every attempt; the work queue retries the key later. */
export class ClaimContendedError extends Error {
  constructor(hostname: string) {
    super(`the claim on ${hostname} changed on every attempt; retrying`);
    this.name = 'ClaimContendedError';
  }
}

const ATTEMPTS = 3;

/** What HostnameClaims reads from the informer caches. */
export interface ClaimsCache {
  /** The cached claim of `hostname` (normalized), or undefined. */
  hostnameClaim(hostname: string): HostnameClaim | undefined;
  /** The cached CustomDomains whose spec.hostname is `hostname` (normalized), in any namespace. */
  customDomainsOfHostname(hostname: string): readonly CustomDomain[];
  /** The metadata.uid of namespace `name`, or undefined when it is not cached. */
  namespaceUid?(name: string): string | undefined;
}

const NO_CACHE: ClaimsCache = { hostnameClaim: () => undefined, customDomainsOfHostname: () => [] };

/** Reason of the Warning Event recorded on a domain that replaced a claim which did not count. */
export const CLAIM_REPLACED_REASON: CustomDomainReason = 'HostnameClaimReplaced';

/** Reason of the Normal Event recorded on a deployed domain that took over a lapsed hold. */
export const CLAIM_TAKEN_OVER_REASON: CustomDomainReason = 'HostnameClaimTakenOver';

/** The namespace that gives a hostname up: its name and metadata.uid (undefined when not cached). */
export interface ReleasingNamespace {
  name: string;
  uid: string | undefined;
}

export interface HostnameClaimsOptions {
  /**
   * The caches. The claim cache answers only "this domain holds it already", the common case of
   * every reconcile of an accepted domain; the domain cache finds a rival that serves the hostname
   * (claim-precedence.ts). Taking, replacing and giving up a claim read the claim and its holder
   * from the API server, so two operators can never both see a hostname as free. Default: empty.
   */
  cache?: ClaimsCache;
  /** Records the Warning Event `HostnameClaimReplaced` on a domain that replaced a claim. */
  events?: Pick<EventRecorder, 'record'>;
  /**
   * Keeps a record of each release (who held the hostname, until when), written before the claim is
   * deleted, for ownership verification's `recently-claimed` policy (ownership-store.ts). A record
   * is a separate object: a HostnameClaim's existence still means "held".
   */
  releases?: {
    recordRelease(hostname: string, namespace: ReleasingNamespace, at: Date): Promise<void>;
  };
  /**
   * Milliseconds a holder that is never accepted keeps the claim against a deployed claimant, from
   * its own creation (`--undeployed-claim-grace-seconds`). Default: Infinity (it keeps it).
   */
  undeployedGraceMs?: number;
  /**
   * Whether a CustomDomain's status carries the operator's proof (status-proof.ts), so that an
   * Accepted condition and a certificate written by anyone else never make it serve its hostname
   * (claim-precedence.ts `servesHostname`). Default: none does.
   */
  proven?: (domain: CustomDomain) => boolean;
  /**
   * Whether a CustomDomain was accepted before, as the operator proves it (acceptance.ts
   * `acceptedBefore`), so that an `Accepted=True` written by anyone else never keeps a hold past
   * its grace (claim-precedence.ts `holdLapsed`). Default: none was.
   */
  acceptedBefore?: (domain: CustomDomain) => boolean;
  now?: () => Date;
}

export class HostnameClaims {
  readonly #api: CustomObjectsApi;
  readonly #log: Logger;
  readonly #cache: ClaimsCache;
  readonly #events: Pick<EventRecorder, 'record'> | undefined;
  readonly #releases: HostnameClaimsOptions['releases'];
  readonly #undeployedGraceMs: number;
  readonly #proven: (domain: CustomDomain) => boolean;
  readonly #acceptedBefore: (domain: CustomDomain) => boolean;
  readonly #now: () => Date;

  constructor(customObjects: CustomObjectsApi, log: Logger, options: HostnameClaimsOptions = {}) {
    this.#api = customObjects;
    this.#log = log;
    this.#cache = options.cache ?? NO_CACHE;
    this.#events = options.events;
    this.#releases = options.releases;
    this.#undeployedGraceMs = options.undeployedGraceMs ?? Number.POSITIVE_INFINITY;
    this.#proven = options.proven ?? (() => false);
    this.#acceptedBefore = options.acceptedBefore ?? (() => false);
    this.#now = options.now ?? (() => new Date());
  }

  /**
   * Takes the claim on `domain`'s hostname, or confirms that this CustomDomain (same uid) holds it,
   * by the rules of claim-precedence.ts: a claim counts only if its holder exists with the same uid
   * and has the claim's hostname, a domain that serves the hostname comes before any other, and a
   * holder never accepted keeps it only for `undeployedGraceMs` against a deployed claimant. A claim
   * that does not count, or that names a domain not serving the hostname while this one does, is
   * deleted (guarded by the claim's uid) and taken; a Warning Event `HostnameClaimReplaced` on
   * `domain` says so. A lapsed hold is recorded as a release of the former holder's namespace
   * (ownership verification then asks `domain` for the TXT record under `recently-claimed`), deleted
   * and taken with the annotation `portico.dev/taken-over-from-uid`; a Normal Event
   * `HostnameClaimTakenOver` on `domain` says so. Reads the claim and its holder from the API server,
   * the rivals from the cache.
   *
   * @param options.deployed `domain`'s project is deployed (a ready endpoint, no Service, or accepted
   *   before): only then does it take a lapsed hold over
   * @returns `held`, `taken` (another CustomDomain that still exists holds it or comes first; a
   *   holder keeps the claim while being deleted, until its routing is gone) or `yielded` (`taken`
   *   by a domain that took it over from this one), with `lapsesAt` when a lapsing hold is in the way
   * @throws ClaimContendedError when the claim changed hands on each of 3 attempts; ApiException for
   *   any API error other than the 404 / 409 answers handled here.
   */
  async acquire(domain: CustomDomain, options: { deployed?: boolean } = {}): Promise<ClaimOutcome> {
    const mine = refOf(domain);
    const hostname = normalizeDnsName(domain.spec.hostname);
    const rivals = this.#cache.customDomainsOfHostname(hostname);
    // A claim in the cache naming this uid, at this hostname, counts (claim-precedence.ts), so the
    // cache saying "mine" is safe to trust unless a serving rival comes first; if the claim was
    // deleted meanwhile, its delete event re-queues this domain, which takes it again.
    const cached = this.#cache.hostnameClaim(hostname);
    const facts = {
      me: domain,
      hostname,
      rivals,
      now: this.#now(),
      deployed: options.deployed ?? false,
      undeployedGraceMs: this.#undeployedGraceMs,
      proven: this.#proven,
      acceptedBefore: this.#acceptedBefore,
    };
    const fast = await this.#fromCache(facts, cached);
    if (fast) return fast;
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const claim = await this.#get(hostname);
      const holder = claim ? await this.#holder(claim.spec.customDomainRef) : undefined;
      const verdict = claimVerdict({ ...facts, claim, holder, now: this.#now() });
      if (verdict === 'held') return { state: 'held' };
      if (verdict === 'taken') return this.#taken(domain, claim, holder, facts.deployed);
      if (verdict === 'create') {
        if (await this.#create(hostname, mine)) return { state: 'held' };
        continue;
      }
      if (verdict === 'take-over') {
        if (await this.#takeOver(domain, claim as HostnameClaim, holder as CustomDomain))
          return { state: 'held' };
        continue;
      }
      await this.#replace(domain, claim as HostnameClaim, holder);
      if (await this.#create(hostname, mine)) return { state: 'held' };
    }
    throw new ClaimContendedError(hostname);
  }

  /**
   * The answer the cache alone gives, or undefined when the API server must be read: the cached claim
   * is `domain`'s and counts, or there is none and the create succeeds (or a serving rival comes first).
   */
  async #fromCache(
    facts: Omit<Parameters<typeof claimVerdict>[0], 'claim' | 'holder'>,
    cached: HostnameClaim | undefined,
  ): Promise<ClaimOutcome | undefined> {
    const domain = facts.me;
    if (cached?.spec.customDomainRef.uid === domain.metadata.uid) {
      return claimVerdict({ ...facts, claim: cached, holder: domain }) === 'held'
        ? { state: 'held' }
        : undefined;
    }
    if (cached) return undefined;
    // No claim in the cache: unless a serving rival comes first, try to take it at once (the
    // create is the atomic step; a 409 says someone holds it, and the loop reads who).
    if (claimVerdict({ ...facts, claim: undefined, holder: undefined }) === 'taken')
      return { state: 'taken' };
    return (await this.#create(facts.hostname, refOf(domain))) ? { state: 'held' } : undefined;
  }

  /** The outcome of a `taken` verdict: `yielded` when the claim was taken over from `domain`. */
  #taken(
    domain: CustomDomain,
    claim: HostnameClaim | undefined,
    holder: CustomDomain | undefined,
    deployed: boolean,
  ): ClaimOutcome {
    if (claim && claim.metadata.annotations?.[TAKEN_OVER_FROM_ANNOTATION] === domain.metadata.uid) {
      const created = claim.metadata.creationTimestamp;
      return { state: 'yielded', ...(created ? { takenOverAt: new Date(created) } : {}) };
    }
    // A holder never accepted is in the way of a deployed domain only until its grace is over.
    if (
      claim &&
      holder &&
      deployed &&
      !this.#acceptedBefore(holder) &&
      unhonouredReason(claim, holder) === undefined
    ) {
      const lapsesAt = holdLapsesAt(holder, this.#undeployedGraceMs);
      if (lapsesAt) return { state: 'taken', lapsesAt };
    }
    return { state: 'taken' };
  }

  /**
   * Ends the hold of `holder`, never accepted past the grace, for `domain`, which is deployed: records
   * the release (the holder's namespace, now), deletes the claim (uid precondition) and creates
   * `domain`'s at once, annotated with the former holder's uid; once it is made, logs it and records
   * a Normal Event `HostnameClaimTakenOver` on `domain` that does not name the holder.
   *
   * @returns true when `domain` now holds the claim; false when another create came first (409)
   */
  async #takeOver(domain: CustomDomain, claim: HostnameClaim, holder: CustomDomain): Promise<boolean> {
    const hostname = claim.metadata.name;
    await this.#releases?.recordRelease(hostname, this.#namespaceOf(holder), this.#now());
    await this.#delete(claim);
    // Created right after the delete: the former holder, woken by the delete, must not be first.
    if (!(await this.#create(hostname, refOf(domain), holder.metadata.uid))) return false;
    this.#log.info(
      {
        hostname,
        formerHolder: claim.spec.customDomainRef,
        formerHolderCreated: holder.metadata.creationTimestamp,
        claimant: refOf(domain),
      },
      'took over the claim of a holder never accepted within the grace',
    );
    const graceSeconds = Math.round(this.#undeployedGraceMs / 1000);
    await this.#events?.record(
      domain,
      eventTypeOf(CLAIM_TAKEN_OVER_REASON),
      CLAIM_TAKEN_OVER_REASON,
      `${hostname} was held by a CustomDomain whose project was not deployed within ${String(graceSeconds)} s of its creation; this CustomDomain, whose project is deployed, took the claim over.`,
    );
    return true;
  }

  /**
   * Gives up `domain`'s claim on its hostname if it holds it (same uid); a claim held by another
   * CustomDomain is left alone. Call it only once the domain's routing is gone (docs/customdomains.md, "Removal": a hostname
   * moves to another project only after its routing is removed).
   *
   * The release is recorded first (`releases`), so a failure leaves the claim in place and the
   * work queue's retry records it again.
   *
   * @param options.trustCache skip the API server when the cache shows no claim of this domain
   * @throws ApiException for any API error other than 404 / 409 (already gone or replaced).
   */
  async release(domain: CustomDomain, options: { trustCache?: boolean } = {}): Promise<void> {
    const hostname = normalizeDnsName(domain.spec.hostname);
    // A domain that is refused on every pass (e.g. its plan) asks the cache first: no claim of its
    // own there means nothing to give up; a claim it took a moment ago re-queues it when it shows.
    if (
      options.trustCache &&
      this.#cache.hostnameClaim(hostname)?.spec.customDomainRef.uid !== domain.metadata.uid
    )
      return;
    const claim = await this.#get(hostname);
    if (claim && claim.spec.customDomainRef.uid === domain.metadata.uid) {
      await this.#releases?.recordRelease(hostname, this.#namespaceOf(domain), this.#now());
      await this.#delete(claim);
    }
  }

  /**
   * The namespace of `domain` for a release record, with its uid from the namespace cache (a
   * namespace being deleted stays cached until its CustomDomains are gone).
   */
  #namespaceOf(domain: CustomDomain): ReleasingNamespace {
    const name = domain.metadata.namespace;
    return { name, uid: this.#cache.namespaceUid?.(name) };
  }

  async #get(hostname: string): Promise<HostnameClaim | undefined> {
    try {
      return (await this.#api.getClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: HOSTNAME_CLAIM_PLURAL,
        name: hostname,
      })) as HostnameClaim;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * True when the create made the claim; false when another create got there first (409).
   * `takenOverFrom`: the uid of the holder whose lapsed hold this claim replaces.
   */
  async #create(hostname: string, ref: CustomDomainRef, takenOverFrom?: string): Promise<boolean> {
    const body: HostnameClaim = {
      apiVersion: API_VERSION,
      kind: HOSTNAME_CLAIM_KIND,
      metadata: {
        name: hostname,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
        ...(takenOverFrom ? { annotations: { [TAKEN_OVER_FROM_ANNOTATION]: takenOverFrom } } : {}),
      },
      spec: { customDomainRef: ref },
    };
    try {
      await this.#api.createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: HOSTNAME_CLAIM_PLURAL,
        body,
      });
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  /** Deletes `claim` only if it is still that object (uid precondition); 404 / 409 mean someone else did. */
  async #delete(claim: HostnameClaim): Promise<void> {
    try {
      await this.#api.deleteClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: HOSTNAME_CLAIM_PLURAL,
        name: claim.metadata.name,
        body: { preconditions: { uid: claim.metadata.uid ?? '' } },
      });
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  /**
   * Deletes `claim` (uid precondition) for `domain`, which takes it next: logs who it named and why
   * it gave way, and records a Warning Event on `domain` that does not name the other domain (it may
   * be another tenant's).
   */
  async #replace(
    domain: CustomDomain,
    claim: HostnameClaim,
    holder: CustomDomain | undefined,
  ): Promise<void> {
    const hostname = claim.metadata.name;
    const why = unhonouredReason(claim, holder) ?? 'holder-not-serving';
    this.#log.info(
      { hostname, replacedHolder: claim.spec.customDomainRef, why, claimant: refOf(domain) },
      'replacing a hostname claim that does not count',
    );
    await this.#delete(claim);
    if (why === 'holder-gone' || why === 'holder-recreated') return; // the ordinary hand-over
    await this.#events?.record(
      domain,
      eventTypeOf(CLAIM_REPLACED_REASON),
      CLAIM_REPLACED_REASON,
      why === 'hostname-mismatch'
        ? `The HostnameClaim of ${hostname} named a CustomDomain whose hostname is another name; such a claim does not count, and this CustomDomain took the claim. HostnameClaims are the operator's: do not create them by hand.`
        : `The HostnameClaim of ${hostname} named a CustomDomain that does not serve it, while this one does (it is accepted, with a certificate for ${hostname}); this CustomDomain took the claim back. HostnameClaims are the operator's: do not create them by hand.`,
    );
  }

  /** The CustomDomain `ref` names (by namespace and name; a deleting one counts), or undefined. */
  async #holder(ref: CustomDomainRef): Promise<CustomDomain | undefined> {
    try {
      return (await this.#api.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ref.namespace,
        plural: CUSTOM_DOMAIN_PLURAL,
        name: ref.name,
      })) as CustomDomain;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}

function refOf(domain: CustomDomain): CustomDomainRef {
  return {
    namespace: domain.metadata.namespace,
    name: domain.metadata.name,
    uid: domain.metadata.uid ?? '',
  };
}
