import { readFileSync } from 'node:fs';
import { describe, it, expect } from 'vitest';
import { parse } from 'yaml';
import { BAD_HOSTNAMES, GOOD_HOSTNAMES, LONGEST_HOSTNAME } from '../../test/fixtures/hostnames.js';
import {
  HOSTNAME_RULES,
  MAX_HOSTNAME_LENGTH,
  hostnameProblems,
  invalidALabels,
  normalizeDnsName,
  validateHostname,
} from './hostname.js';

describe('validateHostname', () => {
  it.each(GOOD_HOSTNAMES)('accepts $hostname ($why)', ({ hostname }) => {
    expect(validateHostname(hostname)).toBeUndefined();
    expect(hostnameProblems(hostname)).toEqual([]);
  });

  it.each(BAD_HOSTNAMES)('rejects "$hostname" ($why) with $reason only', ({ hostname, reason }) => {
    const rule = HOSTNAME_RULES.find((r) => r.reason === reason);
    expect(validateHostname(hostname)).toEqual({ reason, message: rule?.message });
    // The API server reports every failed rule: a typical mistake must fail one rule only.
    expect(hostnameProblems(hostname).map((p) => p.reason)).toEqual([reason]);
  });

  it('has a bad example for every rule', () => {
    const covered = new Set(BAD_HOSTNAMES.map((b) => b.reason));
    expect(HOSTNAME_RULES.filter((r) => !covered.has(r.reason)).map((r) => r.reason)).toEqual([]);
  });

  it('reports the most direct problem first when several rules fail', () => {
    expect(validateHostname('2001:DB8::1')?.reason).toBe('HostnameIsIPAddress');
    expect(hostnameProblems('2001:DB8::1').map((p) => p.reason)).toEqual([
      'HostnameIsIPAddress',
      'HostnameNotLowercase',
    ]);
    expect(validateHostname('*.Example.com.')?.reason).toBe('HostnameWildcard');
    expect(validateHostname('WWW.Example.com.')?.reason).toBe('HostnameNotLowercase');
    expect(validateHostname('-a..b')?.reason).toBe('HostnameEmptyLabel');
    expect(hostnameProblems('x'.repeat(300)).map((p) => p.reason)).toEqual([
      'HostnameTooLong',
      'HostnameLabelTooLong',
      'HostnameSingleLabel',
    ]);
  });

  it('counts length in characters (code points), as CEL size() does', () => {
    expect(LONGEST_HOSTNAME).toHaveLength(MAX_HOSTNAME_LENGTH);
    // 253 code points, 254 UTF-16 code units: too long only if counted in code units.
    const astral = `${LONGEST_HOSTNAME.slice(0, -1)}😀`;
    expect(hostnameProblems(astral).map((p) => p.reason)).toEqual(['HostnameInvalidCharacter']);
  });

  it('keeps R-LDH labels other than xn-- out, in any label', () => {
    for (const hostname of ['ab--c.example.com', 'www.ab--c.example', 'x---y.example.com', 'xa--y.example']) {
      expect(validateHostname(hostname)?.reason, hostname).toBe('HostnameReservedHyphens');
    }
    expect(validateHostname('xn--ls8h.example')).toBeUndefined();
  });

  it('does not mistake names with digits or hex letters for addresses', () => {
    for (const hostname of ['1.example.com', 'cafe.example', 'dead.beef.example', '10.0.0.1.example.com']) {
      expect(validateHostname(hostname), hostname).toBeUndefined();
    }
    expect(validateHostname('10.0.0.1')?.reason).toBe('HostnameIsIPAddress');
    expect(validateHostname('1.2.3')?.reason).toBe('HostnameIsIPAddress');
  });

  it('has messages that tell each problem apart', () => {
    const messages = HOSTNAME_RULES.map((r) => r.message);
    expect(new Set(messages).size).toBe(messages.length);
    for (const m of messages) {
      expect(messages.filter((other) => other.includes(m))).toEqual([m]);
    }
    expect(new Set(HOSTNAME_RULES.map((r) => r.reason)).size).toBe(HOSTNAME_RULES.length);
    for (const { reason } of HOSTNAME_RULES) expect(reason).toMatch(/^Hostname[A-Z][A-Za-z]*$/);
  });
});

interface ValidationRule {
  rule: string;
  message?: string;
  fieldPath?: string;
}
interface StringSchema {
  maxLength?: number;
  'x-kubernetes-validations'?: ValidationRule[];
}
interface CustomDomainCrd {
  spec: {
    versions: {
      schema: {
        openAPIV3Schema: {
          properties: {
            spec: { properties: { hostname: StringSchema; redirect: { properties: { to: StringSchema } } } };
          };
        };
      };
    }[];
  };
}

describe('crds/portico.dev_customdomains.yaml', () => {
  const crd = parse(
    readFileSync(new URL('../../crds/portico.dev_customdomains.yaml', import.meta.url), 'utf8'),
  ) as CustomDomainCrd;
  const spec = crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec;
  const expected = HOSTNAME_RULES.map(({ cel, message }) => ({ rule: cel, message }));

  it('has the hostname rules of src/domain/hostname.ts on spec.hostname, in order', () => {
    expect(spec?.properties.hostname['x-kubernetes-validations']).toEqual(expected);
  });

  it('has the same rules on spec.redirect.to', () => {
    expect(spec?.properties.redirect.properties.to['x-kubernetes-validations']).toEqual(expected);
  });

  it('bounds both fields so that the API server can bound the CEL cost', () => {
    for (const field of [spec?.properties.hostname, spec?.properties.redirect.properties.to]) {
      expect(field?.maxLength).toBeGreaterThan(MAX_HOSTNAME_LENGTH);
      expect(field?.maxLength).toBeLessThanOrEqual(1024);
    }
  });
});

describe('normalizeDnsName', () => {
  it.each([
    ['sites.platform.example.', 'sites.platform.example'],
    ['Sites.Platform.Example', 'sites.platform.example'],
    ['WWW.EXAMPLE.COM.', 'www.example.com'],
    ['www.example.com', 'www.example.com'],
    ['xn--bcher-kva.example.', 'xn--bcher-kva.example'],
    ['example.com..', 'example.com.'],
    ['.', ''],
    ['', ''],
  ])('%j -> %j', (name, normalized) => {
    expect(normalizeDnsName(name)).toBe(normalized);
  });

  it('lowercases ASCII letters only (RFC 4343)', () => {
    expect(normalizeDnsName('BÜCHER.Example')).toBe('bÜcher.example');
  });
});

describe('invalidALabels', () => {
  it('finds xn-- labels that are not punycode of a valid label (RFC 5891, UTS #46)', () => {
    expect(invalidALabels('xn--a.example.com')).toEqual(['xn--a']);
    expect(invalidALabels('www.xn--.xn--zz-.example')).toEqual(['xn--', 'xn--zz-']);
    expect(invalidALabels('XN--A.example.com')).toEqual(['xn--a']);
  });

  it('accepts valid A-labels and names without any', () => {
    expect(invalidALabels('xn--bcher-kva.example')).toEqual([]);
    expect(invalidALabels('shop.xn--bcher-kva.example.')).toEqual([]);
    expect(invalidALabels('www.example.com')).toEqual([]);
  });
});
