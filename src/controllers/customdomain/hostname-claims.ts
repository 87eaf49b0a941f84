/**
 * Takeover safety (spec §3): a hostname belongs to at most one CustomDomain in the cluster.
 *
 * The claim is a cluster-scoped HostnameClaim named after the hostname (crds/
 * portico.dev_hostnameclaims.yaml). Creating it is atomic in the API server: when two CustomDomains
 * of the same hostname are reconciled at the same moment, one create succeeds and the other gets
 * 409 AlreadyExists, so there is never an instant with two holders, whatever the informer caches
 * have seen. The holder keeps the claim until its routing is gone: the reconcile releases it on
 * removal (after the Ingress / HTTPRoute is confirmed deleted) and when the holder's plan no longer
 * allows custom domains. A claim whose CustomDomain no longer exists (deleted while the operator was
 * down, or created again with a new uid) is replaced by the next claimant.
 */
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
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
  type CustomDomainRef,
  type HostnameClaim,
} from '../../api/hostnameclaim.js';
import { normalizeDnsName } from '../../domain/hostname.js';
import { isConflict, isNotFound } from '../../kube/errors.js';

/** `held`: this CustomDomain holds the hostname now. `taken`: another existing CustomDomain does. */
export type ClaimState = 'held' | 'taken';

/** Thrown when the claim changed hands on every attempt; the work queue retries the key later. */
export class ClaimContendedError extends Error {
  constructor(hostname: string) {
    super(`the claim on ${hostname} changed on every attempt; retrying`);
    this.name = 'ClaimContendedError';
  }
}

const ATTEMPTS = 3;

/** The claim of a hostname as a HostnameClaim informer's cache holds it, or undefined. */
export type CachedClaimLookup = (hostname: string) => HostnameClaim | undefined;

export class HostnameClaims {
  readonly #api: CustomObjectsApi;
  readonly #log: Logger;
  readonly #cached: CachedClaimLookup;

  /**
   * @param cached the claims cache; it answers only "this domain holds it already", the common case
   *   of every reconcile of an accepted domain. Taking, replacing and giving up a claim read the API
   *   server, so two operators can never both see a hostname as free.
   */
  constructor(customObjects: CustomObjectsApi, log: Logger, cached: CachedClaimLookup = () => undefined) {
    this.#api = customObjects;
    this.#log = log;
    this.#cached = cached;
  }

  /**
   * Takes the claim on `domain`'s hostname, or confirms that this CustomDomain (same uid) holds it.
   * A claim held by a CustomDomain that no longer exists is deleted (guarded by the claim's uid) and
   * taken. Reads the API server, never a cache.
   *
   * @returns `held` or `taken` (another CustomDomain that still exists holds it; it keeps the claim
   *   while being deleted, until its routing is gone).
   * @throws ClaimContendedError when the claim changed hands on each of 3 attempts; ApiException for
   *   any API error other than the 404 / 409 answers handled here.
   */
  async acquire(domain: CustomDomain): Promise<ClaimState> {
    const mine = refOf(domain);
    const hostname = normalizeDnsName(domain.spec.hostname);
    // A claim is only ever created for its holder's uid, so the cache saying "mine" is safe to trust;
    // if it was deleted meanwhile, its delete event re-queues this domain, which takes it again.
    const cached = this.#cached(hostname);
    if (cached?.spec.customDomainRef.uid === mine.uid) return 'held';
    // No claim in the cache: try to take it at once (the create is the atomic step; a 409 says
    // someone holds it, and the loop below reads who).
    if (!cached && (await this.#create(hostname, mine))) return 'held';
    for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
      const claim = await this.#get(hostname);
      if (!claim) {
        if (await this.#create(hostname, mine)) return 'held';
        continue;
      }
      if (claim.spec.customDomainRef.uid === mine.uid) return 'held';
      if (await this.#holderExists(claim.spec.customDomainRef)) return 'taken';
      this.#log.info(
        { hostname, staleHolder: claim.spec.customDomainRef },
        'replacing a hostname claim whose CustomDomain no longer exists',
      );
      await this.#delete(claim);
    }
    throw new ClaimContendedError(hostname);
  }

  /**
   * Gives up `domain`'s claim on its hostname if it holds it (same uid); a claim held by another
   * CustomDomain is left alone. Call it only once the domain's routing is gone (spec §3: a hostname
   * moves to another project only after its routing is removed).
   *
   * @param options.trustCache skip the API server when the cache shows no claim of this domain
   * @throws ApiException for any API error other than 404 / 409 (already gone or replaced).
   */
  async release(domain: CustomDomain, options: { trustCache?: boolean } = {}): Promise<void> {
    const hostname = normalizeDnsName(domain.spec.hostname);
    // A domain that is refused on every pass (e.g. its plan) asks the cache first: no claim of its
    // own there means nothing to give up; a claim it took a moment ago re-queues it when it shows.
    if (options.trustCache && this.#cached(hostname)?.spec.customDomainRef.uid !== domain.metadata.uid)
      return;
    const claim = await this.#get(hostname);
    if (claim && claim.spec.customDomainRef.uid === domain.metadata.uid) await this.#delete(claim);
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

  /** True when the create made the claim; false when another create got there first (409). */
  async #create(hostname: string, ref: CustomDomainRef): Promise<boolean> {
    const body: HostnameClaim = {
      apiVersion: API_VERSION,
      kind: HOSTNAME_CLAIM_KIND,
      metadata: { name: hostname, labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } },
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

  /** The CustomDomain `ref` names still exists with the same uid (a deleting one counts). */
  async #holderExists(ref: CustomDomainRef): Promise<boolean> {
    try {
      const holder = (await this.#api.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ref.namespace,
        plural: CUSTOM_DOMAIN_PLURAL,
        name: ref.name,
      })) as CustomDomain;
      return holder.metadata.uid === ref.uid;
    } catch (err) {
      if (isNotFound(err)) return false;
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
