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
 * (`projectcontour.io/v1`) serves or redirects, with the challenge route in the same object, and
 * names the TLS Secret only once it holds a certificate.
 *
 * Gateway mode is written here. Each ingress flavor is written by the data plane module that brings
 * it (`flavorWriter`, src/data-planes/<name>/flavor.ts: ingress-nginx's `nginx`, Traefik's
 * `traefik`, Contour's `contour`), reached through src/data-planes/registry.ts; the parts they
 * share are flavor-plan.ts's.
 *
 * The challenge path `/.well-known/acme-challenge/` reaches the operator in every row when the
 * challenge Service is configured: a redirect domain still needs its own certificate.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { ownedNames, type CustomDomain } from '../api/customdomain.js';
import { FLAVOR_WRITERS, flavorWriter } from '../data-planes/registry.js';
import type { FlavorWriter } from '../data-planes/types.js';
import { unsupportedByDataPlane } from './data-planes.js';
import {
  challengeSentence,
  ingressChallengeOnly,
  notRouted,
  rootRoute,
  routed,
  type FlavorPlan,
  type ObjectHeader,
  type RoutingLookups,
  type RoutingPlan,
} from './flavor-plan.js';
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
  desiredHttp01Service,
  HTTP01_PATH_PREFIX,
  HTTP01_SERVICE_NAME,
  ownedMetadata,
} from './ingress.js';
import type { RoutingOptions } from './options.js';
import { redirectIntent, redirectRouting } from './redirect.js';

export {
  resolveServicePort,
  type NotRoutedReason,
  type ObjectHeader,
  type RoutingLookups,
  type RoutingPlan,
  type ServicePortEntry,
  type UnservableReason,
} from './flavor-plan.js';

/**
 * Every routing object Portico could have created for this domain, in any mode and flavor, under
 * current and earlier names (the shared Ingress and Gateway API kinds, then each flavor writer's
 * own, data-planes/registry.ts `FLAVOR_WRITERS`). The shared challenge Service is not among them: other domains of the
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
    ...FLAVOR_WRITERS.flatMap((w) => w.ownedObjects?.(domain) ?? []),
    header(GATEWAY_API_VERSION, HTTPROUTE_KIND, name),
    header(GATEWAY_API_VERSION, LISTENERSET_KIND, name),
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
 * What still routes the ACME HTTP-01 challenge of a domain that is otherwise not routed: in
 * ingress mode what the flavor's writer says (by default the shared challenge Service and the
 * domain's challenge Ingress); in gateway mode the Service and an HTTPRoute with the challenge rule
 * alone (plain HTTP, so no ListenerSet). Empty when no challenge Service is configured.
 */
function challengeOnly(domain: CustomDomain, options: RoutingOptions): KubernetesObject[] {
  const writer = ingressWriter(options);
  if (writer !== undefined) return (writer.challengeOnly ?? ingressChallengeOnly)(domain, options);
  const service = desiredHttp01Service(domain, options);
  if (!service || !options.http01Service) return [];
  const rule = forwardRule(HTTP01_PATH_PREFIX, {
    name: HTTP01_SERVICE_NAME,
    port: options.http01Service.port,
  });
  const metadata = ownedMetadata(domain, ownedNames(domain).ingress);
  const route = httpRoute(metadata, domain.spec.hostname, options.gatewayParentRefs ?? [], [rule]);
  return [service, route];
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
function gatewayPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): FlavorPlan {
  const intent = redirectIntent(domain);
  const rules: HTTPRouteRule[] = [];
  if (options.http01Service)
    rules.push(
      forwardRule(HTTP01_PATH_PREFIX, { name: HTTP01_SERVICE_NAME, port: options.http01Service.port }),
    );
  const { ingress: name, secret } = ownedNames(domain);
  const gatewayRefs = options.gatewayParentRefs ?? [];
  const gateways = distinctGateways(gatewayRefs, domain.metadata.namespace);
  const what = `HTTPRoute ${name} on Gateway ${gateways.join(', ')}`;
  const root = rootRoute(domain, lookups, what, {
    redirect: redirectRule,
    forward: (backend) => forwardRule('/', backend),
  });
  if ('plan' in root) return root.plan;
  rules.push(root.route);
  const { sentence } = root;
  let caveats = intent ? gatewayRedirectSummary(intent).caveats : [];
  const service01 = desiredHttp01Service(domain, options);
  const [first] = gatewayRefs;
  if (lookups.listenerSetsServed === false || first === undefined) {
    const route = httpRoute(ownedMetadata(domain, name), domain.spec.hostname, gatewayRefs, rules);
    const plan = routed(service01 ? [service01, route] : [route], sentence, caveats);
    return {
      ...plan,
      unservable: {
        reason: 'ListenerSetUnsupported',
        message: `The API server does not serve ListenerSet (gateway.networking.k8s.io/v1, Gateway API v1.5 or later, standard channel), so the certificate in Secret ${secret} cannot be attached to Gateway ${gateways.join(', ')}: HTTPS for ${domain.spec.hostname} would serve the Gateway's own certificate. Install the Gateway API CRDs v1.5 or later and restart the operator (docs/routing.md).`,
      },
    } as FlavorPlan;
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
  return routed(apply, sentence + tls + challengeSentence(options, ''), caveats);
}

/** The writer of the ingress flavor `options` choose (default `nginx`); undefined in gateway mode. */
function ingressWriter(options: RoutingOptions): FlavorWriter | undefined {
  if ((options.mode ?? 'ingress') === 'gateway') return undefined;
  return flavorWriter(options.ingressFlavor ?? 'nginx');
}

/**
 * The plan of a domain whose flavor the declared data plane ignores (data-planes.ts): nothing but
 * the challenge objects, and only where the data plane takes the flavor's objects for a serving
 * domain (it ignores just the redirect), so that the certificate is still issued. Undefined when the
 * data plane takes the flavor, or none is declared.
 */
function unsupportedFlavor(domain: CustomDomain, options: RoutingOptions): FlavorPlan | undefined {
  const redirect = redirectIntent(domain) !== undefined;
  const message = unsupportedByDataPlane(options.dataPlane, options, redirect);
  if (message === undefined) return undefined;
  const servesFlavor = unsupportedByDataPlane(options.dataPlane, options, false) === undefined;
  return notRouted(
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
): FlavorPlan | undefined {
  const verdict = lookups.redirectTarget && redirectRouting(domain, lookups.redirectTarget);
  if (!verdict || verdict.route) return undefined;
  return notRouted(verdict.reason, verdict.message, challengeOnly(domain, options));
}

/**
 * The routing plan of `domain` under `options`. A data plane declared in `options.dataPlane` that
 * ignores the flavor (or, for a redirect domain, the flavor's redirect) gives `Routed=False`,
 * reason `UnsupportedByDataPlane` (data-planes.ts), before anything else is judged; then a kind the
 * ingress flavor's writer requires that the API server does not serve (`lookups.flavorKindServed`
 * false: for the `contour` flavor, `HTTPProxyUnsupported`). `lookups` carries what only the cluster
 * knows (the ports of the Service a serving domain names: a port it lacks is not routed, and gateway
 * mode needs a named port's number; for a redirect, its target: one that is not a serving domain of
 * the same project is not routed, with `redirectRouting`'s reason, and only the ACME challenge is
 * routed; for the `contour` flavor, whether the TLS Secret holds a certificate). Gateway mode is
 * written here; each ingress flavor by the writer its data plane module brings
 * (src/data-planes/<name>/flavor.ts). Never throws for a well-formed domain; options are checked
 * once at start by `checkRoutingOptions`.
 */
export function desiredRouting(
  domain: CustomDomain,
  options: RoutingOptions,
  lookups: RoutingLookups = {},
): RoutingPlan {
  return { ...flavorPlan(domain, options, lookups), owned: ownedRoutingObjects(domain) };
}

function flavorPlan(domain: CustomDomain, options: RoutingOptions, lookups: RoutingLookups): FlavorPlan {
  const unsupported = unsupportedFlavor(domain, options);
  if (unsupported) return unsupported;
  const writer = ingressWriter(options);
  const required = writer?.requiredKind;
  if (required !== undefined && lookups.flavorKindServed === false) return required.unserved(domain);
  const refused = refusedRedirect(domain, options, lookups);
  if (refused) return refused;
  if (writer === undefined) return gatewayPlan(domain, options, lookups);
  return writer.plan(domain, options, lookups);
}
