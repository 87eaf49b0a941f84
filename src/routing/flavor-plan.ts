/**
 * What every flavor's routing plan is made of (plan.ts chooses the flavor; each data plane's
 * `FlavorWriter`, src/data-planes/<name>/flavor.ts, and Gateway API mode in plan.ts build the plan
 * from these): the plan's types, the Routed sentences, the Service port lookup, and the Ingress
 * parts that the Ingress-based flavors share. Pure: no I/O, no clock.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { ownedNames, type CustomDomain } from '../api/customdomain.js';
import {
  challengeIngressName,
  desiredChallengeIngress,
  desiredHttp01Service,
  desiredIngress,
  desiredRedirectIngress,
  HTTP01_PATH_PREFIX,
  HTTP01_SERVICE_NAME,
} from './ingress.js';
import type { RoutingOptions } from './options.js';
import {
  describeStatus,
  redirectIntent,
  targetOrigin,
  type RedirectIntent,
  type RedirectNotRoutedReason,
  type RedirectTargetLookup,
} from './redirect.js';

/** Enough of an object to read or delete it. */
export interface ObjectHeader {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string };
}

/** A port of a Service as the plan needs it: `spec.ports[].name` and `.port`. */
export interface ServicePortEntry {
  name?: string;
  port: number;
}

/** Values the plan cannot know without reading the cluster; the controller looks them up. */
export interface RoutingLookups {
  /**
   * The ports of the Service that `spec.service` names (from the controller's Service cache), or
   * undefined when no such Service is known: an Ingress then names the port as written (the Service
   * may come with the next deploy), and an HTTPRoute cannot name a port given by name.
   */
  servicePorts?: readonly ServicePortEntry[];
  /**
   * The API server serves ListenerSet (gateway.networking.k8s.io/v1, Gateway API v1.5 or later).
   * Default true. False: gateway mode writes the HTTPRoute (HTTP and the ACME challenge still work)
   * but cannot attach the certificate, and says so (`unservable`).
   */
  listenerSetsServed?: boolean;
  /**
   * For a redirect domain: the project's CustomDomains and who holds a hostname (redirect.ts
   * `redirectRouting`). Undefined: the redirect's target is not checked.
   */
  redirectTarget?: RedirectTargetLookup;
  /**
   * The API server serves the kind the ingress flavor's writer requires (its `requiredKind`, e.g.
   * Contour's HTTPProxy) and the operator may list it. Default true. False: the flavor writes
   * nothing and says so (the writer's `requiredKind.unserved`, e.g. `HTTPProxyUnsupported`).
   */
  flavorKindServed?: boolean;
  /**
   * The domain's TLS Secret exists and holds a `tls.crt` and `tls.key` that parse (the Secret
   * cache); looked up where the flavor's writer asks (`needsTlsSecretReady`). Default false. The
   * `contour` flavor names the Secret in the HTTPProxy only then: Contour marks an HTTPProxy
   * invalid, all its routes with it, while its Secret is missing (data-planes/contour/httpproxy.ts).
   */
  tlsSecretReady?: boolean;
}

/** Why a plan that writes its objects still cannot serve the domain over HTTPS. */
export type UnservableReason = 'ListenerSetUnsupported';

export type NotRoutedReason =
  | 'NoBackend'
  | 'ServicePortNotFound'
  | 'HTTPProxyUnsupported'
  | 'UnsupportedByDataPlane'
  | RedirectNotRoutedReason;

export type RoutingPlan =
  | {
      routed: true;
      /** In apply order: a Middleware before the Ingress that references it. */
      apply: KubernetesObject[];
      owned: ObjectHeader[];
      /** One or two sentences for the Routed condition, caveats included. */
      message: string;
      /** What this flavor cannot do exactly as asked (already part of `message`). */
      caveats: string[];
      /**
       * Set when the objects are written but cannot serve the domain over HTTPS: Routed is False
       * with this reason and message.
       */
      unservable?: { reason: UnservableReason; message: string };
    }
  | {
      routed: false;
      /**
       * Empty, except for a redirect whose target is refused: the ACME HTTP-01 challenge objects, so
       * that the redirect's own certificate does not wait for its target.
       */
      apply: KubernetesObject[];
      owned: ObjectHeader[];
      reason: NotRoutedReason;
      message: string;
    };

type WithoutOwned<T> = T extends unknown ? Omit<T, 'owned'> : never;

/**
 * A plan as a flavor builds it: everything but `owned`, which plan.ts adds (every object Portico
 * could have written for the domain, in any flavor: `ownedRoutingObjects`).
 */
export type FlavorPlan = WithoutOwned<RoutingPlan>;

/**
 * The Service port `spec.service.port` names (a number or a port name; default 80), from `ports`:
 * `{ number }` when the Service has it, else `{ problem }`, a sentence for the Routed condition that
 * lists the ports the Service has. Undefined `ports` (the Service is not known) gives the number when
 * the port is one, else a problem.
 */
export function resolveServicePort(
  service: { name: string; port?: number | string },
  ports: readonly ServicePortEntry[] | undefined,
): { number: number } | { problem: string } {
  const wanted = service.port ?? 80;
  if (ports === undefined) {
    if (typeof wanted === 'number') return { number: wanted };
    return {
      problem: `Service ${service.name} was not found, so the number of its port "${wanted}" is unknown; an HTTPRoute needs the number: create the Service or write the number in spec.service.port.`,
    };
  }
  const found = ports.find((p) => (typeof wanted === 'number' ? p.port === wanted : p.name === wanted));
  if (found) return { number: found.port };
  const has =
    ports.length === 0
      ? 'it has no ports'
      : `its ports are ${ports.map((p) => (p.name ? `${p.name} (${p.port})` : String(p.port))).join(', ')}`;
  const what = typeof wanted === 'number' ? `port ${wanted}` : `port named "${wanted}"`;
  return {
    problem: `Service ${service.name} has no ${what} (${has}); fix spec.service.port or the Service. Nothing is routed to a port that does not exist.`,
  };
}

function withCaveats(sentence: string, caveats: string[]): string {
  return caveats.length === 0 ? sentence : `${sentence} Note: ${caveats.join('; ')}.`;
}

/** "<what> answers <hostname> with <status> to <target>[, keeping path and query]." */
export function redirectSentence(
  what: string,
  domain: CustomDomain,
  intent: RedirectIntent,
  keepsPath = true,
): string {
  const keeps = keepsPath ? ', keeping path and query' : '';
  return `${what} answers ${domain.spec.hostname} with ${describeStatus(intent.status)} to ${targetOrigin(intent)}${keeps}.`;
}

/** " /.well-known/acme-challenge/ goes to the operator<via>." when the challenge Service is configured. */
export function challengeSentence(options: RoutingOptions, via: string): string {
  return options.http01Service ? ` ${HTTP01_PATH_PREFIX} goes to the operator${via}.` : '';
}

/** A routed plan: `apply` in order, the Routed sentence with its caveats. */
export function routed(apply: KubernetesObject[], sentence: string, caveats: string[]): FlavorPlan {
  return { routed: true, apply, message: withCaveats(sentence, caveats), caveats };
}

/** A plan that routes nothing but `apply` (the challenge objects, where they still go). */
export function notRouted(
  reason: NotRoutedReason,
  message: string,
  apply: KubernetesObject[] = [],
): FlavorPlan {
  return { routed: false, apply, reason, message };
}

export function noBackend(): FlavorPlan {
  return notRouted(
    'NoBackend',
    'neither spec.service nor spec.redirect is set: there is nothing to route to or redirect to.',
  );
}

/**
 * The route that answers `/` for a domain whose objects name Service ports by number (HTTPRoute,
 * HTTPProxy): the redirect, or `spec.service` at its port number looked up in the Service
 * (`resolveServicePort`), with the Routed sentence (`what` names the object). `{ plan }` when
 * nothing can be routed: a port the Service lacks (`ServicePortNotFound`), or no backend.
 */
export function rootRoute<Route>(
  domain: CustomDomain,
  lookups: RoutingLookups,
  what: string,
  make: {
    redirect: (intent: RedirectIntent) => Route;
    forward: (service: { name: string; port: number }) => Route;
  },
): { route: Route; sentence: string } | { plan: FlavorPlan } {
  const intent = redirectIntent(domain);
  if (intent) return { route: make.redirect(intent), sentence: redirectSentence(what, domain, intent) };
  const service = domain.spec.service;
  if (!service) return { plan: noBackend() };
  const resolved = resolveServicePort(service, lookups.servicePorts);
  if ('problem' in resolved) return { plan: notRouted('ServicePortNotFound', resolved.problem) };
  return {
    route: make.forward({ name: service.name, port: resolved.number }),
    sentence: `${what} routes ${domain.spec.hostname} to Service ${service.name}:${resolved.number}.`,
  };
}

/** `spec.ingressClassName` from `--ingress-class-name`, or nothing. */
export function classOf(options: RoutingOptions): { ingressClassName?: string } {
  return options.ingressClassName ? { ingressClassName: options.ingressClassName } : {};
}

/** The challenge Service as a backend: its name and the operator's challenge port. */
export function challengeBackend(http01: { port: number }): { name: string; port: number } {
  return { name: HTTP01_SERVICE_NAME, port: http01.port };
}

/**
 * What still routes the ACME HTTP-01 challenge of a domain that is otherwise not routed, in the
 * Ingress-based flavors: the shared challenge Service and the domain's challenge Ingress. Empty
 * when no challenge Service is configured.
 */
export function ingressChallengeOnly(domain: CustomDomain, options: RoutingOptions): KubernetesObject[] {
  const service = desiredHttp01Service(domain, options);
  if (!service || !options.http01Service) return [];
  const challenge = desiredChallengeIngress(domain, options);
  return challenge ? [service, challenge] : [service];
}

/** How an Ingress-based flavor says "redirect" (`ingressRedirectPlan`). */
export interface IngressRedirect {
  /** What answers, for the Routed sentence, e.g. `Ingress portico-www (ingress-nginx)`. */
  readonly what: string;
  /** The annotations of the domain's Ingress that make the redirect. */
  readonly annotations: Record<string, string>;
  /** Objects of the flavor's own API the Ingress references, applied before it. */
  readonly before?: readonly KubernetesObject[];
  readonly caveats: string[];
  /** Default true. */
  readonly keepsPath?: boolean;
  /** The Service the redirect path names; default `redirectBackend` (ingress.ts). */
  readonly backend?: { readonly name: string; readonly port: number | string };
}

/**
 * A redirect domain in an Ingress-based flavor: the challenge Service and challenge Ingress (where
 * configured), the flavor's own objects, then the domain's Ingress with the flavor's annotations.
 */
export function ingressRedirectPlan(
  domain: CustomDomain,
  options: RoutingOptions,
  intent: RedirectIntent,
  redirect: IngressRedirect,
): FlavorPlan {
  const challenge = desiredChallengeIngress(domain, options);
  const shared = [desiredHttp01Service(domain, options), challenge].filter((o) => o !== undefined);
  const via = challenge ? ` through Ingress ${challengeIngressName(domain)}` : '';
  const ingress = desiredRedirectIngress(domain, options, redirect.annotations, redirect.backend);
  const sentence =
    redirectSentence(redirect.what, domain, intent, redirect.keepsPath) + challengeSentence(options, via);
  return routed([...shared, ...(redirect.before ?? []), ingress], sentence, redirect.caveats);
}

/** A serving domain in the Ingress-based flavors: one Ingress to `spec.service` (ingress.ts). */
export function servingIngressPlan(
  domain: CustomDomain,
  options: RoutingOptions,
  lookups: RoutingLookups,
): FlavorPlan {
  const ingress = desiredIngress(domain, options);
  if (!ingress) return noBackend();
  // An Ingress may name the port by name or number; the Service must have it
  // (docs/customdomains.md, `ServicePortNotFound`).
  if (domain.spec.service && lookups.servicePorts !== undefined) {
    const resolved = resolveServicePort(domain.spec.service, lookups.servicePorts);
    if ('problem' in resolved) return notRouted('ServicePortNotFound', resolved.problem);
  }
  const service = desiredHttp01Service(domain, options);
  const target = domain.spec.service;
  const sentence = `Ingress ${ownedNames(domain).ingress} routes ${domain.spec.hostname} to Service ${target?.name ?? ''}:${String(target?.port ?? 80)}.`;
  return routed(service ? [service, ingress] : [ingress], sentence, []);
}

/**
 * The plan of an Ingress-based flavor: `redirect` for a redirect domain (the flavor's own way of
 * saying it), else the shared serving Ingress (`servingIngressPlan`).
 */
export function ingressFlavorPlan(
  redirect: (domain: CustomDomain, options: RoutingOptions, intent: RedirectIntent) => FlavorPlan,
): (domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups) => FlavorPlan {
  return (domain, options, lookups) => {
    const intent = redirectIntent(domain);
    return intent ? redirect(domain, options, intent) : servingIngressPlan(domain, options, lookups);
  };
}
