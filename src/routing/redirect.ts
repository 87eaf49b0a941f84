/**
 * What a redirect domain answers (DESIGN.md `spec.redirect`; spec §2 "domains.redirects"): a status and
 * a Location on the target host that keeps the request's path and query. Pure.
 *
 * Status semantics, RFC 9110 §15.4:
 * - 301 Moved Permanently (§15.4.2) and 308 Permanent Redirect (§15.4.9): the resource has a new
 *   permanent URI; clients and search engines may update their links. A user agent MAY change a POST
 *   into a GET when following a 301 (a historical allowance); it MUST NOT change the method on a 308.
 * - 302 Found (§15.4.3) and 307 Temporary Redirect (§15.4.8): the resource is temporarily elsewhere;
 *   keep using the original URI. Same split: 302 allows the method change, 307 does not.
 * For a GET (or HEAD), 301 and 308 mean the same thing, as do 302 and 307.
 */
import type { CustomDomain } from '../api/customdomain.js';

export type RedirectStatus = 301 | 302 | 307 | 308;

/** The documented value (spec §2: "301 is the documented value"). */
export const DEFAULT_REDIRECT_STATUS: RedirectStatus = 301;

/** What a redirect domain must answer. */
export interface RedirectIntent {
  /** The target hostname (`spec.redirect.to`), lowercase, no trailing dot. */
  to: string;
  status: RedirectStatus;
  /** 301 and 308 (RFC 9110 §15.4.2, §15.4.9). */
  permanent: boolean;
  /** 307 and 308 forbid the client to change the method (RFC 9110 §15.4.8, §15.4.9). */
  keepsMethod: boolean;
}

/** The redirect a domain asks for, or undefined when it serves. `spec.redirect` wins over `spec.service`. */
export function redirectIntent(domain: Pick<CustomDomain, 'spec'>): RedirectIntent | undefined {
  const redirect = domain.spec.redirect;
  if (!redirect) return undefined;
  const status = redirect.statusCode ?? DEFAULT_REDIRECT_STATUS;
  return {
    to: redirect.to.toLowerCase().replace(/\.$/, ''),
    status,
    permanent: status === 301 || status === 308,
    keepsMethod: status === 307 || status === 308,
  };
}

/**
 * The Location prefix: always `https://` (the target is a domain served over HTTPS, and one hop is
 * better than http → https → target), the target host, and no path: each flavor appends the request's
 * own path and query.
 */
export function targetOrigin(intent: RedirectIntent): string {
  return `https://${intent.to}`;
}

/** "301 (permanent)" and the like, for condition messages. */
export function describeStatus(status: RedirectStatus): string {
  const names: Record<RedirectStatus, string> = {
    301: 'Moved Permanently',
    302: 'Found',
    307: 'Temporary Redirect',
    308: 'Permanent Redirect',
  };
  return `${status} ${names[status]}`;
}
