import { describe, expect, it } from 'vitest';
import { caaLookupName, caaSearchNames, evaluateCaa, isWildcardName, issuerDomainName } from './caa.js';

const ca = ['letsencrypt.org'];

describe('evaluateCaa', () => {
  it('allows issuance without records or without an issue property', () => {
    expect(evaluateCaa('example.com', [], ca).allowed).toBe(true);
    expect(evaluateCaa('example.com', [{ critical: 0, tag: 'iodef', value: 'mailto:a@b' }], ca).allowed).toBe(
      true,
    );
  });

  it('allows a CA named by an issue property, with parameters and any case', () => {
    const v = evaluateCaa(
      'example.com',
      [{ critical: 0, tag: 'issue', value: 'LetsEncrypt.org; validationmethods=http-01' }],
      ca,
    );
    expect(v).toMatchObject({ allowed: true, reason: 'CAAPermitsIssuer' });
  });

  it('names the excluding record and the record to add', () => {
    const v = evaluateCaa('example.com', [{ critical: 0, tag: 'issue', value: 'digicert.com' }], ca);
    expect(v.allowed).toBe(false);
    expect(v.reason).toBe('CAAForbidsIssuance');
    expect(v.message).toContain('CAA example.com 0 issue "digicert.com"');
    expect(v.message).toContain('add CAA example.com 0 issue "letsencrypt.org"');
  });

  it('forbids on issue ";" and on an unknown critical property', () => {
    expect(evaluateCaa('example.com', [{ critical: 0, tag: 'issue', value: ';' }], ca).allowed).toBe(false);
    const v = evaluateCaa('example.com', [{ critical: 128, tag: 'futuretag', value: 'x' }], ca);
    expect(v.allowed).toBe(false);
    expect(v.message).toContain('critical');
  });
});

describe('caa helpers', () => {
  it('climbs from the hostname to the top-level domain', () => {
    expect(caaSearchNames('a.b.example.com')).toEqual([
      'a.b.example.com',
      'b.example.com',
      'example.com',
      'com',
    ]);
  });
  it('reads the issuer domain name of an issue value', () => {
    expect(issuerDomainName(' Pebble.LetsEncrypt.org ; account=1')).toBe('pebble.letsencrypt.org');
  });
});

describe('caaRecordOf', () => {
  it('reads the tag from the one property named after it, ignoring type', async () => {
    const { caaRecordOf } = await import('./resolver.js');
    expect(caaRecordOf({ critical: 0, type: 'CAA', issue: 'digicert.com' })).toEqual({
      critical: 0,
      tag: 'issue',
      value: 'digicert.com',
    });
  });
});

describe('evaluateCaa for a wildcard name (RFC 8659 §4.3)', () => {
  const wildcard = { wildcard: true };
  const issue = (value: string): { critical: number; tag: string; value: string } => ({
    critical: 0,
    tag: 'issue',
    value,
  });
  const issuewild = (value: string): { critical: number; tag: string; value: string } => ({
    critical: 0,
    tag: 'issuewild',
    value,
  });

  it('issuewild takes precedence over issue: issue permits the CA, issuewild names another', () => {
    const records = [issue('letsencrypt.org'), issuewild('digicert.com')];
    const v = evaluateCaa('apps.example.com', records, ca, wildcard);
    expect(v.allowed).toBe(false);
    expect(v.reason).toBe('CAAForbidsIssuance');
    expect(v.message).toContain('Found CAA apps.example.com 0 issuewild "digicert.com"');
    expect(v.message).not.toContain('issue "letsencrypt.org"');
    expect(v.message).toContain('issuewild takes precedence over issue');
    expect(v.message).toContain('add CAA apps.example.com 0 issuewild "letsencrypt.org"');
    // The same RRset for the name itself: issuewild is ignored, issue permits.
    expect(evaluateCaa('apps.example.com', records, ca)).toMatchObject({
      allowed: true,
      reason: 'CAAPermitsIssuer',
    });
  });

  it('issuewild ";" forbids wildcard certificates only', () => {
    const records = [issue('letsencrypt.org'), issuewild(';')];
    expect(evaluateCaa('apps.example.com', records, ca, wildcard).allowed).toBe(false);
    expect(evaluateCaa('apps.example.com', records, ca).allowed).toBe(true);
  });

  it('issuewild naming the CA permits a wildcard even when issue names another CA', () => {
    const records = [issue('digicert.com'), issuewild('LetsEncrypt.org; accounturi=x')];
    expect(evaluateCaa('apps.example.com', records, ca, wildcard)).toMatchObject({
      allowed: true,
      reason: 'CAAPermitsIssuer',
    });
    expect(evaluateCaa('apps.example.com', records, ca).allowed).toBe(false);
  });

  it('without issuewild, issue applies to the wildcard; the record to add is an issuewild one', () => {
    const v = evaluateCaa('example.com', [issue('digicert.com')], ca, wildcard);
    expect(v.allowed).toBe(false);
    expect(v.message).toContain('Found CAA example.com 0 issue "digicert.com"');
    expect(v.message).toContain('with no issuewild property, issue applies to a wildcard name');
    expect(v.message).toContain('add CAA example.com 0 issuewild "letsencrypt.org"');
    expect(evaluateCaa('example.com', [issue('letsencrypt.org')], ca, wildcard).allowed).toBe(true);
  });

  it('no issue and no issuewild property: any CA may issue', () => {
    const v = evaluateCaa('example.com', [{ critical: 0, tag: 'iodef', value: 'mailto:a@b' }], ca, wildcard);
    expect(v).toMatchObject({ allowed: true, reason: 'NoCAARecords' });
  });

  it('an unknown critical property forbids a wildcard too', () => {
    const records = [issuewild('letsencrypt.org'), { critical: 128, tag: 'futuretag', value: 'x' }];
    expect(evaluateCaa('example.com', records, ca, wildcard).allowed).toBe(false);
  });

  it('looks up CAA from the base domain of a wildcard name (§3)', () => {
    expect(caaLookupName('*.apps.example.com')).toBe('apps.example.com');
    expect(caaLookupName('www.example.com')).toBe('www.example.com');
    expect(isWildcardName('*.apps.example.com')).toBe(true);
    expect(isWildcardName('apps.example.com')).toBe(false);
  });
});
