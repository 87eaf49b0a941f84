/**
 * The DNS record the customer must create (spec §2, "DNS record that the customer must create").
 * Pure.
 */
import { getDomain } from 'tldts';
import type { RequiredDnsRecord } from '../api/customdomain.js';

/** TTL in seconds given in the spec's instructions (§2). */
export const INSTRUCTED_TTL_SECONDS = 3600;

/**
 * True when `hostname` is an apex: a registrable domain with no subdomain label, such as
 * `example.com` or `example.co.uk` (Public Suffix List, via tldts). Private suffixes count as
 * public ones, so a tenant of a hosting suffix is an apex too.
 */
export function isApex(hostname: string): boolean {
  return getDomain(hostname, { allowPrivateDomains: true }) === hostname;
}

/**
 * The record to create for `hostname`: CNAME for a subdomain, ALIAS/ANAME for an apex.
 *
 * @param hostname normalized customer hostname
 * @param target the platform's CNAME target
 */
export function requiredDnsRecords(hostname: string, target: string): RequiredDnsRecord[] {
  if (isApex(hostname)) {
    return [
      {
        type: 'ALIAS',
        name: hostname,
        value: target,
        ttl: INSTRUCTED_TTL_SECONDS,
        note: 'An apex cannot hold a CNAME: create an ALIAS or ANAME record; not every DNS provider supports these.',
      },
    ];
  }
  return [{ type: 'CNAME', name: hostname, value: target, ttl: INSTRUCTED_TTL_SECONDS }];
}

/**
 * The registered domain of `hostname` (eTLD+1 by the Public Suffix List, private suffixes included,
 * e.g. `example.co.uk` for `www.shop.example.co.uk`): the unit of the CA's certificates-per-domain
 * limit. The hostname itself when the list knows no such domain for it.
 */
export function registeredDomain(hostname: string): string {
  return getDomain(hostname, { allowPrivateDomains: true }) ?? hostname;
}
