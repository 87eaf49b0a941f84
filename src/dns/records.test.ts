import { describe, expect, it } from 'vitest';
import { isApex, requiredDnsRecords } from './records.js';

describe('requiredDnsRecords', () => {
  it('asks for a CNAME with TTL 3600 for a subdomain', () => {
    expect(requiredDnsRecords('www.example.com', 't.example')).toEqual([
      { type: 'CNAME', name: 'www.example.com', value: 't.example', ttl: 3600 },
    ]);
  });

  it('asks for ALIAS/ANAME for an apex, with the provider caveat', () => {
    const [r] = requiredDnsRecords('example.co.uk', 't.example');
    expect(r?.type).toBe('ALIAS');
    expect(r?.note).toContain('not every DNS provider');
  });

  it('knows apexes under multi-label public suffixes', () => {
    expect(isApex('example.co.uk')).toBe(true);
    expect(isApex('shop.example.co.uk')).toBe(false);
    expect(isApex('example.com')).toBe(true);
  });
});
