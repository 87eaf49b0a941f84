import { describe, expect, it } from 'vitest';
import {
  AppsSubdomainError,
  MAX_APPS_DOMAIN_LENGTH,
  appsDomainProblem,
  appsSubdomain,
  appsSubdomainLabel,
  appsWildcard,
} from './apps-subdomain.js';
import { validateHostname } from './hostname.js';

describe('appsSubdomainLabel', () => {
  it.each(['blog', 'shop-web', '9lives', 'a', 'a-b-c', 'x'.repeat(63)])(
    'keeps the namespace %s as it is: a namespace name is a DNS label',
    (namespace) => {
      expect(appsSubdomainLabel(namespace)).toBe(namespace);
    },
  );

  it('writes a namespace with "--" as hash--name: the "--" at positions 11-12, never 3-4', () => {
    const label = appsSubdomainLabel('xn--pple-43d');
    expect(label).toMatch(/^[0-9a-f]{10}--xn-pple-43d$/);
    expect(label.indexOf('--')).toBe(10);
    expect(validateHostname(`${label}.apps.example`)).toBeUndefined();
  });

  it('turns every run of hyphens of such a namespace into one, and cuts it to 63 characters', () => {
    const namespace = `ab--${'c'.repeat(40)}---${'d'.repeat(15)}`;
    const label = appsSubdomainLabel(namespace);
    expect(label.length).toBeLessThanOrEqual(63);
    expect(label.slice(12)).toBe(`ab-${'c'.repeat(40)}-${'d'.repeat(7)}`);
    expect(label.slice(12)).not.toContain('--');
    expect(validateHostname(`${label}.apps.example`)).toBeUndefined();
  });

  it('never ends the label with a hyphen after the cut', () => {
    // 51 characters are kept after hash--: the cut falls right after a hyphen here.
    const namespace = `a--${'b'.repeat(48)}-cdef`;
    const label = appsSubdomainLabel(namespace);
    expect(label).toBe(`${label.slice(0, 10)}--a-${'b'.repeat(48)}`);
    expect(label.endsWith('-')).toBe(false);
    expect(validateHostname(`${label}.apps.example`)).toBeUndefined();
  });

  it('is injective: the namespace its mapped form spells, and namespaces that differ only in hyphen runs, get other labels', () => {
    const mapped = appsSubdomainLabel('ab--cd');
    // A namespace named exactly like the mapped form contains "--" too, so it is mapped again.
    expect(appsSubdomainLabel(mapped)).not.toBe(mapped);
    const others = ['ab-cd', 'ab--cd', 'ab---cd', 'ab----cd'].map(appsSubdomainLabel);
    expect(new Set(others).size).toBe(others.length);
    // A plain namespace never contains "--"; a mapped label always does.
    expect(appsSubdomainLabel('ab-cd')).not.toContain('--');
    expect(others.slice(1).every((l) => l.includes('--'))).toBe(true);
  });

  it('is stable: the same namespace gives the same label', () => {
    expect(appsSubdomainLabel('my--shop')).toBe(appsSubdomainLabel('my--shop'));
  });

  it.each(['', 'Blog', 'blog.example', '-blog', 'blog-', 'b_log', 'x'.repeat(64)])(
    'refuses "%s", which is not a namespace name',
    (namespace) => {
      expect(() => appsSubdomainLabel(namespace)).toThrow(AppsSubdomainError);
    },
  );
});

describe('appsSubdomain', () => {
  it('puts the label before the apps domain', () => {
    expect(appsSubdomain('blog', 'apps.portico.test')).toBe('blog.apps.portico.test');
  });

  it('stays a valid hostname for the longest label and the longest apps domain', () => {
    const appsDomain = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(MAX_APPS_DOMAIN_LENGTH - 128)}`;
    expect(appsDomain.length).toBe(MAX_APPS_DOMAIN_LENGTH);
    expect(appsDomainProblem(appsDomain)).toBeUndefined();
    const hostname = appsSubdomain('z'.repeat(63), appsDomain);
    expect(hostname.length).toBe(253);
    expect(validateHostname(hostname)).toBeUndefined();
  });
});

describe('appsDomainProblem', () => {
  it('accepts a domain with room for a label', () => {
    expect(appsDomainProblem('apps.platform.example')).toBeUndefined();
  });

  it('refuses one without room for a 63-character label', () => {
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(MAX_APPS_DOMAIN_LENGTH - 127)}`;
    expect(appsDomainProblem(long)).toMatch(/at most 189 characters/);
  });

  it.each(['Apps.example', '*.apps.example', 'apps', 'apps.example.'])(
    'refuses %s with the hostname rule it breaks',
    (domain) => {
      expect(appsDomainProblem(domain)).toBeDefined();
    },
  );
});

describe('appsWildcard', () => {
  it('is the wildcard of the apps domain', () => {
    expect(appsWildcard('apps.portico.test')).toBe('*.apps.portico.test');
  });
});
