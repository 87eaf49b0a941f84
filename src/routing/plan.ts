/**
 * The routing plan of one CustomDomain: what objects should exist for it, and which objects it could
 * ever own, so the controller applies the first with server-side apply and deletes the rest
 * (kubernetes-sigs/external-dns `plan/plan.go`: desired state as a pure step, then the difference).
 * Pure: no I/O, no clock.
 *
 * | domain   | ingress mode, nginx               | ingress mode, traefik                 | gateway mode             |
 * |----------|-----------------------------------|---------------------------------------|--------------------------|
 * | serves   | Ingress `portico-<name>`          | same                                  | HTTPRoute `portico-<name>`|
 * | redirect | Ingress with permanent-redirect   | Middleware `portico-<name>-redirect`  | HTTPRoute with a         |
 * |          | annotations, + `portico-<name>-acme`| + Ingress referencing it, + `-acme` | RequestRedirect rule     |
 * | both     |                                   |                                       | + ListenerSet            |
 * |          |                                   |                                       | `portico-<name>` (TLS)   |
 *
 * The `contour` flavor of ingress mode writes no Ingress: one HTTPProxy `portico-<name>`
 * (`projectcontour.io/v1`, data-planes/contour/httpproxy.ts) serves or redirects, with the challenge route in the same
 * object, and names the TLS Secret only once it holds a certificate.
 *
 * The challenge path `/.well-known/acme-challenge/` reaches the operator in every row when the
 * challenge Service is configured: a redirect domain still needs its own certificate.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { ownedNames, type CustomDomain } from '../api/customdomain.js';
import {
  DEFAULT_GATEWAY_HTTPS_PORT,
  forwardRule,
  gatewayRedirectSummary,
  GATEWAY_API_VERSION,
  httpRoute,
  HTTPROUTE_KIND,
  listenerSet,
  listenerSetParentRef,
  LISTENERSET_KIND,
  redirectRule,
  type HTTPRouteRule,
  type RouteParentRef,
} from './gateway.js';
import {
  challengeIngressName,
  legacyChallengeIngressName,
  desiredChallengeIngress,
  desiredHttp01Service,
  desiredIngress,
  desiredRedirectIngress,
  HTTP01_PATH_PREFIX,
  HTTP01_SERVICE_NAME,
  ownedMetadata,
  redirectBackend,
} from './ingress.js';
import { nginxRedirectAnnotations, nginxRedirectSummary } from '../data-planes/ingress-nginx/annotations.js';
import type { RoutingOptions } from './options.js';
import { unsupportedByDataPlane } from './data-planes.js';
import {
  CONTOUR_API_VERSION,
  httpProxy,
  HTTPPROXY_KIND,
  redirectRoute as contourRedirectRoute,
  serviceRoute as contourServiceRoute,
  type HTTPProxyRoute,
} from '../data-planes/contour/httpproxy.js';
import {
  describeStatus,
  redirectIntent,
  redirectRouting,
  targetOrigin,
  type RedirectIntent,
  type RedirectNotRoutedReason,
  type RedirectTargetLookup,
} from './redirect.js';
import {
  TRAEFIK_API_VERSION,
  TRAEFIK_MIDDLEWARE_KIND,
  TRAEFIK_ROUTER_MIDDLEWARES,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
  traefikRedirectSummary,
} from '../data-planes/traefik/middleware.js';

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
   * The API server serves HTTPProxy (projectcontour.io/v1; Contour's CRDs installed) and the
   * operator may list it. Default true. False: the `contour` flavor writes nothing and says so
   * (`HTTPProxyUnsupported`).
   */
  httpProxiesServed?: boolean;
  /**
   * The domain's TLS Secret exists and holds a `tls.crt` and `tls.key` that parse (the Secret
   * cache). Default false. The `contour` flavor names the Secret in the HTTPProxy only then: Contour
   * marks an HTTPProxy invalid, all its routes with it, while its Secret is missing (data-planes/contour/httpproxy.ts).
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

/** The name of the Traefik redirect Middleware of a domain. */
export function middlewareName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `${ownedNames(domain).ingress}-redirect`;
}

/**
 * Every routing object Portico could have created for this domain, in any mode and flavor, under
 * current and earlier names. The shared challenge Service is not among them: other domains of the
 * namespace use it. Names may be another domain's (an earlier name): the controller deletes only
 * objects whose owner label names this domain.
 */
export function ownedRoutingObjects(domain: Pick<CustomDomain, 'metadata'>): ObjectHeader[] {
  const namespace = domain.metadata.namespace;
  const name = ownedNames(domain).ingress;
  const header = (apiVersion: string, kind: string, n: string): ObjectHeader => ({
    apiVersion,
    kind,
    metadata: { name: n, namespace },
  });
  return [
    header('networking.k8s.io/v1', 'Ingress', name),
    header('networking.k8s.io/v1', 'Ingress', challengeIngressName(domain)),
    header('networking.k8s.io/v1', 'Ingress', legacyChallengeIngressName(domain)),
    header(TRAEFIK_API_VERSION, TRAEFIK_MIDDLEWARE_KIND, middlewareName(domain)),
    header(GATEWAY_API_VERSION, HTTPROUTE_KIND, name),
    header(GATEWAY_API_VERSION, LISTENERSET_KIND, name),
    header(CONTOUR_API_VERSION, HTTPPROXY_KIND, name),
  ];
}

function sameObject(a: ObjectHeader, b: KubernetesObject): boolean {
  return (
    a.apiVersion === b.apiVersion &&
    a.kind === b.kind &&
    a.metadata.name === b.metadata?.name &&
    a.metadata.namespace === b.metadata?.namespace
  );
}

/** The owned objects the plan does not apply: the controller deletes these (all of them on removal). */
export function staleRoutingObjects(plan: RoutingPlan): ObjectHeader[] {
  return plan.owned.filter((h) => !plan.apply.some((obj) => sameObject(h, obj)));
}

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

function redirectSentence(
  what: string,
  domain: CustomDomain,
  intent: RedirectIntent,
  keepsPath = true,
): string {
  const keeps = keepsPath ? ', keeping path and query' : '';
  return `${what} answers ${domain.spec.hostname} with ${describeStatus(intent.status)} to ${targetOrigin(intent)}${keeps}.`;
}

function challengeSentence(options: RoutingOptions, via: string): string {
  return options.http01Service ? ` ${HTTP01_PATH_PREFIX} goes to the operator${via}.` : '';
}

function routed(
  apply: KubernetesObject[],
  domain: CustomDomain,
  sentence: string,
  caveats: string[],
): RoutingPlan {
  return {
    routed: true,
    apply,
    owned: ownedRoutingObjects(domain),
    message: withCaveats(sentence, caveats),
    caveats,
  };
}

function notRouted(
  domain: CustomDomain,
  reason: NotRoutedReason,
  message: string,
  apply: KubernetesObject[] = [],
): RoutingPlan {
  return { routed: false, apply, owned: ownedRoutingObjects(domain), reason, message };
}

/**
 * What still routes the ACME HTTP-01 challenge of a domain that is otherwise not routed: in
 * ingress mode the shared challenge Service and the domain's challenge Ingress; in gateway mode the
 * Service and an HTTPRoute with the challenge rule alone (plain HTTP, so no ListenerSet). Empty when
 * no challenge Service is configured.
 */
function challengeOnly(domain: CustomDomain, options: RoutingOptions): KubernetesObject[] {
  const service = desiredHttp01Service(domain, options);
  if (!service || !options.http01Service) return [];
  if (isContour(options)) {
    const route = contourServiceRoute(HTTP01_PATH_PREFIX, challengeBackend(options.http01Service), true);
    const metadata = ownedMetadata(domain, ownedNames(domain).ingress);
    return [service, httpProxy(metadata, domain.spec.hostname, [route], classOf(options))];
  }
  if ((options.mode ?? 'ingress') === 'gateway') {
    const rule = forwardRule(HTTP01_PATH_PREFIX, {
      name: HTTP01_SERVICE_NAME,
      port: options.http01Service.port,
    });
    const metadata = ownedMetadata(domain, ownedNames(domain).ingress);
    const route = httpRoute(metadata, domain.spec.hostname, options.gatewayParentRefs ?? [], [rule]);
    return [service, route];
  }
  const challenge = desiredChallengeIngress(domain, options);
  return challenge ? [service, challenge] : [service];
}

function ingressRedirectPlan(
  domain: CustomDomain,
  options: RoutingOptions,
  intent: RedirectIntent,
): RoutingPlan {
  const name = ownedNames(domain).ingress;
  const challenge = desiredChallengeIngress(domain, options);
  const shared = [desiredHttp01Service(domain, options), challenge].filter((o) => o !== undefined);
  const via = challenge ? ` through Ingress ${challengeIngressName(domain)}` : '';
  if (options.ingressFlavor === 'traefik') {
    const middleware = traefikRedirectMiddleware(intent, ownedMetadata(domain, middlewareName(domain)));
    const reference = traefikMiddlewareReference(
      domain.metadata.namespace,
      middlewareName(domain),
      options.traefikSafeNaming ?? false,
    );
    const ingress = desiredRedirectIngress(domain, options, { [TRAEFIK_ROUTER_MIDDLEWARES]: reference });
    const caveats = [...traefikRedirectSummary(intent).caveats, ...traefikBackendCaveats(domain, options)];
    const sentence =
      redirectSentence(`Ingress ${name} with Traefik Middleware ${middlewareName(domain)}`, domain, intent) +
      challengeSentence(options, via);
    return routed([...shared, middleware, ingress], domain, sentence, caveats);
  }
  const keepPath = options.nginxRedirectKeepsPath ?? true;
  const ingress = desiredRedirectIngress(domain, options, nginxRedirectAnnotations(intent, keepPath));
  const sentence =
    redirectSentence(`Ingress ${name} (ingress-nginx)`, domain, intent, keepPath) +
    challengeSentence(options, via);
  return routed([...shared, ingress], domain, sentence, nginxRedirectSummary(intent, keepPath).caveats);
}

function traefikBackendCaveats(domain: CustomDomain, options: RoutingOptions): string[] {
  if (redirectBackend(domain, options).source !== 'placeholder') return [];
  return [
    'Traefik builds no router for an Ingress path whose Service does not exist, so set spec.service ' +
      '(or configure the challenge Service) for the redirect to run',
  ];
}

/** `namespace/name` of each distinct Gateway among `refs`, in order (`namespace` defaulting to the route's). */
function distinctGateways(refs: readonly RouteParentRef[], namespace: string): string[] {
  return [...new Set(refs.map((p) => `${p.namespace ?? namespace}/${p.name}`))];
}

/**
 * Gateway mode: the HTTPRoute, and the ListenerSet that attaches the domain's Secret to the first
 * parent's Gateway (gateway.ts). The route names the ListenerSet as a parent too: a route attached
 * to a Gateway does not attach to its ListenerSets' listeners (GEP-1713).
 */
function gatewayPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): RoutingPlan {
  const intent = redirectIntent(domain);
  const service = domain.spec.service;
  const rules: HTTPRouteRule[] = [];
  if (options.http01Service)
    rules.push(
      forwardRule(HTTP01_PATH_PREFIX, { name: HTTP01_SERVICE_NAME, port: options.http01Service.port }),
    );
  const { ingress: name, secret } = ownedNames(domain);
  const gatewayRefs = options.gatewayParentRefs ?? [];
  const gateways = distinctGateways(gatewayRefs, domain.metadata.namespace);
  const what = `HTTPRoute ${name} on Gateway ${gateways.join(', ')}`;
  let sentence: string;
  let caveats: string[] = [];
  if (intent) {
    rules.push(redirectRule(intent));
    sentence = redirectSentence(what, domain, intent);
    caveats = gatewayRedirectSummary(intent).caveats;
  } else if (service) {
    const resolved = resolveServicePort(service, lookups.servicePorts);
    if ('problem' in resolved) return notRouted(domain, 'ServicePortNotFound', resolved.problem);
    const port = resolved.number;
    rules.push(forwardRule('/', { name: service.name, port }));
    sentence = `${what} routes ${domain.spec.hostname} to Service ${service.name}:${port}.`;
  } else {
    return noBackend(domain);
  }
  const service01 = desiredHttp01Service(domain, options);
  const [first] = gatewayRefs;
  if (lookups.listenerSetsServed === false || first === undefined) {
    const route = httpRoute(ownedMetadata(domain, name), domain.spec.hostname, gatewayRefs, rules);
    const plan = routed(service01 ? [service01, route] : [route], domain, sentence, caveats);
    return {
      ...plan,
      unservable: {
        reason: 'ListenerSetUnsupported',
        message: `The API server does not serve ListenerSet (gateway.networking.k8s.io/v1, Gateway API v1.5 or later, standard channel), so the certificate in Secret ${secret} cannot be attached to Gateway ${gateways.join(', ')}: HTTPS for ${domain.spec.hostname} would serve the Gateway's own certificate. Install the Gateway API CRDs v1.5 or later and restart the operator (docs/routing.md).`,
      },
    } as RoutingPlan;
  }
  const port = options.gatewayHttpsPort ?? DEFAULT_GATEWAY_HTTPS_PORT;
  const set = listenerSet(ownedMetadata(domain, name), domain.spec.hostname, first, port, secret);
  const route = httpRoute(
    ownedMetadata(domain, name),
    domain.spec.hostname,
    [...gatewayRefs, listenerSetParentRef(name)],
    rules,
  );
  if (gateways.length > 1)
    caveats = [
      ...caveats,
      `a ListenerSet has one parent, so the certificate is attached to Gateway ${gateways[0] ?? ''} only; HTTPS on ${gateways.slice(1).join(', ')} serves that Gateway's own certificates`,
    ];
  const tls = ` TLS: ListenerSet ${name} attaches Secret ${secret} to Gateway ${gateways[0] ?? ''} (HTTPS, port ${port}).`;
  const apply: KubernetesObject[] = service01 ? [service01, set, route] : [set, route];
  return routed(apply, domain, sentence + tls + challengeSentence(options, ''), caveats);
}

function isContour(options: RoutingOptions): boolean {
  return (options.mode ?? 'ingress') === 'ingress' && options.ingressFlavor === 'contour';
}

function classOf(options: RoutingOptions): { ingressClassName?: string } {
  return options.ingressClassName ? { ingressClassName: options.ingressClassName } : {};
}

function challengeBackend(http01: { port: number }): { name: string; port: number } {
  return { name: HTTP01_SERVICE_NAME, port: http01.port };
}

/**
 * The `contour` flavor: one HTTPProxy (data-planes/contour/httpproxy.ts) with the challenge route (plain HTTP allowed) and
 * the serving or redirect route; TLS from the domain's Secret once it holds a certificate. A port
 * given by name is looked up in the Service (HTTPProxy ports are numbers), as in gateway mode.
 */
function contourPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): RoutingPlan {
  const { ingress: name, secret } = ownedNames(domain);
  const intent = redirectIntent(domain);
  const service = domain.spec.service;
  const routes: HTTPProxyRoute[] = [];
  if (options.http01Service)
    routes.push(contourServiceRoute(HTTP01_PATH_PREFIX, challengeBackend(options.http01Service), true));
  const what = `HTTPProxy ${name} (Contour)`;
  let sentence: string;
  if (intent) {
    routes.push(contourRedirectRoute(intent));
    sentence = redirectSentence(what, domain, intent);
  } else if (service) {
    const resolved = resolveServicePort(service, lookups.servicePorts);
    if ('problem' in resolved) return notRouted(domain, 'ServicePortNotFound', resolved.problem);
    routes.push(contourServiceRoute('/', { name: service.name, port: resolved.number }));
    sentence = `${what} routes ${domain.spec.hostname} to Service ${service.name}:${resolved.number}.`;
  } else {
    return noBackend(domain);
  }
  const tls = lookups.tlsSecretReady === true;
  const proxy = httpProxy(ownedMetadata(domain, name), domain.spec.hostname, routes, {
    ...classOf(options),
    ...(tls ? { tlsSecretName: secret } : {}),
  });
  const tlsSentence = tls
    ? ` TLS from Secret ${secret}.`
    : ` TLS from Secret ${secret} is added once it holds the certificate (Contour refuses an HTTPProxy whose TLS Secret is missing).`;
  const challenge = options.http01Service
    ? ` ${HTTP01_PATH_PREFIX} goes to the operator, over plain HTTP too.`
    : '';
  const service01 = desiredHttp01Service(domain, options);
  return routed(service01 ? [service01, proxy] : [proxy], domain, sentence + tlsSentence + challenge, []);
}

/** The `contour` flavor where the API server serves no HTTPProxy: nothing can be written. */
function httpProxyUnsupported(domain: CustomDomain): RoutingPlan {
  return notRouted(
    domain,
    'HTTPProxyUnsupported',
    `The operator runs with --ingress-flavor contour, but the API server does not serve HTTPProxy (${CONTOUR_API_VERSION}) to it (Contour's CRDs are not installed, or the operator's RBAC does not allow listing httpproxies), so no routing for ${domain.spec.hostname} can be written. Install Contour's CRDs (examples/contour/01-crds.yaml of the Contour release) or grant the operator get, list, watch, create, patch and delete on httpproxies.projectcontour.io, and restart the operator (it looks for the kind at start); or choose another --ingress-flavor.`,
  );
}

/**
 * The plan of a domain whose flavor the declared data plane ignores (data-planes.ts): nothing but
 * the challenge objects, and only where the data plane takes the flavor's objects for a serving
 * domain (it ignores just the redirect), so that the certificate is still issued. Undefined when the
 * data plane takes the flavor, or none is declared.
 */
function unsupportedFlavor(domain: CustomDomain, options: RoutingOptions): RoutingPlan | undefined {
  const redirect = redirectIntent(domain) !== undefined;
  const message = unsupportedByDataPlane(options.dataPlane, options, redirect);
  if (message === undefined) return undefined;
  const servesFlavor = unsupportedByDataPlane(options.dataPlane, options, false) === undefined;
  return notRouted(
    domain,
    'UnsupportedByDataPlane',
    message,
    redirect && servesFlavor ? challengeOnly(domain, options) : [],
  );
}

/** The plan of a redirect whose target `redirectRouting` refuses; undefined otherwise. */
function refusedRedirect(
  domain: CustomDomain,
  options: RoutingOptions,
  lookups: RoutingLookups,
): RoutingPlan | undefined {
  const verdict = lookups.redirectTarget && redirectRouting(domain, lookups.redirectTarget);
  if (!verdict || verdict.route) return undefined;
  return notRouted(domain, verdict.reason, verdict.message, challengeOnly(domain, options));
}

function noBackend(domain: CustomDomain): RoutingPlan {
  return notRouted(
    domain,
    'NoBackend',
    'neither spec.service nor spec.redirect is set: there is nothing to route to or redirect to.',
  );
}

/**
 * The routing plan of `domain` under `options`. A data plane declared in `options.dataPlane` that
 * ignores the flavor (or, for a redirect domain, the flavor's redirect) gives `Routed=False`,
 * reason `UnsupportedByDataPlane` (data-planes.ts), before anything else is judged. `lookups` carries what only the cluster knows (the
 * ports of the Service a serving domain names: a port it lacks is not routed, and gateway mode needs
 * a named port's number; for a redirect, its target: one that is not a serving domain of the same
 * project is not routed, with `redirectRouting`'s reason, and only the ACME challenge is routed; for
 * the `contour` flavor, whether HTTPProxy is served and whether the TLS Secret holds a certificate).
 * Never throws for a well-formed domain; options are checked once at start by `checkRoutingOptions`.
 */
export function desiredRouting(
  domain: CustomDomain,
  options: RoutingOptions,
  lookups: RoutingLookups = {},
): RoutingPlan {
  const unsupported = unsupportedFlavor(domain, options);
  if (unsupported) return unsupported;
  if (isContour(options) && lookups.httpProxiesServed === false) return httpProxyUnsupported(domain);
  const refused = refusedRedirect(domain, options, lookups);
  if (refused) return refused;
  if ((options.mode ?? 'ingress') === 'gateway') return gatewayPlan(domain, options, lookups);
  if (isContour(options)) return contourPlan(domain, options, lookups);
  return ingressPlan(domain, options, lookups);
}

/** Ingress mode, flavors nginx and traefik (`desiredRouting`). */
function ingressPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): RoutingPlan {
  const intent = redirectIntent(domain);
  if (intent) return ingressRedirectPlan(domain, options, intent);
  const ingress = desiredIngress(domain, options);
  if (!ingress) return noBackend(domain);
  // An Ingress may name the port by name or number; the Service must have it
  // (docs/customdomains.md, `ServicePortNotFound`).
  if (domain.spec.service && lookups.servicePorts !== undefined) {
    const resolved = resolveServicePort(domain.spec.service, lookups.servicePorts);
    if ('problem' in resolved) return notRouted(domain, 'ServicePortNotFound', resolved.problem);
  }
  const service = desiredHttp01Service(domain, options);
  const target = domain.spec.service;
  const sentence = `Ingress ${ownedNames(domain).ingress} routes ${domain.spec.hostname} to Service ${target?.name ?? ''}:${String(target?.port ?? 80)}.`;
  return routed(service ? [service, ingress] : [ingress], domain, sentence, []);
}
