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
 *
 * The challenge path `/.well-known/acme-challenge/` reaches the operator in every row when the
 * challenge Service is configured: a redirect domain still needs its own certificate.
 */
import type { KubernetesObject, V1Service } from '@kubernetes/client-node';
import { ownedNames, type CustomDomain } from '../api/customdomain.js';
import {
  forwardRule,
  gatewayRedirectSummary,
  GATEWAY_API_VERSION,
  httpRoute,
  HTTPROUTE_KIND,
  redirectRule,
  type HTTPRouteRule,
} from './gateway.js';
import {
  challengeIngressName,
  desiredChallengeIngress,
  desiredHttp01Service,
  desiredIngress,
  desiredRedirectIngress,
  HTTP01_PATH_PREFIX,
  HTTP01_SERVICE_NAME,
  ownedMetadata,
  redirectBackend,
} from './ingress.js';
import { nginxRedirectAnnotations, nginxRedirectSummary } from './nginx.js';
import type { RoutingOptions } from './options.js';
import { describeStatus, redirectIntent, targetOrigin, type RedirectIntent } from './redirect.js';
import {
  TRAEFIK_API_VERSION,
  TRAEFIK_MIDDLEWARE_KIND,
  TRAEFIK_ROUTER_MIDDLEWARES,
  traefikMiddlewareReference,
  traefikRedirectMiddleware,
  traefikRedirectSummary,
} from './traefik.js';

/** Enough of an object to read or delete it. */
export interface ObjectHeader {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string };
}

/** Values the plan cannot know without reading the cluster; the controller looks them up. */
export interface RoutingLookups {
  /**
   * Gateway mode, serving domain whose `spec.service.port` is a name: the number of that port on the
   * Service (see {@link servicePortNumber}); undefined when the Service has no such port.
   */
  servicePortNumber?: number;
}

export type NotRoutedReason = 'NoBackend' | 'ServicePortNotFound';

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
    }
  | { routed: false; apply: []; owned: ObjectHeader[]; reason: NotRoutedReason; message: string };

/** The name of the Traefik redirect Middleware of a domain. */
export function middlewareName(domain: Pick<CustomDomain, 'metadata'>): string {
  return `${ownedNames(domain).ingress}-redirect`;
}

/**
 * Every routing object Portico could have created for this domain, in any mode and flavor. The shared
 * challenge Service is not among them: other domains of the namespace use it.
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
    header(TRAEFIK_API_VERSION, TRAEFIK_MIDDLEWARE_KIND, middlewareName(domain)),
    header(GATEWAY_API_VERSION, HTTPROUTE_KIND, name),
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

/** The number of the Service port called `name`, or undefined. */
export function servicePortNumber(service: V1Service, name: string): number | undefined {
  return service.spec?.ports?.find((p) => p.name === name)?.port;
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

function notRouted(domain: CustomDomain, reason: NotRoutedReason, message: string): RoutingPlan {
  return { routed: false, apply: [], owned: ownedRoutingObjects(domain), reason, message };
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

function gatewayPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): RoutingPlan {
  const intent = redirectIntent(domain);
  const service = domain.spec.service;
  const rules: HTTPRouteRule[] = [];
  if (options.http01Service)
    rules.push(
      forwardRule(HTTP01_PATH_PREFIX, { name: HTTP01_SERVICE_NAME, port: options.http01Service.port }),
    );
  const name = ownedNames(domain).ingress;
  const parents = (options.gatewayParentRefs ?? [])
    .map((p) => `${p.namespace ?? domain.metadata.namespace}/${p.name}`)
    .join(', ');
  const what = `HTTPRoute ${name} on Gateway ${parents}`;
  let sentence: string;
  let caveats: string[] = [];
  if (intent) {
    rules.push(redirectRule(intent));
    sentence = redirectSentence(what, domain, intent);
    caveats = gatewayRedirectSummary(intent).caveats;
  } else if (service) {
    const port = typeof service.port === 'string' ? lookups.servicePortNumber : (service.port ?? 80);
    if (port === undefined)
      return notRouted(
        domain,
        'ServicePortNotFound',
        `spec.service.port "${String(service.port)}" is a port name and Service ${service.name} has no port by that name; ` +
          'an HTTPRoute needs the port number: fix the name or write the number.',
      );
    rules.push(forwardRule('/', { name: service.name, port }));
    sentence = `${what} routes ${domain.spec.hostname} to Service ${service.name}:${port}.`;
  } else {
    return noBackend(domain);
  }
  const route = httpRoute(
    ownedMetadata(domain, name),
    domain.spec.hostname,
    options.gatewayParentRefs ?? [],
    rules,
  );
  const service01 = desiredHttp01Service(domain, options);
  const apply: KubernetesObject[] = service01 ? [service01, route] : [route];
  return routed(apply, domain, sentence + challengeSentence(options, ''), caveats);
}

function noBackend(domain: CustomDomain): RoutingPlan {
  return notRouted(
    domain,
    'NoBackend',
    'neither spec.service nor spec.redirect is set: there is nothing to route to or redirect to.',
  );
}

/**
 * The routing plan of `domain` under `options`. `lookups` carries what only the cluster knows (a
 * named Service port's number, for gateway mode). Never throws for a well-formed domain; options are
 * checked once at start by `checkRoutingOptions`.
 */
export function desiredRouting(
  domain: CustomDomain,
  options: RoutingOptions,
  lookups: RoutingLookups = {},
): RoutingPlan {
  if ((options.mode ?? 'ingress') === 'gateway') return gatewayPlan(domain, options, lookups);
  const intent = redirectIntent(domain);
  if (intent) return ingressRedirectPlan(domain, options, intent);
  const ingress = desiredIngress(domain, options);
  if (!ingress) return noBackend(domain);
  const service = desiredHttp01Service(domain, options);
  const target = domain.spec.service;
  const sentence = `Ingress ${ownedNames(domain).ingress} routes ${domain.spec.hostname} to Service ${target?.name ?? ''}:${String(target?.port ?? 80)}.`;
  return routed(service ? [service, ingress] : [ingress], domain, sentence, []);
}
