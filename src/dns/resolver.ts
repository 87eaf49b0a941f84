/**
 * The DNS adapter: asks the configured servers for a hostname's CNAME, A, AAAA (and TXT, CAA) RRsets and turns
 * each outcome into an `RRsetAnswer`. Uses Node's c-ares resolver (`node:dns`), which tells NXDOMAIN
 * (ENOTFOUND), no data (ENODATA), SERVFAIL (ESERVFAIL) and timeouts (ETIMEOUT) apart.
 */
import type { CaaRecord as NodeCaaRecord } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { caaSearchNames, type CaaRecord } from './caa.js';
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

/** CNAME links followed to find who holds a CAA RRset. */
const MAX_CNAME_LINKS = 8;

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
  /**
   * One c-ares channel for every lookup. Node turns c-ares's query cache off (qcache_max_ttl 0), so
   * every query is asked of the servers and no answer is reused between checks (resolver.test.ts
   * shows it with a record whose TTL is 300 s). A channel per lookup cost ~5 s of CPU per 1,000
   * domains issued (docs/performance.md).
   */
  readonly #channel: Resolver;

  constructor(options: DnsResolverOptions) {
    this.#channel = new Resolver({ timeout: options.timeoutMs, tries: options.tries });
    if (options.servers.length > 0) this.#channel.setServers([...options.servers]);
  }

  #resolver(): Resolver {
    return this.#channel;
  }

  async #query(name: string, query: Query): Promise<RRsetAnswer> {
    try {
      const values = await query(this.#resolver(), name);
      return values.length > 0 ? { kind: 'records', values } : { kind: 'nodata' };
    } catch (err) {
      return answerFromErrorCode((err as NodeJS.ErrnoException).code);
    }
  }

  /**
   * The CNAME, A and AAAA answers for `name`, queried in parallel. With `otherRecords` (a subdomain,
   * where a CNAME is wanted), also its MX, TXT and NS answers when the name exists but has no CNAME
   * (NOERROR with no data): records a CNAME cannot share its name with (RFC 1034 §3.6.2), which
   * the verdict names. A name that does not exist, or has a CNAME, costs no more queries. Never throws.
   */
  async lookupHostname(name: string, options: { otherRecords?: boolean } = {}): Promise<HostnameAnswers> {
    const [cname, a, aaaa] = await Promise.all([
      this.#query(name, (r, n) => r.resolveCname(n)),
      this.#query(name, (r, n) => r.resolve4(n)),
      this.#query(name, (r, n) => r.resolve6(n)),
    ]);
    if (options.otherRecords !== true || cname.kind !== 'nodata') return { cname, a, aaaa };
    const [mx, txt, ns] = await Promise.all([
      this.#query(name, async (r, n) => (await r.resolveMx(n)).map((m) => `${m.priority} ${m.exchange}`)),
      this.lookupTxt(name),
      this.#query(name, (r, n) => r.resolveNs(n)),
    ]);
    return { cname, a, aaaa, others: { mx, txt, ns } };
  }

  /**
   * The TXT RRset at `name`, one value per record: its character-strings joined without a
   * separator (RFC 7208 §3.3 reads a long TXT value the same way). Never throws.
   */
  async lookupTxt(name: string): Promise<RRsetAnswer> {
    return this.#query(name, async (r, n) => (await r.resolveTxt(n)).map((chunks) => chunks.join('')));
  }

  /** The CNAME RRset at `name` (e.g. `_acme-challenge.<hostname>`, `challenge-delegation.ts`). Never throws. */
  async lookupCname(name: string): Promise<RRsetAnswer> {
    return this.#query(name, (r, n) => r.resolveCname(n));
  }

  /** The A and AAAA answers for `name` (following CNAMEs). Never throws. */
  async lookupAddresses(name: string): Promise<{ a: RRsetAnswer; aaaa: RRsetAnswer }> {
    const [a, aaaa] = await Promise.all([
      this.#query(name, (r, n) => r.resolve4(n)),
      this.#query(name, (r, n) => r.resolve6(n)),
    ]);
    return { a, aaaa };
  }

  /**
   * The relevant CAA RRset of `hostname` (RFC 8659 §3): the first name from `hostname` up the tree
   * whose CAA query returns records. Resolution follows a CNAME at a name, so CAA at the CNAME
   * target counts; `owner` is then the name that holds the records (the end of the CNAME chain: a
   * name with a CNAME holds no other data, RFC 1034 §3.6.2), so a message can say where to fix
   * them. Returns `{owner, records}`, with records [] when none is found, or a failed answer
   * (SERVFAIL, timeout), on which a CA must not issue (§5.4).
   */
  async relevantCaa(
    hostname: string,
  ): Promise<{ owner: string; records: CaaRecord[] } | { failed: RRsetAnswer; owner: string }> {
    for (const name of caaSearchNames(hostname)) {
      let records: CaaRecord[];
      try {
        records = (await this.#resolver().resolveCaa(name)).map(caaRecordOf);
      } catch (err) {
        const answer = answerFromErrorCode((err as NodeJS.ErrnoException).code);
        if (answer.kind === 'nxdomain' || answer.kind === 'nodata') continue;
        return { failed: answer, owner: name };
      }
      if (records.length > 0) return { owner: await this.#aliasTarget(name), records };
    }
    return { owner: hostname, records: [] };
  }

  /** The end of the CNAME chain at `name` (at most 8 links), or `name` when it has no CNAME. */
  async #aliasTarget(name: string): Promise<string> {
    let current = name;
    for (let link = 0; link < MAX_CNAME_LINKS; link += 1) {
      const answer = await this.#query(current, (r, n) => r.resolveCname(n));
      const next = answer.kind === 'records' ? answer.values[0] : undefined;
      if (next === undefined) return current;
      current = next.endsWith('.') ? next.slice(0, -1) : next;
    }
    return current;
  }
}

/**
 * node:dns gives `{critical, issue: "ca"}`-shaped objects, one property named after the tag (Node 24
 * also adds `type: "CAA"`, which is not a tag).
 */
export function caaRecordOf(rec: NodeCaaRecord & { type?: string }): CaaRecord {
  const { critical, ...rest } = rec;
  const [tag, value] = Object.entries(rest).find(([k]) => k !== 'type') ?? ['', ''];
  return { critical, tag, value: String(value) };
}
