/**
 * Indexes of the cached CustomDomains by what watch events touch (client-go's `Indexers` /
 * `ByIndex`): a Namespace event finds the domains of that namespace, an EndpointSlice event the
 * domains of its Service, a HostnameClaim event the domains of its hostname, and a CustomDomain or
 * HostnameClaim event of a hostname the redirects to it (`spec.redirect.to`), each without a scan of
 * every domain. Kept in step with the CustomDomain informer's add, update and delete events.
 */
import { objectKey, type CustomDomain } from '../../api/customdomain.js';
import { normalizeDnsName } from '../../domain/hostname.js';

interface Entry {
  namespace: string;
  /** `namespace/service`, or undefined without spec.service. */
  service: string | undefined;
  /** Normalized hostname. */
  hostname: string;
  /** Normalized `spec.redirect.to`, or undefined for a serving domain. */
  redirectTo: string | undefined;
}

/**
 * The keys of one index value: the key itself while it is the only one (as a hostname almost
 * always has), a Set from the second on. With a Set of one per hostname the index held 467 bytes a
 * domain, now 325 (a script indexing 10,000 domains, heap after GC; docs/performance.md).
 */
type Keys = string | Set<string>;

/**
 * Keys (`namespace/name`) of CustomDomains by namespace, by `namespace/service`, by hostname and by
 * redirect target hostname.
 */
export class CustomDomainIndex {
  readonly #entries = new Map<string, Entry>();
  readonly #byNamespace = new Map<string, Keys>();
  readonly #byService = new Map<string, Keys>();
  readonly #byHostname = new Map<string, Keys>();
  readonly #byRedirectTo = new Map<string, Keys>();

  /** Records `domain` (an add or an update); an update moves its key between index values. */
  upsert(domain: CustomDomain): void {
    const key = objectKey(domain);
    const service = domain.spec.service?.name;
    const entry: Entry = {
      namespace: domain.metadata.namespace,
      service: service === undefined ? undefined : `${domain.metadata.namespace}/${service}`,
      hostname: normalizeDnsName(domain.spec.hostname),
      redirectTo: domain.spec.redirect ? normalizeDnsName(domain.spec.redirect.to) : undefined,
    };
    const old = this.#entries.get(key);
    if (
      old &&
      old.service === entry.service &&
      old.hostname === entry.hostname &&
      old.redirectTo === entry.redirectTo
    )
      return;
    if (old) this.#unindex(key, old);
    this.#entries.set(key, entry);
    link(this.#byNamespace, entry.namespace, key);
    if (entry.service !== undefined) link(this.#byService, entry.service, key);
    link(this.#byHostname, entry.hostname, key);
    if (entry.redirectTo !== undefined) link(this.#byRedirectTo, entry.redirectTo, key);
  }

  /** Forgets `domain` (a delete). */
  delete(domain: CustomDomain): void {
    const key = objectKey(domain);
    const old = this.#entries.get(key);
    if (!old) return;
    this.#unindex(key, old);
    this.#entries.delete(key);
  }

  /** Keys of the domains in `namespace`. */
  inNamespace(namespace: string): Iterable<string> {
    return keysOf(this.#byNamespace.get(namespace));
  }

  /** Keys of the domains whose spec.service is `service` in `namespace`. */
  ofService(namespace: string, service: string): Iterable<string> {
    return keysOf(this.#byService.get(`${namespace}/${service}`));
  }

  /** Keys of the domains of `hostname` (normalized here). */
  ofHostname(hostname: string): Iterable<string> {
    return keysOf(this.#byHostname.get(normalizeDnsName(hostname)));
  }

  /** Keys of the domains whose spec.redirect.to is `hostname` (normalized here). */
  redirectingTo(hostname: string): Iterable<string> {
    return keysOf(this.#byRedirectTo.get(normalizeDnsName(hostname)));
  }

  /** The normalized hostname `key` was last indexed with, or undefined when it is not indexed. */
  hostnameOf(key: string): string | undefined {
    return this.#entries.get(key)?.hostname;
  }

  /** Number of indexed domains. */
  get size(): number {
    return this.#entries.size;
  }

  #unindex(key: string, entry: Entry): void {
    unlink(this.#byNamespace, entry.namespace, key);
    if (entry.service !== undefined) unlink(this.#byService, entry.service, key);
    unlink(this.#byHostname, entry.hostname, key);
    if (entry.redirectTo !== undefined) unlink(this.#byRedirectTo, entry.redirectTo, key);
  }
}

function keysOf(keys: Keys | undefined): Iterable<string> {
  if (keys === undefined) return [];
  return typeof keys === 'string' ? [keys] : keys;
}

function link(index: Map<string, Keys>, value: string, key: string): void {
  const keys = index.get(value);
  if (keys === undefined) index.set(value, key);
  else if (typeof keys !== 'string') keys.add(key);
  else if (keys !== key) index.set(value, new Set([keys, key]));
}

function unlink(index: Map<string, Keys>, value: string, key: string): void {
  const keys = index.get(value);
  if (keys === undefined) return;
  if (typeof keys === 'string') {
    if (keys === key) index.delete(value);
    return;
  }
  keys.delete(key);
  if (keys.size === 0) index.delete(value);
}
