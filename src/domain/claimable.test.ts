import { describe, expect, it } from 'vitest';
import { claimableProblem, idna2008Property, idna2008Violation } from './claimable.js';

const strict = { allowSpecialUse: false };
const sandbox = { allowSpecialUse: true };

describe('claimableProblem', () => {
  it.each([
    ['www.example.com', strict],
    ['shop.example.co.uk', strict],
    ['example.de', strict],
    ['xn--bcher-kva.example.com', strict],
    ['www.shop.test', sandbox],
    ['www.shop.example', sandbox],
  ])('lets %s be claimed', (hostname, options) => {
    expect(claimableProblem(hostname, options)).toBeUndefined();
  });

  it.each([
    ['kubernetes.default.svc.cluster.local', '.local'],
    ['printer.local', '.local'],
    ['app.localhost', '.localhost'],
    ['nas.home.arpa', '.home.arpa'],
    ['git.corp.internal', '.internal'],
    ['x.invalid', '.invalid'],
    ['abc.onion', '.onion'],
  ])('never lets a cluster-internal or local name be claimed, even in a sandbox: %s', (hostname, suffix) => {
    const problem = claimableProblem(hostname, sandbox);
    expect(problem?.reason).toBe('HostnameNotPublic');
    expect(problem?.message).toContain(`under ${suffix}`);
  });

  it('refuses .test and .example unless the setting allows them (RFC 6761)', () => {
    expect(claimableProblem('www.shop.test', strict)).toMatchObject({ reason: 'HostnameNotPublic' });
    expect(claimableProblem('www.shop.example', strict)?.message).toContain('--allow-special-use-hostnames');
  });

  it('refuses a name under no ICANN suffix, and a public suffix itself', () => {
    expect(claimableProblem('shop.corp', strict)?.message).toContain('not under a top-level domain');
    expect(claimableProblem('co.uk', strict)?.message).toContain('is itself a public suffix (co.uk)');
    // A private-section suffix (github.io) is not ICANN's, but the name is under the ICANN suffix io.
    expect(claimableProblem('someone.github.io', strict)).toBeUndefined();
  });

  it('refuses an emoji label (valid in UTS #46, DISALLOWED in IDNA2008) naming the code point', () => {
    const problem = claimableProblem('xn--ls8h.example.com', strict);
    expect(problem?.reason).toBe('HostnameDisallowedCharacter');
    expect(problem?.message).toContain('U+1F4A9');
    expect(problem?.message).toContain('DISALLOWED');
  });
});

describe('idna2008Property (RFC 5892 §3)', () => {
  it.each([
    [0x61, 'PVALID'], // a
    [0xfc, 'PVALID'], // ü
    [0xdf, 'PVALID'], // ß, an exception
    [0x3c2, 'PVALID'], // final sigma, an exception
    [0x4e2d, 'PVALID'], // 中
    [0xdc, 'DISALLOWED'], // Ü: unstable under case folding
    [0x1f4a9, 'DISALLOWED'], // an emoji (So)
    [0x2764, 'DISALLOWED'], // a dingbat (So)
    [0x200d, 'CONTEXTJ'],
    [0xb7, 'CONTEXTO'],
    [0x0640, 'DISALLOWED'], // ARABIC TATWEEL, an exception
    [0x20d0, 'DISALLOWED'], // Combining Diacritical Marks for Symbols
    [0x1100, 'DISALLOWED'], // old Hangul Jamo
    [0xe0001, 'DISALLOWED'], // a default-ignorable tag character
  ])('U+%s is %s', (cp, property) => {
    expect(idna2008Property(cp)).toBe(property);
  });
});

describe('idna2008Violation (CONTEXTO rules, RFC 5892 Appendix A)', () => {
  it('allows a middle dot between two l (Catalan), and no other', () => {
    expect(idna2008Violation('col·legi')).toBeUndefined();
    expect(idna2008Violation('ca·sa')).toContain('U+00B7');
  });

  it('allows Arabic-Indic digits alone but not mixed with the extended ones', () => {
    expect(idna2008Violation('\u0628\u0661\u0662')).toBeUndefined();
    expect(idna2008Violation('\u0628\u0661\u06f2')).toBeDefined();
  });

  it('refuses a zero-width joiner (CONTEXTJ is not accepted here)', () => {
    expect(idna2008Violation('a\u200db')).toContain('CONTEXTJ');
  });
});
