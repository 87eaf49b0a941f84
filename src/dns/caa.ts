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
 * - §4.3: for a Wildcard Domain Name (`*.X`, whose relevant RRset is X's: §3), `issuewild`
 *   properties, when the RRset has any, take precedence over `issue`: only they are consulted, and
 *   `issuewild ";"` forbids wildcard certificates while `issue` still permits the CA for X itself.
 *   Without `issuewild`, the `issue` properties apply. For any other name `issuewild` is ignored.
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

/** Whether `name` is a Wildcard Domain Name (RFC 8659 §2: `*.` followed by a domain name). */
export function isWildcardName(name: string): boolean {
  return name.startsWith('*.');
}

/**
 * The name whose CAA RRset is relevant to a certificate for `name` (RFC 8659 §3): the name itself,
 * or for a Wildcard Domain Name `*.X` its base domain X (its search starts there and climbs).
 */
export function caaLookupName(name: string): string {
  return isWildcardName(name) ? name.slice(2) : name;
}

/**
 * @param owner the name that holds `records` (the hostname or the ancestor where they were found)
 * @param records the relevant CAA RRset; [] when no name up the tree has one
 * @param caIdentities the CA's issuer domain names, e.g. ["letsencrypt.org"]
 * @param options.wildcard the certificate asked for is for a Wildcard Domain Name (`*.X`): an
 *   `issuewild` property, if the RRset has one, decides instead of `issue` (§4.3), and the record
 *   to add is an `issuewild` one
 */
export function evaluateCaa(
  owner: string,
  records: readonly CaaRecord[],
  caIdentities: readonly string[],
  options: { wildcard?: boolean } = {},
): CaaVerdict {
  if (records.length === 0) {
    return { allowed: true, reason: 'NoCAARecords', message: 'No CAA records restrict issuance.' };
  }
  const wildcard = options.wildcard === true;
  const wantedCa = caIdentities[0] ?? 'the CA';
  const add = `add CAA ${owner} 0 ${wildcard ? 'issuewild' : 'issue'} "${wantedCa}"`;
  const critical = records.filter((r) => (r.critical & 128) !== 0 && !KNOWN_TAGS.has(r.tag.toLowerCase()));
  if (critical.length > 0) {
    return {
      allowed: false,
      reason: 'CAAForbidsIssuance',
      message: `Found ${critical.map((r) => present(owner, r)).join(', ')}: a critical CAA property the CA does not understand forbids issuance (RFC 8659 §4.1). Remove it, then ${add}.`,
    };
  }
  const { tag, relevant } = issuerProperties(records, wildcard);
  if (relevant.length === 0) {
    return {
      allowed: true,
      reason: 'NoCAARecords',
      message: `The CAA records of ${owner} set no ${wildcard ? 'issue or issuewild' : 'issue'} property.`,
    };
  }
  const identities = new Set(caIdentities.map((c) => c.toLowerCase()));
  if (relevant.some((r) => identities.has(issuerDomainName(r.value)))) {
    return {
      allowed: true,
      reason: 'CAAPermitsIssuer',
      message: wildcard
        ? `The CAA ${tag} properties of ${owner} permit ${wantedCa} for wildcard names.`
        : `The CAA records of ${owner} permit ${wantedCa}.`,
    };
  }
  const which = wildcard ? WILDCARD_NOTE[tag] : '';
  return {
    allowed: false,
    reason: 'CAAForbidsIssuance',
    message: `Found ${relevant.map((r) => present(owner, r)).join(', ')}, which exclude${relevant.length === 1 ? 's' : ''} the platform's certificate authority (${[...identities].join(', ') || 'unknown'})${which}: ${add}.`,
  };
}

/** What a refusal of a wildcard adds, by the property that decided (RFC 8659 §4.3). */
const WILDCARD_NOTE = {
  issuewild:
    ' for wildcard certificates (issuewild takes precedence over issue for a wildcard name, RFC 8659 §4.3)',
  issue:
    ' for wildcard certificates (with no issuewild property, issue applies to a wildcard name, RFC 8659 §4.3)',
} as const;

/**
 * The properties that decide (RFC 8659 §4.2, §4.3): for a wildcard, the `issuewild` ones when the
 * RRset has any; otherwise the `issue` ones (possibly none).
 */
function issuerProperties(
  records: readonly CaaRecord[],
  wildcard: boolean,
): { tag: 'issue' | 'issuewild'; relevant: CaaRecord[] } {
  const issuewild = wildcard ? records.filter((r) => r.tag.toLowerCase() === 'issuewild') : [];
  if (issuewild.length > 0) return { tag: 'issuewild', relevant: issuewild };
  return { tag: 'issue', relevant: records.filter((r) => r.tag.toLowerCase() === 'issue') };
}

/** The names to query in order, from `hostname` up to its top-level domain (RFC 8659 §3). */
export function caaSearchNames(hostname: string): string[] {
  const labels = hostname.split('.');
  return labels.map((_, i) => labels.slice(i).join('.')).filter((n) => n.length > 0);
}
