/**
 * The DNS records the customer must create (docs/customdomains.md, "DNS instructions
 * (`status.dnsRecords`)"), written so that a dashboard can show them as they are: the owner name
 * both in full and relative to the customer's zone (what a DNS provider's "Name" or "Host" field
 * asks for, `@` at the apex), and for an apex the A/AAAA records a provider without ALIAS/ANAME
 * needs instead. Pure.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { getDomain } from 'tldts';
import type { AlternativeDnsRecord, RequiredDnsRecord } from '../api/customdomain.js';

/** TTL in seconds given in the DNS instructions (docs/customdomains.md, "DNS instructions"). */
export const INSTRUCTED_TTL_SECONDS = 3600;

/** The relative name of a zone's own apex, as zone files (RFC 1035 §5.1) and DNS providers write it. */
export const APEX_RELATIVE_NAME = '@';

/**
 * True when `hostname` is an apex: a registrable domain with no subdomain label, such as
 * `example.com` or `example.co.uk` (Public Suffix List, via tldts). Private suffixes count as
 * public ones, so a tenant of a hosting suffix is an apex too.
 */
export function isApex(hostname: string): boolean {
  return getDomain(hostname, { allowPrivateDomains: true }) === hostname;
}

/**
 * The registered domain of `hostname` (eTLD+1 by the Public Suffix List, private suffixes included,
 * e.g. `example.co.uk` for `www.shop.example.co.uk`): the unit of the CA's certificates-per-domain
 * limit, and the zone the customer's DNS provider holds. The hostname itself when the list knows no
 * such domain for it.
 */
export function registeredDomain(hostname: string): string {
  return getDomain(hostname, { allowPrivateDomains: true }) ?? hostname;
}

/**
 * `name` relative to `zone` (RFC 1035 §5.1: a relative name is completed by the origin): `www.shop`
 * for `www.shop.example.co.uk` in `example.co.uk`, `@` for the zone itself. Both normalized
 * (lowercase, no trailing dot). A name outside the zone is returned whole.
 */
export function relativeName(name: string, zone: string): string {
  if (name === zone) return APEX_RELATIVE_NAME;
  return name.endsWith(`.${zone}`) ? name.slice(0, -(zone.length + 1)) : name;
}

/** `name` with its zone (the registered domain) and its name relative to it. */
export function ownerName(name: string): { name: string; relativeName: string; zone: string } {
  const zone = registeredDomain(name);
  return { name, relativeName: relativeName(name, zone), zone };
}

const ALIAS_NOTE =
  'An apex cannot hold a CNAME: create an ALIAS or ANAME record (some providers call it CNAME flattening); not every DNS provider supports these.';

/** The apex note: what to do at a provider without ALIAS/ANAME, with or without fixed addresses. */
function apexNote(addresses: readonly string[]): string {
  if (addresses.length === 0) {
    return `${ALIAS_NOTE} The platform publishes no fixed IP addresses to use in A/AAAA records instead: at a provider without ALIAS/ANAME, move the domain's DNS to one that has them, or use a subdomain such as www.`;
  }
  return `${ALIAS_NOTE} Where yours does not, create the A/AAAA records listed as alternatives instead (the platform's addresses: ${addresses.join(', ')}), and no other A/AAAA records at the apex.`;
}

/** The A/AAAA records for `hostname`, one per address, IPv4 first, each in the order given. */
function addressRecords(hostname: string, addresses: readonly string[]): AlternativeDnsRecord[] {
  const { relativeName: rel } = ownerName(hostname);
  const of = (type: 'A' | 'AAAA', value: string): AlternativeDnsRecord => ({
    type,
    name: hostname,
    relativeName: rel,
    value,
    ttl: INSTRUCTED_TTL_SECONDS,
  });
  return [
    ...addresses.filter((ip) => isIPv4(ip)).map((ip) => of('A', ip)),
    ...addresses.filter((ip) => isIPv6(ip)).map((ip) => of('AAAA', ip)),
  ];
}

/**
 * The record to create for `hostname`: a CNAME to `target` for a subdomain; for an apex an ALIAS
 * (ALIAS or ANAME) to `target`, with the A/AAAA records to create instead at a provider without
 * them when the platform has fixed addresses (`--apex-addresses`; the note says so when it has none,
 * rather than offering the target's current addresses, which may change without notice).
 *
 * @param hostname normalized customer hostname
 * @param target the platform's CNAME target ({platform_cname_target}), normalized
 * @param apexAddresses the platform's fixed IPv4/IPv6 addresses for an apex; others are ignored
 */
export function requiredDnsRecords(
  hostname: string,
  target: string,
  apexAddresses: readonly string[] = [],
): RequiredDnsRecord[] {
  const owner = ownerName(hostname);
  if (isApex(hostname)) {
    const alternatives = addressRecords(hostname, apexAddresses);
    return [
      {
        type: 'ALIAS',
        ...owner,
        value: target,
        ttl: INSTRUCTED_TTL_SECONDS,
        note: apexNote(alternatives.map((r) => r.value)),
        ...(alternatives.length > 0 ? { alternatives } : {}),
      },
    ];
  }
  return [{ type: 'CNAME', ...owner, value: target, ttl: INSTRUCTED_TTL_SECONDS }];
}

/**
 * The optional DNS-01 delegation record (docs/customdomains.md, "Certificates before the move"):
 * `_acme-challenge.<hostname> CNAME <target>`, where `target` is the domain's name in the platform's
 * challenge zone (`challenge-delegation.ts delegationTarget`). With it the certificate is issued by
 * DNS-01 before the hostname's own record points at the platform.
 *
 * @param hostname normalized customer hostname
 * @param target the delegation target, normalized
 */
export function delegationRecord(hostname: string, target: string): RequiredDnsRecord {
  return {
    type: 'CNAME',
    ...ownerName(`_acme-challenge.${hostname}`),
    value: target,
    ttl: INSTRUCTED_TTL_SECONDS,
    optional: true,
    note: `Optional: with this record the certificate for ${hostname} is issued before ${hostname} points at the platform, so a live site moves without a certificate warning. Keep it: renewals use it too.`,
  };
}
