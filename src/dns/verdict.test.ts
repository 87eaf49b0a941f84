import { describe, expect, it } from 'vitest';
import type { HostnameAnswers, RRsetAnswer } from './answers.js';
import { PROPAGATION_NOTE, verifyApex, verifySubdomain } from './verdict.js';

const target = 'sites.platform.example';
const host = 'www.example.com';
const nodata: RRsetAnswer = { kind: 'nodata' };
const rec = (...values: string[]): RRsetAnswer => ({ kind: 'records', values });
const answers = (partial: Partial<HostnameAnswers>): HostnameAnswers => ({
  cname: nodata,
  a: nodata,
  aaaa: nodata,
  ...partial,
});

describe('verifySubdomain', () => {
  it('verifies a CNAME equal to the target, ignoring case and a trailing dot', () => {
    const v = verifySubdomain(
      host,
      target,
      answers({ cname: rec('Sites.Platform.Example.'), a: rec('10.0.0.1') }),
    );
    expect(v).toMatchObject({ verified: true, reason: 'RecordMatches' });
  });

  it('names both records when the CNAME points elsewhere', () => {
    const v = verifySubdomain(host, target, answers({ cname: rec('other.host.example') }));
    expect(v.verified).toBe(false);
    expect(v.reason).toBe('CNAMEMismatch');
    expect(v.message).toContain('CNAME www.example.com -> other.host.example');
    expect(v.message).toContain(`CNAME www.example.com -> ${target}`);
  });

  it('names an A record found where the CNAME should be', () => {
    const v = verifySubdomain(host, target, answers({ a: rec('192.0.2.7') }));
    expect(v.reason).toBe('ConflictingRecord');
    expect(v.message).toContain('A www.example.com -> 192.0.2.7');
    expect(v.message).toContain(`CNAME www.example.com -> ${target}`);
    expect(v.records).toEqual([{ type: 'A', name: host, value: '192.0.2.7' }]);
  });

  it('names MX, TXT and NS records at the name as conflicting (RFC 1034 §3.6.2), not as RecordNotFound', () => {
    const v = verifySubdomain(
      host,
      target,
      answers({
        others: { mx: rec('10 mail.example.com'), txt: rec('v=spf1 -all'), ns: nodata },
      }),
    );
    expect(v).toMatchObject({ verified: false, reason: 'ConflictingRecord', transient: false });
    expect(v.message).toContain(
      'Found MX www.example.com -> 10 mail.example.com, TXT www.example.com -> v=spf1 -all where CNAME',
    );
    expect(v.message).toContain('RFC 1034 §3.6.2');
    expect(v.message).not.toContain('zone of its own');
    expect(v.records).toEqual([
      { type: 'MX', name: host, value: '10 mail.example.com' },
      { type: 'TXT', name: host, value: 'v=spf1 -all' },
    ]);
  });

  it('says a delegated name (NS at it) is a zone whose apex cannot hold a CNAME', () => {
    const v = verifySubdomain(
      host,
      target,
      answers({ others: { mx: nodata, txt: nodata, ns: rec('ns1.dns.example', 'ns2.dns.example') } }),
    );
    expect(v.reason).toBe('ConflictingRecord');
    expect(v.message).toContain(
      'NS www.example.com -> ns1.dns.example, NS www.example.com -> ns2.dns.example',
    );
    expect(v.message).toContain(
      `The NS records make ${host} a zone of its own, whose apex cannot hold a CNAME: remove the delegation, or create ALIAS (or ANAME) ${host} -> ${target} in that zone`,
    );
  });

  it('lists addresses and other records together, and ignores a failed answer among the others', () => {
    const v = verifySubdomain(
      host,
      target,
      answers({
        a: rec('192.0.2.7'),
        others: { mx: { kind: 'servfail' }, txt: rec('hello'), ns: { kind: 'timeout' } },
      }),
    );
    expect(v.reason).toBe('ConflictingRecord');
    expect(v.records.map((r) => r.type)).toEqual(['A', 'TXT']);
  });

  it('is RecordNotFound when the others were read and hold nothing', () => {
    const v = verifySubdomain(host, target, answers({ others: { mx: nodata, txt: nodata, ns: nodata } }));
    expect(v.reason).toBe('RecordNotFound');
  });

  it('tells NXDOMAIN from no data and carries the propagation note', () => {
    const nx = verifySubdomain(
      host,
      target,
      answers({ cname: { kind: 'nxdomain' }, a: { kind: 'nxdomain' } }),
    );
    const nd = verifySubdomain(host, target, answers({}));
    expect(nx.reason).toBe('RecordNotFound');
    expect(nx.message).toContain('NXDOMAIN');
    expect(nd.message).toContain('has no CNAME record');
    expect(nd.message).toContain(PROPAGATION_NOTE);
    expect(nx.transient).toBe(false);
  });

  it('tells SERVFAIL, timeout and other errors apart, all transient', () => {
    const sf = verifySubdomain(host, target, answers({ cname: { kind: 'servfail' } }));
    const to = verifySubdomain(host, target, answers({ cname: { kind: 'timeout' } }));
    const er = verifySubdomain(host, target, answers({ cname: { kind: 'error', code: 'ECONNREFUSED' } }));
    expect([sf.reason, to.reason, er.reason]).toEqual(['DNSServerFailure', 'DNSTimeout', 'DNSError']);
    expect(er.message).toContain('ECONNREFUSED');
    expect([sf.transient, to.transient, er.transient]).toEqual([true, true, true]);
  });
});

describe('verifyApex', () => {
  const targetAddresses = { a: rec('203.0.113.10'), aaaa: rec('2001:db8::10') };

  it('verifies when every address is one of the target', () => {
    const v = verifyApex('example.com', target, answers({ a: rec('203.0.113.10') }), targetAddresses);
    expect(v).toMatchObject({ verified: true, reason: 'RecordMatches' });
  });

  it('names a leftover parking A record beside the right ones', () => {
    const v = verifyApex(
      'example.com',
      target,
      answers({ a: rec('203.0.113.10', '198.51.100.1'), aaaa: rec('2001:db8::10') }),
      targetAddresses,
    );
    expect(v.reason).toBe('ConflictingRecord');
    expect(v.message).toContain('A example.com -> 198.51.100.1');
    expect(v.message).not.toContain('A example.com -> 203.0.113.10,');
  });

  it('reports addresses that all point elsewhere, and a missing record', () => {
    expect(
      verifyApex('example.com', target, answers({ a: rec('198.51.100.1') }), targetAddresses).reason,
    ).toBe('AddressMismatch');
    const missing = verifyApex('example.com', target, answers({}), targetAddresses);
    expect(missing.reason).toBe('RecordNotFound');
    expect(missing.message).toContain('ALIAS');
  });

  it('blames the platform when the target has no addresses', () => {
    const v = verifyApex('example.com', target, answers({ a: rec('203.0.113.10') }), {
      a: nodata,
      aaaa: nodata,
    });
    expect(v).toMatchObject({ verified: false, reason: 'TargetUnresolvable', transient: true });
  });
});
