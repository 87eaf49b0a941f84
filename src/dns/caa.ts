/**
 * CAA evaluation (RFC 8659): may the platform's CA issue for a hostname? Pure: reads the relevant
 * RRset found by climbing the tree (`relevantCaaName` in the adapter), returns a verdict whose
 * message names the record found and the record to add.
 *
 * - §3: the relevant RRset is the first non-empty CAA RRset found at the name or an ancestor. A
 *   CNAME at the name is followed by the resolver, so CAA reached through the CNAME target counts.
 * - §4.2: without any `issue` property, any CA may issue; with some, one of them must name the CA's
 *   issuer domain name (RFC 8555 §7.1.1 `caaIdentities`). `issue ";"` forbids every CA.
 * - §4.1: a property with the critical flag and an unknown tag forbids issuance.
 */

/** One CAA resource record, as the resolver returns it. */
export interface CaaRecord {
  critical: number;
  tag: string;
  value: string;
}

export type CaaVerdict =
  | { allowed: true; reason: 'NoCAARecords' | 'CAAPermitsIssuer'; message: string }
  | { allowed: false; reason: 'CAAForbidsIssuance'; message: string };

const KNOWN_TAGS = new Set([
  'issue',
  'issuewild',
  'iodef',
  'contactemail',
  'contactphone',
  'issuemail',
  'issuevmc',
]);

/** The issuer domain name of an `issue` value: the part before `;`, trimmed and lowercased (§4.2). */
export function issuerDomainName(value: string): string {
  return (value.split(';')[0] ?? '').trim().toLowerCase();
}

function present(owner: string, r: CaaRecord): string {
  return `CAA ${owner} ${r.critical} ${r.tag} "${r.value}"`;
}

/**
 * @param owner the name that holds `records` (the hostname or the ancestor where they were found)
 * @param records the relevant CAA RRset; [] when no name up the tree has one
 * @param caIdentities the CA's issuer domain names, e.g. ["letsencrypt.org"]
 */
export function evaluateCaa(
  owner: string,
  records: readonly CaaRecord[],
  caIdentities: readonly string[],
): CaaVerdict {
  if (records.length === 0) {
    return { allowed: true, reason: 'NoCAARecords', message: 'No CAA records restrict issuance.' };
  }
  const wantedCa = caIdentities[0] ?? 'the CA';
  const add = `add CAA ${owner} 0 issue "${wantedCa}"`;
  const critical = records.filter((r) => (r.critical & 128) !== 0 && !KNOWN_TAGS.has(r.tag.toLowerCase()));
  if (critical.length > 0) {
    return {
      allowed: false,
      reason: 'CAAForbidsIssuance',
      message: `Found ${critical.map((r) => present(owner, r)).join(', ')}: a critical CAA property the CA does not understand forbids issuance (RFC 8659 §4.1). Remove it, then ${add}.`,
    };
  }
  const issue = records.filter((r) => r.tag.toLowerCase() === 'issue');
  if (issue.length === 0) {
    return {
      allowed: true,
      reason: 'NoCAARecords',
      message: `The CAA records of ${owner} set no issue property.`,
    };
  }
  const identities = new Set(caIdentities.map((c) => c.toLowerCase()));
  if (issue.some((r) => identities.has(issuerDomainName(r.value)))) {
    return {
      allowed: true,
      reason: 'CAAPermitsIssuer',
      message: `The CAA records of ${owner} permit ${wantedCa}.`,
    };
  }
  return {
    allowed: false,
    reason: 'CAAForbidsIssuance',
    message: `Found ${issue.map((r) => present(owner, r)).join(', ')}, which exclude${issue.length === 1 ? 's' : ''} the platform's certificate authority (${[...identities].join(', ') || 'unknown'}): ${add}.`,
  };
}

/** The names to query in order, from `hostname` up to its top-level domain (RFC 8659 §3). */
export function caaSearchNames(hostname: string): string[] {
  const labels = hostname.split('.');
  return labels.map((_, i) => labels.slice(i).join('.')).filter((n) => n.length > 0);
}
