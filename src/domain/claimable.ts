/**
 * Which hostnames a CustomDomain may claim at all (docs/customdomains.md, "Who holds a hostname"), beyond the
 * syntax rules of hostname.ts: a name a public CA can issue for and that the public DNS can point at
 * the platform. Pure: no I/O; the Public Suffix List comes with the `tldts` package.
 *
 * - Never: names that only resolve inside a network or a cluster, the special-use names of
 *   RFC 6761 that must not resolve publicly (`localhost`, `invalid`), `local` (multicast DNS,
 *   RFC 6762; Kubernetes' `cluster.local` is under it), `home.arpa` (RFC 8375), `internal` (ICANN's
 *   private-use top-level domain, 2024), `alt` (RFC 9476) and `onion` (RFC 7686).
 * - Only with the setting `--allow-special-use-hostnames`: `test` and `example` (RFC 6761 §6.2,
 *   §6.5), which the sandbox and the tests use; a platform leaves it off.
 * - Otherwise: under a suffix of the ICANN section of the Public Suffix List, and not a public
 *   suffix itself (`co.uk`), so that a registrable domain exists (`example.co.uk`); a name under
 *   an unknown top-level label (`shop.corp`) is not public.
 * - Internationalized labels: each A-label decodes to a U-label whose code points are all PVALID by
 *   the derivation of RFC 5892 §2-3 (Unicode general categories and properties as this runtime's
 *   Unicode version has them), or CONTEXTO with its rule met (RFC 5892 Appendix A.3-A.9).
 *   CONTEXTJ (zero-width joiners, A.1-A.2) needs joining types no runtime API gives, so a label with
 *   one is refused; the Bidi rule of RFC 5893 is not checked. Emoji and other symbols are DISALLOWED
 *   in IDNA2008, although UTS #46 (browsers, `url.domainToASCII`) maps them.
 */
import { domainToUnicode } from 'node:url';
import { parse } from 'tldts';

/** Why a hostname cannot be claimed: the Accepted condition's reason. */
export type ClaimableReason = 'HostnameNotPublic' | 'HostnameDisallowedCharacter';

export interface ClaimableProblem {
  readonly reason: ClaimableReason;
  /** A sentence for a person: what is wrong and what to do. */
  readonly message: string;
}

/** Top-level and second-level names that never resolve on the public internet (sources above). */
export const NEVER_PUBLIC_SUFFIXES: readonly string[] = [
  'localhost',
  'invalid',
  'local',
  'home.arpa',
  'internal',
  'alt',
  'onion',
];

/** RFC 6761 names for documentation and testing: claimable only with `allowSpecialUse`. */
export const SPECIAL_USE_TEST_SUFFIXES: readonly string[] = ['test', 'example'];

function under(hostname: string, suffix: string): boolean {
  return hostname === suffix || hostname.endsWith(`.${suffix}`);
}

/** RFC 5892 Appendix B.1 exceptions (§2.6), by code point. */
const EXCEPTIONS: ReadonlyMap<number, 'PVALID' | 'CONTEXTO' | 'DISALLOWED'> = new Map([
  [0x00df, 'PVALID'],
  [0x03c2, 'PVALID'],
  [0x06fd, 'PVALID'],
  [0x06fe, 'PVALID'],
  [0x0f0b, 'PVALID'],
  [0x3007, 'PVALID'],
  [0x00b7, 'CONTEXTO'],
  [0x0375, 'CONTEXTO'],
  [0x05f3, 'CONTEXTO'],
  [0x05f4, 'CONTEXTO'],
  [0x30fb, 'CONTEXTO'],
  ...Array.from({ length: 10 }, (_, i) => [0x0660 + i, 'CONTEXTO'] as const),
  ...Array.from({ length: 10 }, (_, i) => [0x06f0 + i, 'CONTEXTO'] as const),
  [0x0640, 'DISALLOWED'],
  [0x07fa, 'DISALLOWED'],
  [0x302e, 'DISALLOWED'],
  [0x302f, 'DISALLOWED'],
  [0x3031, 'DISALLOWED'],
  [0x3032, 'DISALLOWED'],
  [0x3033, 'DISALLOWED'],
  [0x3034, 'DISALLOWED'],
  [0x3035, 'DISALLOWED'],
  [0x303b, 'DISALLOWED'],
]);

const UNASSIGNED = /^\p{Cn}$/u;
const IGNORABLE = /^[\p{Default_Ignorable_Code_Point}\p{White_Space}\p{Noncharacter_Code_Point}]$/u;
const LETTER_DIGITS = /^[\p{Ll}\p{Lu}\p{Lo}\p{Nd}\p{Lm}\p{Mn}\p{Mc}]$/u;
/** RFC 5892 §2.4 IgnorableBlocks and §2.9 OldHangulJamo, as code point ranges. */
const DISALLOWED_RANGES: readonly (readonly [number, number])[] = [
  [0x20d0, 0x20ff], // Combining Diacritical Marks for Symbols
  [0x1d100, 0x1d1ff], // Musical Symbols
  [0x1d200, 0x1d24f], // Ancient Greek Musical Notation
  [0x1100, 0x11ff], // Hangul Jamo
  [0xa960, 0xa97f], // Hangul Jamo Extended-A
  [0xd7b0, 0xd7ff], // Hangul Jamo Extended-B
];

/** The IDNA2008 derived property of one code point (RFC 5892 §3, in its order). */
export function idna2008Property(
  cp: number,
): 'PVALID' | 'CONTEXTJ' | 'CONTEXTO' | 'DISALLOWED' | 'UNASSIGNED' {
  const exception = EXCEPTIONS.get(cp);
  if (exception !== undefined) return exception;
  const ch = String.fromCodePoint(cp);
  if (UNASSIGNED.test(ch)) return 'UNASSIGNED';
  if (/^[a-z0-9-]$/.test(ch)) return 'PVALID';
  if (cp === 0x200c || cp === 0x200d) return 'CONTEXTJ';
  // Unstable: NFKC_Casefold changes it (lowercasing NFKC approximates the case fold).
  if (ch.normalize('NFKC').toLowerCase().normalize('NFKC') !== ch) return 'DISALLOWED';
  if (IGNORABLE.test(ch)) return 'DISALLOWED';
  if (DISALLOWED_RANGES.some(([lo, hi]) => cp >= lo && cp <= hi)) return 'DISALLOWED';
  return LETTER_DIGITS.test(ch) ? 'PVALID' : 'DISALLOWED';
}

/** Whether the CONTEXTO code point at `i` of `cps` meets its rule (RFC 5892 Appendix A.3-A.9). */
function contextOk(cps: readonly number[], i: number): boolean {
  const cp = cps[i] ?? 0;
  const str = (c: number | undefined) => (c === undefined ? '' : String.fromCodePoint(c));
  if (cp === 0x00b7) return cps[i - 1] === 0x6c && cps[i + 1] === 0x6c; // l·l (A.3)
  if (cp === 0x0375) return /^\p{Script=Greek}$/u.test(str(cps[i + 1])); // A.4
  if (cp === 0x05f3 || cp === 0x05f4) return /^\p{Script=Hebrew}$/u.test(str(cps[i - 1])); // A.5, A.6
  if (cp === 0x30fb)
    return cps.some(
      (c) => /^[\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Han}]$/u.test(str(c)) && c !== 0x30fb,
    ); // A.7
  const arabicIndic = (c: number) => c >= 0x0660 && c <= 0x0669;
  const extended = (c: number) => c >= 0x06f0 && c <= 0x06f9;
  if (arabicIndic(cp)) return !cps.some(extended); // A.8
  if (extended(cp)) return !cps.some(arabicIndic); // A.9
  return false;
}

/**
 * The first code point of U-label `label` that IDNA2008 does not allow there, as `U+XXXX` with the
 * character, or undefined when every code point is allowed.
 */
export function idna2008Violation(label: string): string | undefined {
  const cps = [...label].map((c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < cps.length; i += 1) {
    const cp = cps[i] ?? 0;
    const property = idna2008Property(cp);
    if (property === 'PVALID') continue;
    if (property === 'CONTEXTO' && contextOk(cps, i)) continue;
    const hex = cp.toString(16).toUpperCase().padStart(4, '0');
    return `U+${hex} "${String.fromCodePoint(cp)}" (${property === 'CONTEXTJ' ? 'CONTEXTJ, not accepted here' : property})`;
  }
  return undefined;
}

/**
 * Why `hostname` cannot be claimed, or undefined when it can. `hostname` is normalized (lowercase,
 * no trailing dot) and already passed the syntax rules (hostname.ts) and the A-label round trip
 * (`invalidALabels`).
 *
 * @param options.allowSpecialUse `--allow-special-use-hostnames`: `test` and `example` claimable
 */
export function claimableProblem(
  hostname: string,
  options: { allowSpecialUse: boolean },
): ClaimableProblem | undefined {
  const never = NEVER_PUBLIC_SUFFIXES.find((s) => under(hostname, s));
  if (never !== undefined) {
    return {
      reason: 'HostnameNotPublic',
      message: `${hostname} is under .${never}, a name that never resolves on the public internet (cluster-internal, local or special-use): no public CA issues a certificate for it. Attach a hostname under a public domain.`,
    };
  }
  const specialUse = SPECIAL_USE_TEST_SUFFIXES.find((s) => under(hostname, s));
  if (specialUse !== undefined && !options.allowSpecialUse) {
    return {
      reason: 'HostnameNotPublic',
      message: `${hostname} is under .${specialUse}, a special-use name for documentation and testing (RFC 6761) that the public DNS does not delegate. Attach a hostname under a public domain (a platform that tests with such names sets --allow-special-use-hostnames).`,
    };
  }
  if (specialUse === undefined) {
    const parsed = parse(hostname, { allowPrivateDomains: false });
    if (parsed.isIcann !== true || parsed.domain === null) {
      const why =
        parsed.isIcann === true
          ? `is itself a public suffix (${parsed.publicSuffix ?? hostname}), under which anyone registers domains`
          : `is not under a top-level domain of the public DNS (ICANN section of the Public Suffix List)`;
      return {
        reason: 'HostnameNotPublic',
        message: `${hostname} ${why}: it cannot be attached as a custom domain. Attach a hostname under a domain you registered.`,
      };
    }
  }
  for (const label of hostname.split('.')) {
    if (!label.startsWith('xn--')) continue;
    const violation = idna2008Violation(domainToUnicode(label));
    if (violation !== undefined) {
      return {
        reason: 'HostnameDisallowedCharacter',
        message: `${hostname} has the label ${label} (${domainToUnicode(label)}), whose ${violation} is not allowed in an internationalized domain name by IDNA2008 (RFC 5892); browsers may still show it, but registries and CAs refuse such names. Attach a hostname whose labels are letters, digits and hyphens of one script.`,
      };
    }
  }
  return undefined;
}
