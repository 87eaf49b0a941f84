/**
 * What a DNS query answered, as a value the pure verdict logic can read (RFC 1034 §4.3.2 terms).
 * The resolver adapter (`resolver.ts`) produces these; nothing here does I/O.
 */

/** The answer to one query for one (name, type). */
export type RRsetAnswer =
  /** An RRset: the record data in presentation form (a hostname without trailing dot, or an address). */
  | { kind: 'records'; values: string[] }
  /** The name does not exist (RCODE 3). */
  | { kind: 'nxdomain' }
  /** The name exists but has no record of this type (NOERROR, empty answer). */
  | { kind: 'nodata' }
  /** The server failed to answer (RCODE 2). */
  | { kind: 'servfail' }
  /** No answer within the resolver's timeout and tries. */
  | { kind: 'timeout' }
  /** Any other failure: refused, connection refused, malformed reply. `code` is the resolver's code. */
  | { kind: 'error'; code: string };

/**
 * RRsets at a name besides CNAME, A and AAAA that a CNAME cannot share its name with (RFC 1034
 * §3.6.2, RFC 2181 §10.1): MX values as `<preference> <exchange>`, TXT values with their
 * character-strings joined, NS values as host names.
 */
export interface OtherRRsets {
  mx: RRsetAnswer;
  txt: RRsetAnswer;
  ns: RRsetAnswer;
}

/** The RRsets read for one hostname. */
export interface HostnameAnswers {
  cname: RRsetAnswer;
  a: RRsetAnswer;
  aaaa: RRsetAnswer;
  /**
   * Read only for a subdomain whose name exists without a CNAME (`DnsResolver.lookupHostname`);
   * absent otherwise.
   */
  others?: OtherRRsets;
}

export { normalizeDnsName } from '../domain/hostname.js';

/** The values of an answer that holds records; [] for any other kind. */
export function recordValues(answer: RRsetAnswer): string[] {
  return answer.kind === 'records' ? answer.values : [];
}
