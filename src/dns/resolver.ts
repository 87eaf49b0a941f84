/**
 * The DNS adapter: asks the configured servers for a hostname's CNAME, A and AAAA RRsets and turns
 * each outcome into an `RRsetAnswer`. Uses Node's c-ares resolver (`node:dns`), which tells NXDOMAIN
 * (ENOTFOUND), no data (ENODATA), SERVFAIL (ESERVFAIL) and timeouts (ETIMEOUT) apart.
 */
import { Resolver } from 'node:dns/promises';
import type { HostnameAnswers, RRsetAnswer } from './answers.js';

export interface DnsResolverOptions {
  /** `host:port` or `host` entries; an empty list means the system's resolvers. */
  servers: readonly string[];
  /** Per-try timeout in milliseconds. */
  timeoutMs: number;
  /** Tries per query. */
  tries: number;
}

type Query = (resolver: Resolver, name: string) => Promise<string[]>;

/** Maps a c-ares error code to an answer kind. */
export function answerFromErrorCode(code: string | undefined): RRsetAnswer {
  switch (code) {
    case 'ENOTFOUND':
      return { kind: 'nxdomain' };
    case 'ENODATA':
      return { kind: 'nodata' };
    case 'ESERVFAIL':
      return { kind: 'servfail' };
    case 'ETIMEOUT':
      return { kind: 'timeout' };
    default:
      return { kind: 'error', code: code ?? 'UNKNOWN' };
  }
}

export class DnsResolver {
  readonly #options: DnsResolverOptions;

  constructor(options: DnsResolverOptions) {
    this.#options = options;
  }

  /** A fresh c-ares channel per lookup, so no answer is cached between checks. */
  #resolver(): Resolver {
    const resolver = new Resolver({ timeout: this.#options.timeoutMs, tries: this.#options.tries });
    if (this.#options.servers.length > 0) resolver.setServers([...this.#options.servers]);
    return resolver;
  }

  async #query(name: string, query: Query): Promise<RRsetAnswer> {
    try {
      const values = await query(this.#resolver(), name);
      return values.length > 0 ? { kind: 'records', values } : { kind: 'nodata' };
    } catch (err) {
      return answerFromErrorCode((err as NodeJS.ErrnoException).code);
    }
  }

  /** The CNAME, A and AAAA answers for `name`, queried in parallel. Never throws. */
  async lookupHostname(name: string): Promise<HostnameAnswers> {
    const [cname, a, aaaa] = await Promise.all([
      this.#query(name, (r, n) => r.resolveCname(n)),
      this.#query(name, (r, n) => r.resolve4(n)),
      this.#query(name, (r, n) => r.resolve6(n)),
    ]);
    return { cname, a, aaaa };
  }

  /** The A and AAAA answers for `name` (following CNAMEs). Never throws. */
  async lookupAddresses(name: string): Promise<{ a: RRsetAnswer; aaaa: RRsetAnswer }> {
    const [a, aaaa] = await Promise.all([
      this.#query(name, (r, n) => r.resolve4(n)),
      this.#query(name, (r, n) => r.resolve6(n)),
    ]);
    return { a, aaaa };
  }
}
