/**
 * The auto-generated subdomain of a project (docs/customdomains.md, "The auto-generated subdomain"):
 * every project is served at `<label>.<apps domain>`, where the apps domain is the platform's
 * (`--apps-domain`) and the label comes from the project's namespace (the project is the namespace).
 * Pure: no I/O, no clock.
 *
 * The name rule, and why it is collision-safe:
 *
 * - A namespace name is an RFC 1123 label (Kubernetes API conventions, "DNS label names": at most
 *   63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit), so it is a DNS
 *   label as it is (RFC 1035 §2.3.1, RFC 1123 §2.1) and the label is the namespace itself.
 * - Except a namespace with `--` anywhere in it. Such a label is either reserved (RFC 5891 §4.2.3.1:
 *   `--` in the third and fourth positions, and `xn--...` would be read as an internationalized name,
 *   a look-alike of another project's address in a browser: `xn--pple-43d` is shown as "аpple") or
 *   merely confusable; it is written `<10 hex digits of SHA-256(namespace)>--<namespace with each run
 *   of '-' as one '-'>`, cut to 63 characters. The `--` sits at positions 11-12, never 3-4, so the
 *   label is not reserved.
 * - Injective: a namespace without `--` maps to itself (a label without `--`); one with `--` maps to
 *   a label with `--`. The two sets never meet, and two namespaces with `--` share a label only if
 *   40 bits of SHA-256 collide. Namespaces are unique in a cluster, so two projects share a label
 *   only then, or when one namespace holds two Projects: the controller gives the label to the
 *   oldest Project (then the smallest `namespace/name`) and reports `SubdomainConflict` on the other.
 * - Length: the label is at most 63 characters, so `<label>.<apps domain>` is a hostname of at most
 *   253 characters whenever the apps domain is at most 189 (`MAX_APPS_DOMAIN_LENGTH`, checked when
 *   the operator starts).
 */
import { createHash } from 'node:crypto';
import { MAX_HOSTNAME_LENGTH, MAX_LABEL_LENGTH, validateHostname } from './hostname.js';

/** Hex digits of SHA-256 in the label of a namespace with `--`: 40 bits. */
const HASH_HEX_DIGITS = 10;

/** The longest apps domain: a 63-character label, a dot and the domain fit in 253 characters. */
export const MAX_APPS_DOMAIN_LENGTH = MAX_HOSTNAME_LENGTH - MAX_LABEL_LENGTH - 1;

/** A Kubernetes namespace name (RFC 1123 label). */
const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Thrown for a namespace that is not an RFC 1123 label, or an apps domain that cannot hold one. */
export class AppsSubdomainError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AppsSubdomainError';
  }
}

/**
 * The label of the auto-generated subdomain of the project in `namespace` (see the module's rule).
 *
 * @throws AppsSubdomainError when `namespace` is not an RFC 1123 label of at most 63 characters
 */
export function appsSubdomainLabel(namespace: string): string {
  if (namespace.length > MAX_LABEL_LENGTH || !NAMESPACE_NAME.test(namespace))
    throw new AppsSubdomainError(`"${namespace}" is not a Kubernetes namespace name (an RFC 1123 label)`);
  if (!namespace.includes('--')) return namespace;
  const hash = createHash('sha256').update(namespace).digest('hex').slice(0, HASH_HEX_DIGITS);
  const rest = namespace
    .replace(/-+/g, '-')
    .slice(0, MAX_LABEL_LENGTH - HASH_HEX_DIGITS - 2)
    .replace(/-+$/, '');
  return `${hash}--${rest}`;
}

/**
 * `<label>.<appsDomain>`: the auto-generated subdomain of the project in `namespace`.
 *
 * @param appsDomain the platform's apps domain, normalized (lowercase, no trailing dot)
 * @throws AppsSubdomainError as `appsSubdomainLabel`
 */
export function appsSubdomain(namespace: string, appsDomain: string): string {
  return `${appsSubdomainLabel(namespace)}.${appsDomain}`;
}

/**
 * Why `appsDomain` cannot be the platform's apps domain, or undefined when it can: it must pass the
 * hostname rules of CustomDomain's `spec.hostname` (domain/hostname.ts) and leave room for a
 * 63-character label (`MAX_APPS_DOMAIN_LENGTH`).
 */
export function appsDomainProblem(appsDomain: string): string | undefined {
  const problem = validateHostname(appsDomain);
  if (problem !== undefined) return problem.message;
  if (appsDomain.length > MAX_APPS_DOMAIN_LENGTH)
    return `the apps domain must be at most ${MAX_APPS_DOMAIN_LENGTH} characters, so that a 63-character label fits before it`;
  return undefined;
}

/** The wildcard name that covers every auto-generated subdomain: `*.<appsDomain>` (RFC 6125 §6.4.3). */
export function appsWildcard(appsDomain: string): string {
  return `*.${appsDomain}`;
}
