/**
 * Hostname rules for `CustomDomain.spec.hostname` and `CustomDomain.spec.redirect.to`.
 *
 * The API server enforces these same rules at admission, as CEL rules (`x-kubernetes-validations`) in
 * `crds/portico.dev_customdomains.yaml`. Each entry of {@link HOSTNAME_RULES} is one of those CEL rules:
 * its `cel` text and `message` appear verbatim in the CRD (a unit test keeps the two in step), and its
 * `accepts` predicate is the TypeScript twin of the CEL expression, so the operator can name the same
 * problem for a value that reached it some other way (an older CRD, a `redirect.to` computed elsewhere).
 *
 * Pure: no I/O, no clock.
 *
 * Sources of the rules:
 * - RFC 1035 §2.3.4: a label is at most 63 octets and a name at most 255 octets on the wire, which is
 *   253 characters in text form without the trailing dot. RFC 1035 §2.3.1 gives the letters, digits
 *   and hyphen syntax ("LDH"), and that a label neither starts nor ends with a hyphen.
 * - RFC 1123 §2.1: a label may start with a digit (so `123.example.com` is valid), and a hostname is
 *   never in dotted-decimal form, since the top-level label is not all digits (also RFC 3696 §2).
 * - RFC 5890 §2.3.1 and RFC 5891 §4.2.3.1: an internationalized name is written with A-labels
 *   (punycode, `xn--…`); other labels with `--` in the third and fourth positions are reserved.
 * - RFC 4343: DNS names compare case-insensitively in ASCII only (see {@link normalizeDnsName}).
 * - The platform's own limits: one fully qualified name per CustomDomain (no wildcard, no single
 *   label, no IP address), lowercase, no trailing dot, so that the value is stored in one canonical
 *   form and two CustomDomains for the same name are recognisably equal.
 */
import { domainToASCII, domainToUnicode } from 'node:url';

/** Why a hostname was rejected, in the UpperCamelCase form Kubernetes uses for condition reasons. */
export type HostnameReason =
  | 'HostnameEmpty'
  | 'HostnameTooLong'
  | 'HostnameIsIPAddress'
  | 'HostnameWildcard'
  | 'HostnameNotLowercase'
  | 'HostnameTrailingDot'
  | 'HostnameInvalidCharacter'
  | 'HostnameEmptyLabel'
  | 'HostnameLabelTooLong'
  | 'HostnameLabelHyphen'
  | 'HostnameReservedHyphens'
  | 'HostnameNumericTopLevelLabel'
  | 'HostnameSingleLabel';

/** One rejected hostname: the reason and the message the API server also gives for it. */
export interface HostnameProblem {
  readonly reason: HostnameReason;
  /** One sentence that names the problem and says what to write instead. Same text as the CRD's. */
  readonly message: string;
}

/** One hostname rule: a CEL rule of the CRD and its TypeScript twin. */
export interface HostnameRule extends HostnameProblem {
  /** The CEL expression, exactly as in the CRD; true means the hostname passes this rule. */
  readonly cel: string;
  /** The same predicate as {@link cel}, evaluated in TypeScript. */
  readonly accepts: (hostname: string) => boolean;
}

/** The longest hostname in text form: 255 octets on the wire (RFC 1035 §2.3.4) less 2. */
export const MAX_HOSTNAME_LENGTH = 253;
/** The longest label (RFC 1035 §2.3.4). */
export const MAX_LABEL_LENGTH = 63;

// Regular expressions shared by several rules. CEL's `matches` is an unanchored RE2 search, which is
// what RegExp.prototype.test does; the `u` flag makes JavaScript count code points as RE2 does.
const IPV4_LIKE = /^[0-9.]+$/u;
const IPV6_LIKE = /^\[?[0-9a-fA-F]*:[0-9a-fA-F]*:[0-9a-fA-F:.]*\]?$/u;
const IPV4_LIKE_CEL = String.raw`self.matches(r'^[0-9.]+$')`;
const IPV6_LIKE_CEL = String.raw`self.matches(r'^\[?[0-9a-fA-F]*:[0-9a-fA-F]*:[0-9a-fA-F:.]*\]?$')`;

/** Length in code points, as CEL's `size()` counts a string (not in UTF-16 units, nor in graphemes). */
function codePointLength(s: string): number {
  return Array.from(s).length;
}

/**
 * The hostname rules, in the order {@link validateHostname} reports them: the first rule a hostname
 * fails is the one that most directly says what is wrong. The rules are written so that a typical
 * mistake fails exactly one of them (for example `*` and uppercase letters are left to their own
 * rules, not also reported as invalid characters), so the API server, which reports every failed
 * rule, usually shows a single message too.
 */
export const HOSTNAME_RULES: readonly HostnameRule[] = [
  {
    reason: 'HostnameEmpty',
    message: 'hostname must not be empty; write a fully qualified name, e.g. www.example.com',
    cel: `size(self) > 0`,
    accepts: (h) => h.length > 0,
  },
  {
    reason: 'HostnameTooLong',
    message: 'hostname must be at most 253 characters (RFC 1035); use a shorter name',
    cel: `size(self) <= ${MAX_HOSTNAME_LENGTH}`,
    accepts: (h) => codePointLength(h) <= MAX_HOSTNAME_LENGTH,
  },
  {
    reason: 'HostnameIsIPAddress',
    message: 'hostname must be a DNS name, not an IP address, e.g. www.example.com',
    cel: `!${IPV4_LIKE_CEL} && !${IPV6_LIKE_CEL}`,
    accepts: (h) => !IPV4_LIKE.test(h) && !IPV6_LIKE.test(h),
  },
  {
    reason: 'HostnameWildcard',
    message: 'hostname must not be a wildcard; create one CustomDomain for each name, e.g. www.example.com',
    cel: `!self.contains('*')`,
    accepts: (h) => !h.includes('*'),
  },
  {
    reason: 'HostnameNotLowercase',
    message: 'hostname must be lowercase, e.g. www.example.com',
    cel: `!self.matches('[A-Z]')`,
    accepts: (h) => !/[A-Z]/u.test(h),
  },
  {
    reason: 'HostnameTrailingDot',
    message: 'hostname must not end with a dot; write www.example.com, not www.example.com.',
    cel: `!self.endsWith('.')`,
    accepts: (h) => !h.endsWith('.'),
  },
  {
    // Uppercase letters and `*` have rules of their own; an IPv6 address is reported as an address.
    reason: 'HostnameInvalidCharacter',
    message:
      "hostname may contain only a-z, 0-9, '-' and '.' (no scheme, port or path); " +
      'write an internationalized name as punycode, e.g. xn--bcher-kva.example',
    cel: `self.matches('^[a-zA-Z0-9.*-]*$') || ${IPV6_LIKE_CEL}`,
    accepts: (h) => /^[a-zA-Z0-9.*-]*$/u.test(h) || IPV6_LIKE.test(h),
  },
  {
    // A trailing dot has its own rule.
    reason: 'HostnameEmptyLabel',
    message:
      'hostname must not contain empty labels (a leading dot or two dots in a row); ' +
      'write a.example.com, not a..example.com',
    cel: `!self.startsWith('.') && !self.contains('..')`,
    accepts: (h) => !h.startsWith('.') && !h.includes('..'),
  },
  {
    reason: 'HostnameLabelTooLong',
    message:
      'each label of hostname (the text between dots) must be at most 63 characters (RFC 1035); ' +
      'shorten the long label',
    cel: `!self.matches('[^.]{${MAX_LABEL_LENGTH + 1},}')`,
    accepts: (h) => !new RegExp(`[^.]{${MAX_LABEL_LENGTH + 1},}`, 'u').test(h),
  },
  {
    reason: 'HostnameLabelHyphen',
    message:
      'labels must not start or end with a hyphen; write my-shop.example.com, not -my-shop.example.com',
    cel: String.raw`!self.matches(r'(^|\.)-|-($|\.)')`,
    accepts: (h) => !/(^|\.)-|-($|\.)/u.test(h),
  },
  {
    // RFC 5891 §4.2.3.1: `??--` labels are reserved; of them only A-labels (`xn--`) are in use.
    reason: 'HostnameReservedHyphens',
    message:
      "a label with '--' as its third and fourth characters must be punycode (xn--...); " +
      'write ab-cd.example.com, not ab--cd.example.com',
    cel: String.raw`!self.matches(r'(^|\.)([^.x][^.]|x[^.n])--')`,
    accepts: (h) => !/(^|\.)([^.x][^.]|x[^.n])--/u.test(h),
  },
  {
    // RFC 1123 §2.1: the top-level label is alphabetic. IP addresses have a rule of their own.
    reason: 'HostnameNumericTopLevelLabel',
    message: 'the last label of hostname (the top-level domain) must not be all digits, e.g. www.example.com',
    cel: String.raw`!self.matches(r'\.[0-9]+$') || ${IPV4_LIKE_CEL} || self.contains(':')`,
    accepts: (h) => !/\.[0-9]+$/u.test(h) || IPV4_LIKE.test(h) || h.includes(':'),
  },
  {
    // An empty value and an IPv6 address (which has no dot) have their own rules.
    reason: 'HostnameSingleLabel',
    message: 'hostname must be a fully qualified name with at least one dot, e.g. example.com, not example',
    cel: `self.contains('.') || self.contains(':') || size(self) == 0`,
    accepts: (h) => h.includes('.') || h.includes(':') || h.length === 0,
  },
];

/**
 * Every hostname rule that `hostname` fails, in {@link HOSTNAME_RULES} order: the messages the API
 * server gives for the value (it reports all failed rules, when nothing else blocks validation).
 * An empty array means the hostname is valid.
 */
export function hostnameProblems(hostname: string): HostnameProblem[] {
  return HOSTNAME_RULES.filter((rule) => !rule.accepts(hostname)).map(({ reason, message }) => ({
    reason,
    message,
  }));
}

/**
 * Checks one hostname as `CustomDomain.spec.hostname` or `spec.redirect.to` must be written: one
 * fully qualified DNS name, lowercase, LDH labels of 1 to 63 characters, at most 253 characters, at
 * least one dot, internationalized labels as punycode A-labels, no trailing dot, no wildcard, not an
 * IP address.
 *
 * @returns `undefined` when the hostname is valid; otherwise the first problem found, as
 *   `{ reason, message }` with the same message the API server gives. Never throws.
 */
export function validateHostname(hostname: string): HostnameProblem | undefined {
  const rule = HOSTNAME_RULES.find((r) => !r.accepts(hostname));
  return rule === undefined ? undefined : { reason: rule.reason, message: rule.message };
}

/**
 * The form in which to compare a DNS name, e.g. one from a DNS answer with one from a spec: ASCII
 * letters lowercased (DNS is case-insensitive in ASCII only, RFC 4343) and one trailing dot (the
 * root, as in `sites.platform.example.`) removed. Does not validate; `''` and `'.'` give `''`.
 */
export function normalizeDnsName(name: string): string {
  const lower = name.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * The labels of `hostname` written as A-labels (`xn--…`, RFC 5890 §2.3.2.1) that are not valid
 * ones: not decodable as punycode (RFC 3492), or decoding to a Unicode label that UTS #46 processing
 * (Node's `url.domainToASCII`, the WHATWG URL host parser) does not turn back into the same A-label
 * (RFC 5891 §5.4: an A-label must round-trip). The CRD's CEL rules cannot decode punycode, so the
 * operator checks this when it accepts a domain; a CA refuses such a name anyway.
 *
 * @returns the offending labels, lowercase, in order; `[]` when there is none. Pure; never throws.
 */
export function invalidALabels(hostname: string): string[] {
  return normalizeDnsName(hostname)
    .split('.')
    .filter((label) => {
      if (!label.startsWith('xn--')) return false;
      const unicode = domainToUnicode(label);
      return unicode === '' || unicode.startsWith('xn--') || domainToASCII(unicode) !== label;
    });
}
