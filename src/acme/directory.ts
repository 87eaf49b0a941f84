/**
 * The ACME directory (RFC 8555 §7.1.1) fields Portico reads beyond what acme-client uses:
 * `meta.caaIdentities` (for the CAA check), `renewalInfo` (ARI, RFC 9773 §3) and `meta.profiles`.
 * Fetched once and cached; a failed fetch is not cached.
 */
import { recordAcmeRequest } from '../observability/shared-metrics.js';
import { observedFetch } from './request-metrics.js';

export interface DirectoryFacts {
  /** Issuer domain names the CA recognizes in CAA `issue` values; [] when the CA names none. */
  caaIdentities: string[];
  /** Base URL of the renewalInfo resource, or undefined when the CA offers no ARI. */
  renewalInfo: string | undefined;
  /** Profile names the CA offers (draft-ietf-acme-profiles), [] when none. */
  profiles: string[];
}

/** Thrown when the directory cannot be read or is not an ACME directory. */
export class AcmeDirectoryError extends Error {
  readonly code = 'ACME_DIRECTORY_ERROR';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AcmeDirectoryError';
  }
}

interface RawDirectory {
  newOrder?: unknown;
  renewalInfo?: unknown;
  meta?: { caaIdentities?: unknown; profiles?: unknown };
}

/** Reads the facts from a directory object. Pure. Throws `AcmeDirectoryError` when `newOrder` is missing. */
export function directoryFacts(raw: unknown): DirectoryFacts {
  const dir = (raw ?? {}) as RawDirectory;
  if (typeof dir.newOrder !== 'string')
    throw new AcmeDirectoryError('not an ACME directory: no newOrder URL');
  const ids = Array.isArray(dir.meta?.caaIdentities) ? dir.meta.caaIdentities : [];
  const profiles =
    dir.meta?.profiles && typeof dir.meta.profiles === 'object' ? Object.keys(dir.meta.profiles) : [];
  return {
    caaIdentities: ids.filter((x): x is string => typeof x === 'string'),
    renewalInfo: typeof dir.renewalInfo === 'string' ? dir.renewalInfo : undefined,
    profiles,
  };
}

export class AcmeDirectory {
  readonly #url: string;
  #facts: Promise<DirectoryFacts> | undefined;

  constructor(url: string) {
    this.#url = url;
  }

  /** The directory's facts. Throws `AcmeDirectoryError`. */
  facts(): Promise<DirectoryFacts> {
    this.#facts ??= this.#fetch().catch((err: unknown) => {
      this.#facts = undefined;
      throw err;
    });
    return this.#facts;
  }

  async #fetch(): Promise<DirectoryFacts> {
    let response: Response;
    try {
      response = await observedFetch(
        'directory',
        this.#url,
        { headers: { 'user-agent': 'portico' }, signal: AbortSignal.timeout(10_000) },
        recordAcmeRequest,
      );
    } catch (err) {
      throw new AcmeDirectoryError(`cannot read the ACME directory ${this.#url}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (!response.ok)
      throw new AcmeDirectoryError(`the ACME directory ${this.#url} answered HTTP ${response.status}`);
    return directoryFacts(await response.json());
  }
}
