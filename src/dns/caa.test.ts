import { describe, expect, it } from 'vitest';
import { caaSearchNames, evaluateCaa, issuerDomainName } from './caa.js';

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
