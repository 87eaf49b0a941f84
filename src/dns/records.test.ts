import { describe, expect, it } from 'vitest';
import type { RequiredDnsRecord } from '../api/customdomain.js';
import { delegationRecord, isApex, ownerName, relativeName, requiredDnsRecords } from './records.js';

/**
 * The records as a dashboard shows them, one row per record with the fields as they are (no
 * computation): Type, Name (relative, as the provider asks), Value, TTL; then the zone, the full name
 * and the note; alternatives indented under the record they replace.
 */
function dashboard(records: readonly RequiredDnsRecord[]): string {
  const lines: string[] = [];
  for (const r of records) {
    lines.push(
      `${r.type}  ${r.relativeName ?? ''}  ${r.value}  ${r.ttl}   (zone ${r.zone ?? ''}; full name ${r.name})`,
    );
    if (r.note) lines.push(`  ${r.note}`);
    for (const alt of r.alternatives ?? [])
      lines.push(`  or: ${alt.type}  ${alt.relativeName}  ${alt.value}  ${alt.ttl}`);
  }
  return lines.join('\n');
}

describe('requiredDnsRecords', () => {
  it('asks for a CNAME with TTL 3600 for a subdomain, named relative to the zone and in full', () => {
    expect(requiredDnsRecords('www.example.com', 't.example')).toEqual([
      {
        type: 'CNAME',
        name: 'www.example.com',
        relativeName: 'www',
        zone: 'example.com',
        value: 't.example',
        ttl: 3600,
      },
    ]);
  });

  it('renders www.shop.example.co.uk as a dashboard shows it: name www.shop in zone example.co.uk', () => {
    expect(dashboard(requiredDnsRecords('www.shop.example.co.uk', 'sites.platform.example'))).toBe(
      'CNAME  www.shop  sites.platform.example  3600   (zone example.co.uk; full name www.shop.example.co.uk)',
    );
  });

  it('renders an apex as @ with ALIAS/ANAME, and the A/AAAA records of the platform as the alternative', () => {
    const records = requiredDnsRecords('example.co.uk', 'sites.platform.example', [
      '2001:db8::10',
      '192.0.2.10',
      '192.0.2.11',
    ]);
    expect(dashboard(records)).toBe(
      [
        'ALIAS  @  sites.platform.example  3600   (zone example.co.uk; full name example.co.uk)',
        "  An apex cannot hold a CNAME: create an ALIAS or ANAME record (some providers call it CNAME flattening); not every DNS provider supports these. Where yours does not, create the A/AAAA records listed as alternatives instead (the platform's addresses: 192.0.2.10, 192.0.2.11, 2001:db8::10), and no other A/AAAA records at the apex.",
        '  or: A  @  192.0.2.10  3600',
        '  or: A  @  192.0.2.11  3600',
        '  or: AAAA  @  2001:db8::10  3600',
      ].join('\n'),
    );
    expect(records[0]?.alternatives?.every((r) => r.name === 'example.co.uk')).toBe(true);
  });

  it('says so for an apex when the platform has no fixed addresses, and offers none', () => {
    const [r] = requiredDnsRecords('example.com', 't.example');
    expect(r).toMatchObject({ type: 'ALIAS', name: 'example.com', relativeName: '@', zone: 'example.com' });
    expect(r?.alternatives).toBeUndefined();
    expect(r?.note).toContain('not every DNS provider');
    expect(r?.note).toContain('The platform publishes no fixed IP addresses');
  });

  it('ignores configured values that are not IP addresses', () => {
    const [r] = requiredDnsRecords('example.com', 't.example', ['not-an-ip']);
    expect(r?.alternatives).toBeUndefined();
    expect(r?.note).toContain('no fixed IP addresses');
  });

  it('knows apexes under multi-label public suffixes', () => {
    expect(isApex('example.co.uk')).toBe(true);
    expect(isApex('shop.example.co.uk')).toBe(false);
    expect(isApex('example.com')).toBe(true);
  });
});

describe('relativeName', () => {
  it('names a record relative to its zone, @ for the apex (RFC 1035 §5.1)', () => {
    expect(ownerName('www.shop.example.co.uk')).toEqual({
      name: 'www.shop.example.co.uk',
      relativeName: 'www.shop',
      zone: 'example.co.uk',
    });
    expect(ownerName('shop.example.com').relativeName).toBe('shop');
    expect(ownerName('example.com').relativeName).toBe('@');
    // A tenant of a private suffix (PSL private section) has its own zone.
    expect(ownerName('www.myshop.github.io')).toMatchObject({
      relativeName: 'www',
      zone: 'myshop.github.io',
    });
  });

  it('returns a name outside the zone whole', () => {
    expect(relativeName('www.other.example', 'example.com')).toBe('www.other.example');
    expect(relativeName('notexample.com', 'example.com')).toBe('notexample.com');
  });
});

describe('delegationRecord', () => {
  it('is the optional CNAME at _acme-challenge.<hostname>, named relative to the zone', () => {
    const record = delegationRecord('www.shop.example.co.uk', 'abc.challenges.platform.net');
    expect(record).toMatchObject({
      type: 'CNAME',
      name: '_acme-challenge.www.shop.example.co.uk',
      relativeName: '_acme-challenge.www.shop',
      zone: 'example.co.uk',
      value: 'abc.challenges.platform.net',
      ttl: 3600,
      optional: true,
    });
    expect(record.note).toMatch(/^Optional: /);
    expect(delegationRecord('example.com', 'abc.challenges.platform.net').relativeName).toBe(
      '_acme-challenge',
    );
  });
});
