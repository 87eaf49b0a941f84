/**
 * Properties of the hostname rules (src/domain/hostname.ts), over generated names: valid names are
 * accepted and already canonical, each kind of mistake is refused with its rule's message,
 * normalization is idempotent and touches ASCII letters only (RFC 4343), and A-labels round-trip
 * (RFC 5891 §5.4).
 */
import fc from 'fast-check';
import { domainToASCII, domainToUnicode } from 'node:url';
import { describe, expect, it } from 'vitest';
import { topLevelLabel, validHostname, withCase } from '../../test/fixtures/arbitraries.js';
import {
  HOSTNAME_RULES,
  hostnameProblems,
  invalidALabels,
  normalizeDnsName,
  validateHostname,
  type HostnameReason,
} from './hostname.js';

const caseMask = fc.array(fc.boolean(), { minLength: 1, maxLength: 16 });

/** A position in `s` (0 … s.length). */
const cut = (s: string, at: number): [string, string] => {
  const i = at % (s.length + 1);
  return [s.slice(0, i), s.slice(i)];
};

describe('hostname properties', () => {
  it('accepts every valid hostname, with no problem at all', () => {
    fc.assert(
      fc.property(validHostname, (hostname) => {
        expect(validateHostname(hostname)).toBeUndefined();
        expect(hostnameProblems(hostname)).toEqual([]);
      }),
    );
  });

  it('keeps a valid hostname as it is, and brings any case and a root dot back to it', () => {
    fc.assert(
      fc.property(validHostname, caseMask, fc.boolean(), (hostname, upper, rootDot) => {
        expect(normalizeDnsName(hostname)).toBe(hostname);
        const written = withCase(hostname, upper) + (rootDot ? '.' : '');
        expect(normalizeDnsName(written)).toBe(hostname);
      }),
    );
  });

  it('normalizes idempotently, lowercasing ASCII letters only (RFC 4343)', () => {
    // Names as DNS writes them end in at most one dot (the root); "a.." is no name. Any code point,
    // then letters where full Unicode case mapping differs from ASCII's: KELVIN SIGN lowercases to
    // an ASCII k, dotted capital I to two code points.
    const anyCodePoint = fc.integer({ min: 0, max: 0x10ffff }).map((c) => String.fromCodePoint(c));
    const tricky = fc.constantFrom('A', 'z', '.', '-', 'Ä', 'ß', '\u212a', '\u0130', 'Σ');
    const name = fc
      .array(fc.oneof(anyCodePoint, tricky), { maxLength: 30 })
      .map((chars) => chars.join(''))
      .filter((s) => !s.endsWith('..'));
    fc.assert(
      fc.property(name, (s) => {
        const once = normalizeDnsName(s);
        const body = s.endsWith('.') ? s.slice(0, -1) : s;
        expect(normalizeDnsName(once)).toBe(once);
        expect(once).toBe(body.replace(/[A-Z]/g, (c) => c.toLowerCase()));
      }),
    );
  });

  /** A mistake made in a valid hostname, and the rule that must name it. */
  const mistakes: fc.Arbitrary<{ hostname: string; reason: HostnameReason }> = fc.oneof(
    fc.tuple(validHostname, fc.nat()).map(([h, at]) => {
      // Uppercase one letter: the top-level label is all letters, so there is one.
      const letters = [...h].flatMap((c, i) => (/[a-z]/.test(c) ? [i] : []));
      const i = letters[at % letters.length] ?? 0;
      return {
        hostname: h.slice(0, i) + h.charAt(i).toUpperCase() + h.slice(i + 1),
        reason: 'HostnameNotLowercase' as const,
      };
    }),
    validHostname.map((h) => ({ hostname: `${h}.`, reason: 'HostnameTrailingDot' as const })),
    validHostname.map((h) => ({ hostname: `*.${h}`, reason: 'HostnameWildcard' as const })),
    fc
      .tuple(validHostname, fc.nat(), fc.constantFrom('_', '/', '@', ' ', '!', '~', 'é', ','))
      .map(([h, at, bad]) => {
        const [head, tail] = cut(h, at);
        return { hostname: head + bad + tail, reason: 'HostnameInvalidCharacter' as const };
      }),
    validHostname.map((h) => ({ hostname: h.replace('.', '..'), reason: 'HostnameEmptyLabel' as const })),
    validHostname.map((h) => ({ hostname: `.${h}`, reason: 'HostnameEmptyLabel' as const })),
    fc
      .tuple(fc.integer({ min: 64, max: 80 }), validHostname)
      .map(([n, h]) => ({ hostname: `${'a'.repeat(n)}.${h}`, reason: 'HostnameLabelTooLong' as const })),
    validHostname.map((h) => ({ hostname: `-${h}`, reason: 'HostnameLabelHyphen' as const })),
    validHostname.map((h) => ({ hostname: h.replace('.', '-.'), reason: 'HostnameLabelHyphen' as const })),
    fc
      .tuple(fc.stringMatching(/^[a-wyz0-9][a-z0-9]--[a-z0-9]{1,5}$/), validHostname)
      .map(([label, h]) => ({ hostname: `${label}.${h}`, reason: 'HostnameReservedHyphens' as const })),
    fc
      .tuple(validHostname, fc.integer({ min: 0, max: 99_999 }))
      .map(([h, n]) => ({ hostname: `${h}.${n}`, reason: 'HostnameNumericTopLevelLabel' as const })),
    topLevelLabel.map((h) => ({ hostname: h, reason: 'HostnameSingleLabel' as const })),
    fc
      .array(validHostname, { minLength: 1, maxLength: 30 })
      .map((hs) => hs.join('.'))
      .filter((h) => h.length > 253)
      .map((h) => ({ hostname: h, reason: 'HostnameTooLong' as const })),
    fc.ipV4().map((h) => ({ hostname: h, reason: 'HostnameIsIPAddress' as const })),
    fc.ipV6().map((h) => ({ hostname: h, reason: 'HostnameIsIPAddress' as const })),
  );

  it("refuses each kind of mistake, naming it with its rule's message", () => {
    fc.assert(
      fc.property(mistakes, ({ hostname, reason }) => {
        const first = validateHostname(hostname);
        expect(first, hostname).toBeDefined();
        expect(first?.message).toBe(HOSTNAME_RULES.find((r) => r.reason === first?.reason)?.message);
        expect(hostnameProblems(hostname).map((p) => p.reason)).toContain(reason);
      }),
    );
  });

  /** A lowercase label with at least one letter outside ASCII (Latin, Greek, Cyrillic, CJK). */
  const unicodeLabel = fc
    .array(fc.constantFrom(...'abcxyz09äöüßçéñøåœαβγδжщяё中文字'), { minLength: 1, maxLength: 12 })
    .map((chars) => chars.join(''))
    .filter((label) => [...label].some((c) => (c.codePointAt(0) ?? 0) > 0x7f));

  it('turns Unicode names into A-labels that round-trip and that the rules accept (RFC 5891 §5.4)', () => {
    fc.assert(
      fc.property(fc.array(unicodeLabel, { minLength: 1, maxLength: 3 }), topLevelLabel, (labels, tld) => {
        const ascii = domainToASCII([...labels, tld].join('.'));
        expect(ascii).not.toBe('');
        expect(
          ascii
            .split('.')
            .slice(0, -1)
            .every((l) => l.startsWith('xn--')),
        ).toBe(true);
        expect(invalidALabels(ascii)).toEqual([]);
        expect(domainToASCII(domainToUnicode(ascii))).toBe(ascii);
        expect(validateHostname(ascii)).toBeUndefined();
      }),
    );
  });

  it('refuses an xn-- label that decodes to plain ASCII (an A-label must hold a non-ASCII character)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9]{1,40}$/), validHostname, (ascii, h) => {
        // Punycode (RFC 3492) writes an all-ASCII label as itself and a trailing delimiter.
        const fake = `xn--${ascii}-`;
        expect(invalidALabels(`${fake}.${h}`)).toEqual([fake]);
      }),
    );
  });
});
