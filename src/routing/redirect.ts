/**
 * What a redirect domain answers (`spec.redirect`; docs/routing.md and docs/customdomains.md,
 * "Redirect targets"): a status and a Location on the target host that keeps the request's path and
 * query. Pure.
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

/** The default `spec.redirect.statusCode` (docs/routing.md, "Which status to choose"). */
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

/**
 * Why a redirect domain is not routed (the Routed condition's reason), Kubernetes API conventions
 * (UpperCamelCase). A redirect goes to a domain of the same project, "normally the primary domain":
 * one that serves (docs/customdomains.md, "Redirect targets").
 */
export type RedirectNotRoutedReason =
  /** `spec.redirect.to` is the domain's own hostname (the CRD refuses this; older objects may hold it). */
  | 'RedirectToSelf'
  /** The target hostname is, or is under, one of the platform's reserved domains: nothing can serve it. */
  | 'RedirectTargetReserved'
  /** No CustomDomain of the project (namespace) has the target hostname. */
  | 'RedirectTargetNotFound'
  /** The target hostname is held by a CustomDomain of another project (namespace). */
  | 'RedirectTargetOtherProject'
  /** The target exists in the project but does not serve yet: not Ready, or being deleted. */
  | 'RedirectTargetNotServing'
  /** The target redirects too, to a third hostname (a → b → c): one hop only. */
  | 'RedirectChain'
  /** The target redirects back to this domain (a → b → a). */
  | 'RedirectLoop';

/** The verdict on a redirect domain's target (`redirectRouting`). */
export type RedirectRouting =
  | {
      route: true;
      intent: RedirectIntent;
      /** metadata.name of the target CustomDomain. */
      target: string;
      message: string;
    }
  | { route: false; reason: RedirectNotRoutedReason; message: string };

/** What `redirectRouting` reads of the cluster (the controller's caches). */
export interface RedirectTargetLookup {
  /** The CustomDomains of the domain's namespace (the domain itself may be among them). */
  domainsInNamespace: readonly CustomDomain[];
  /**
   * The CustomDomain that holds `hostname` (normalized) by its HostnameClaim, in any namespace, or
   * undefined when no claim holds it.
   */
  holderOf(hostname: string): { namespace: string; name: string } | undefined;
  /**
   * The platform's reserved domain (`--reserved-domains`) that `hostname` (normalized) equals or falls
   * under, or undefined. Absent: no hostname is reserved.
   */
  reservedDomainOf?(hostname: string): string | undefined;
}

/** How many serving hostnames of the project a not-found message suggests. */
const SUGGESTED_TARGETS = 5;

const normalize = (hostname: string): string => hostname.toLowerCase().replace(/\.$/, '');

const readyOf = (domain: CustomDomain): { status: string; reason: string } | undefined =>
  domain.status?.conditions?.find((c) => c.type === 'Ready');

/** Whether `domain` serves the project now: a serving domain (no redirect), not being deleted, Ready. */
function serves(domain: CustomDomain): boolean {
  return (
    domain.spec.redirect === undefined &&
    domain.metadata.deletionTimestamp == null &&
    readyOf(domain)?.status === 'True'
  );
}

/**
 * Whether a redirect domain may be routed, and if not, why (docs/customdomains.md, "Redirect
 * targets"): its `spec.redirect.to` must be the hostname of a CustomDomain of the same project
 * (namespace) that serves it (a serving domain whose Ready condition is True, so that visitors are
 * never sent to a domain that does not answer). Checked in this order:
 *
 * 1. `to` equal to the domain's own hostname: `RedirectToSelf`.
 *    Then `to` under one of the platform's reserved domains: `RedirectTargetReserved` (no CustomDomain
 *    of it is ever accepted, so waiting would never end).
 * 2. `to` held by a CustomDomain of another namespace (its HostnameClaim): `RedirectTargetOtherProject`.
 *    The other project is not named: a tenant must not learn another tenant's namespace.
 * 3. No CustomDomain of this namespace has `to` (one being deleted does not count as missing; see 6):
 *    `RedirectTargetNotFound`; the message lists up to 5 hostnames of the project that serve.
 * 4. The target redirects back to this hostname (a → b → a): `RedirectLoop`.
 * 5. The target redirects elsewhere (a → b → c): `RedirectChain`; the message suggests `c` when it
 *    serves in this project.
 * 6. The target is being deleted or is not Ready: `RedirectTargetNotServing`, with its Ready reason.
 *
 * Where several CustomDomains of the namespace have `to`, the one holding the hostname's claim is
 * the target; else the first that serves, else the first by name. Pure.
 *
 * @param domain the domain to judge
 * @returns undefined for a serving domain (no `spec.redirect`); else the verdict
 */
export function redirectRouting(
  domain: Pick<CustomDomain, 'metadata' | 'spec'>,
  lookup: RedirectTargetLookup,
): RedirectRouting | undefined {
  const intent = redirectIntent(domain);
  if (!intent) return undefined;
  const self = normalize(domain.spec.hostname);
  const ns = domain.metadata.namespace;
  if (intent.to === self) {
    return {
      route: false,
      reason: 'RedirectToSelf',
      message: `spec.redirect.to is ${self}, this domain's own hostname: a domain cannot redirect to itself. Set redirect.to to the domain visitors should go to, normally the project's primary domain.`,
    };
  }
  const reserved = lookup.reservedDomainOf?.(intent.to);
  if (reserved !== undefined) {
    return {
      route: false,
      reason: 'RedirectTargetReserved',
      message: `spec.redirect.to is ${intent.to}, ${intent.to === reserved ? 'a domain' : `under ${reserved}, a domain`} of the platform itself: no CustomDomain can be attached to it, so this redirect is never routed. Set redirect.to to a domain of this project that serves, normally its primary domain.`,
    };
  }
  const holder = lookup.holderOf(intent.to);
  if (holder !== undefined && holder.namespace !== ns) {
    return {
      route: false,
      reason: 'RedirectTargetOtherProject',
      message: `${intent.to} is a domain of another project: a redirect goes only to a domain of the same project (namespace ${ns}). Set redirect.to to one of this project's domains.`,
    };
  }
  const others = lookup.domainsInNamespace.filter((d) => d.metadata.name !== domain.metadata.name);
  const target = pickTarget(
    others.filter((d) => normalize(d.spec.hostname) === intent.to),
    holder?.name,
  );
  if (!target) return notFound(intent.to, ns, others);
  return judgeTarget(self, intent, target, others);
}

/** The CustomDomain that is the target among `candidates` (all with the target hostname). */
function pickTarget(
  candidates: readonly CustomDomain[],
  holderName: string | undefined,
): CustomDomain | undefined {
  const byName = [...candidates].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return byName.find((d) => d.metadata.name === holderName) ?? byName.find((d) => serves(d)) ?? byName[0];
}

function notFound(to: string, ns: string, others: readonly CustomDomain[]): RedirectRouting {
  const serving = [...new Set(others.filter((d) => serves(d)).map((d) => normalize(d.spec.hostname)))]
    .sort()
    .slice(0, SUGGESTED_TARGETS);
  const suggestion =
    serving.length > 0
      ? ` Domains of this project that serve: ${serving.join(', ')}.`
      : ' This project has no domain that serves yet.';
  return {
    route: false,
    reason: 'RedirectTargetNotFound',
    message: `No CustomDomain in this project (namespace ${ns}) has the hostname ${to}: a redirect goes to a domain of the same project that serves. Add ${to} as a CustomDomain with spec.service, or set redirect.to to a domain of this project.${suggestion}`,
  };
}

/** Steps 4 to 6 of `redirectRouting`, once the target is found in the namespace. */
function judgeTarget(
  self: string,
  intent: RedirectIntent,
  target: CustomDomain,
  others: readonly CustomDomain[],
): RedirectRouting {
  const named = `${intent.to} (CustomDomain ${target.metadata.name})`;
  const next = target.spec.redirect ? normalize(target.spec.redirect.to) : undefined;
  if (next === self) {
    return {
      route: false,
      reason: 'RedirectLoop',
      message: `${named} redirects back to ${self}: the two redirect to each other (a loop), so neither is routed. Make one of them serve the project (spec.service instead of spec.redirect), or point both at the project's primary domain.`,
    };
  }
  if (next !== undefined) {
    const final = others.find((d) => normalize(d.spec.hostname) === next && serves(d));
    return {
      route: false,
      reason: 'RedirectChain',
      message: `${named} redirects too, to ${next}: a redirect must go straight to a domain that serves (one hop, no chain). ${final ? `Set redirect.to to ${next}, which serves this project.` : 'Set redirect.to to a domain of this project that serves, normally its primary domain.'}`,
    };
  }
  if (target.metadata.deletionTimestamp != null) {
    return {
      route: false,
      reason: 'RedirectTargetNotServing',
      message: `${named} is being deleted: a redirect to it would send visitors to a domain that no longer answers. Set redirect.to to another domain of this project.`,
    };
  }
  const ready = readyOf(target);
  if (ready?.status !== 'True') {
    const why = ready ? `its Ready condition is ${ready.status} (${ready.reason})` : 'it has no status yet';
    return {
      route: false,
      reason: 'RedirectTargetNotServing',
      message: `${named} does not serve yet: ${why}. The redirect is routed once it serves, so that visitors are not sent to a domain that does not answer.`,
    };
  }
  return {
    route: true,
    intent,
    target: target.metadata.name,
    message: `${named} serves this project.`,
  };
}
