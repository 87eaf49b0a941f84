/**
 * Which writer routes a Project's auto-generated subdomain, by the operator's routing settings, and
 * how the data plane's acknowledgement of what it wrote is read (docs/customdomains.md, "The
 * auto-generated subdomain"). Pure.
 *
 * - Ingress mode: the writer of the data plane module that brings `--ingress-flavor`
 *   (`DataPlaneModule.subdomainRoute`, src/data-planes/<name>/subdomain-route.ts).
 * - Gateway API mode, every gateway's (as its CustomDomain routes are, gateway.ts): one HTTPRoute
 *   `portico-subdomain-<project>` on the configured parent Gateways (`gatewayParentRefs`), serving
 *   the Service or answering the redirect (`redirectRule`: https, the primary, 301, path and query
 *   kept). An HTTPRoute carries no TLS: the operator keeps, next to the wildcard Secret in its own
 *   namespace, the ListenerSet `portico-apps-domain` (`certificateAccess`) whose one HTTPS listener
 *   for `*.<apps domain>` presents it. A listener may reference a Secret of its own namespace
 *   without a ReferenceGrant (GEP-1713), so none is written and the key is never copied into a
 *   tenant's namespace. The listener admits routes only from the namespaces that hold a subdomain
 *   (`allowedRoutes` by the `kubernetes.io/metadata.name` label, which the API server sets to the
 *   namespace's name), and once the Secret holds a certificate the HTTPRoute names the ListenerSet
 *   as a parent too: a route attached to a Gateway does not attach to the listeners of its
 *   ListenerSets (GEP-1713, "Gateway Parents and sectionName"). The ListenerSet attaches to the
 *   Gateway of the first `gatewayParentRefs` entry (of the operator's namespace when that entry
 *   names none), which must admit the operator's namespace in `spec.allowedListeners`.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { DATA_PLANE_MODULES, ROUTE_KINDS } from '../data-planes/registry.js';
import type { SubdomainRouteWriter } from '../data-planes/types.js';
import { combine, type Acknowledgement } from './acknowledgement.js';
import type { ObjectHeader } from './flavor-plan.js';
import {
  DEFAULT_GATEWAY_HTTPS_PORT,
  forwardRule,
  GATEWAY_API_GROUP,
  GATEWAY_API_VERSION,
  httpRoute,
  HTTPROUTE_KIND,
  LISTENERSET_KIND,
  listenerSet,
  redirectRule,
  type ListenerNamespaces,
  type ListenerSet,
  type RouteParentRef,
} from './gateway.js';
import type { RoutingOptions } from './options.js';

/** The name of every object of a Project's subdomain route (suffixed where a writer makes two of a kind). */
export function subdomainRouteName(project: { metadata: { name: string } }): string {
  return `portico-subdomain-${project.metadata.name}`;
}

/** The ListenerSet, in the wildcard Secret's namespace, whose HTTPS listener presents the wildcard (gateway mode). */
export const APPS_DOMAIN_LISTENERSET_NAME = 'portico-apps-domain';

/**
 * The label the API server sets on every Namespace to its name (Kubernetes 1.22+, not settable to
 * another value): the key by which the wildcard listener admits the namespaces holding a subdomain.
 */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** The HTTPRoute parentRef of the wildcard's ListenerSet in `namespace` (every listener of it). */
export function appsDomainListenerSetRef(namespace: string): RouteParentRef {
  return { group: GATEWAY_API_GROUP, kind: LISTENERSET_KIND, name: APPS_DOMAIN_LISTENERSET_NAME, namespace };
}

/**
 * `allowedRoutes.namespaces` of the wildcard listener: the namespaces in `namespaces` by their
 * name label, or `Same` (the ListenerSet's own, which holds no route) when there are none (an `In`
 * selector needs at least one value).
 */
export function subdomainNamespaces(namespaces: readonly string[]): ListenerNamespaces {
  if (namespaces.length === 0) return { from: 'Same' };
  return {
    from: 'Selector',
    selector: { matchExpressions: [{ key: NAMESPACE_NAME_LABEL, operator: 'In', values: [...namespaces] }] },
  };
}

export const gatewaySubdomainRoute: SubdomainRouteWriter = {
  flavor: 'gateway',
  plan: (input) => {
    const rule = input.redirect ? redirectRule(input.redirect) : forwardRule('/', input.service);
    // The wildcard's listener is named only once the Secret holds a certificate: before, it has no
    // usable certificate and the route is served over HTTP only.
    const parents = [
      ...(input.options.gatewayParentRefs ?? []),
      ...(input.certificate ? [appsDomainListenerSetRef(input.certificate.namespace)] : []),
    ];
    return {
      apply: [httpRoute(input.metadata, input.hostname, parents, [rule])],
      what: input.certificate
        ? `HTTPRoute ${input.metadata.name} on ListenerSet ${input.certificate.namespace}/${APPS_DOMAIN_LISTENERSET_NAME}`
        : `HTTPRoute ${input.metadata.name}`,
    };
  },
  owned: (metadata) => [{ apiVersion: GATEWAY_API_VERSION, kind: HTTPROUTE_KIND, metadata }],
  certificateSource: `the HTTPRoute carries no TLS: the operator's ListenerSet ${APPS_DOMAIN_LISTENERSET_NAME}, next to the wildcard Secret in its own namespace, has the HTTPS listener for *.<apps domain> that presents it (no ReferenceGrant, no copy in the project's namespace)`,
  /**
   * The ListenerSet `portico-apps-domain` in the Secret's namespace: one HTTPS listener `https` for
   * `*.<apps domain>` on `gatewayHttpsPort` (default 443), TLS terminated with the Secret, admitting
   * routes of `namespaces` only; attached to the Gateway of the first `gatewayParentRefs` entry.
   *
   * @throws Error when `gatewayParentRefs` is empty (checkRoutingOptions refuses that at start)
   */
  certificateAccess: (secret, namespaces, { appsDomain, options }): ListenerSet => {
    const gateway = options.gatewayParentRefs?.[0];
    if (gateway === undefined)
      throw new Error(
        'gateway mode needs --gateway-parent-refs for the wildcard listener of the apps domain',
      );
    const set = listenerSet(
      { name: APPS_DOMAIN_LISTENERSET_NAME, namespace: secret.namespace },
      `*.${appsDomain}`,
      gateway,
      options.gatewayHttpsPort ?? DEFAULT_GATEWAY_HTTPS_PORT,
      secret.name,
    );
    return {
      ...set,
      spec: {
        ...set.spec,
        listeners: set.spec.listeners.map((l) => ({
          ...l,
          allowedRoutes: { namespaces: subdomainNamespaces(namespaces) },
        })),
      },
    };
  },
};

/** Every subdomain writer: each data plane module's, then Gateway API mode's. */
export const SUBDOMAIN_ROUTE_WRITERS: readonly SubdomainRouteWriter[] = [
  ...DATA_PLANE_MODULES.flatMap((m) => (m.subdomainRoute === undefined ? [] : [m.subdomainRoute])),
  gatewaySubdomainRoute,
];

/**
 * The writer for the operator's routing settings: gateway mode's, else the one of
 * `ingressFlavor` (default `nginx`, as for CustomDomains). Throws when no module brings it (a
 * registry defect, caught by the registry's tests).
 */
export function subdomainRouteWriter(
  options: Pick<RoutingOptions, 'mode' | 'ingressFlavor'>,
): SubdomainRouteWriter {
  const flavor = options.mode === 'gateway' ? 'gateway' : (options.ingressFlavor ?? 'nginx');
  const found = SUBDOMAIN_ROUTE_WRITERS.find((w) => w.flavor === flavor);
  if (found === undefined)
    throw new Error(`no writer routes the auto-generated subdomain in flavor "${flavor}"`);
  return found;
}

/**
 * Every object any writer could write for a Project with this metadata, once each (by apiVersion,
 * kind and name): what is deleted when it is not planned, whatever the flavor was before.
 */
export function everySubdomainObject(metadata: { name: string; namespace: string }): ObjectHeader[] {
  const seen = new Map<string, ObjectHeader>();
  for (const writer of SUBDOMAIN_ROUTE_WRITERS)
    for (const header of writer.owned(metadata))
      seen.set(`${header.apiVersion}/${header.kind}/${header.metadata.name}`, header);
  return [...seen.values()];
}

/** What the acknowledgement needs besides the objects. */
export interface SubdomainAcknowledgementContext {
  readonly ingressClassName: string | undefined;
  readonly dataPlaneName: string | undefined;
}

/**
 * Whether the data plane took the planned objects: each one of a route kind that is acknowledged
 * (routing/acknowledgement.ts through the route kinds of src/data-planes/) is judged on `current`,
 * the object as the API server holds it (status included), when it is the object as planned
 * (`covers`); an object not yet as planned is `awaiting`. Objects nothing reports on (a Traefik
 * Middleware) count as taken.
 */
export function subdomainAcknowledgement(
  planned: readonly KubernetesObject[],
  current: (header: KubernetesObject) => KubernetesObject | undefined,
  context: SubdomainAcknowledgementContext,
): Acknowledgement {
  const parts: Acknowledgement[] = [];
  for (const object of planned) {
    const acknowledge = ROUTE_KINDS.get(object.kind ?? '')?.acknowledge;
    if (acknowledge === undefined) continue;
    const name = object.metadata?.name ?? '';
    const cached = current(object);
    if (cached === undefined || !covers(cached, object)) {
      parts.push({ kind: 'awaiting', message: `${object.kind ?? ''} ${name} is being written.` });
      continue;
    }
    parts.push(
      acknowledge({
        applied: object,
        cached,
        name,
        namespace: object.metadata?.namespace ?? '',
        ingressClassName: context.ingressClassName,
        dataPlaneName: context.dataPlaneName,
      }),
    );
  }
  return parts.length === 0 ? { kind: 'confirmed', message: '' } : combine(parts);
}

/** True when the data plane reports on objects of `object`'s kind (a ListenerSet; not a TLSStore). */
export function acknowledgedKind(object: KubernetesObject): boolean {
  return ROUTE_KINDS.get(object.kind ?? '')?.acknowledge !== undefined;
}

/**
 * Whether the data plane took the writer's certificate access object (gateway mode's ListenerSet:
 * `Accepted` and `Programmed`, its listener not refused, e.g. `ResolvedRefs=False` for a Secret it
 * cannot use): its route kind's acknowledgement of `current`, the object as the API server holds it
 * (undefined: not written yet, `awaiting`). Undefined when the data plane reports on no object of
 * that kind (Contour's TLSCertificateDelegation, Traefik's TLSStore): nothing to judge. Pure.
 */
export function certificateAccessAcknowledgement(
  planned: KubernetesObject,
  current: KubernetesObject | undefined,
  context: SubdomainAcknowledgementContext,
): Acknowledgement | undefined {
  const acknowledge = ROUTE_KINDS.get(planned.kind ?? '')?.acknowledge;
  if (acknowledge === undefined) return undefined;
  const name = planned.metadata?.name ?? '';
  const namespace = planned.metadata?.namespace ?? '';
  if (current === undefined)
    return { kind: 'awaiting', message: `${planned.kind ?? ''} ${namespace}/${name} is being written.` };
  return acknowledge({
    applied: planned,
    cached: current,
    name: `${namespace}/${name}`,
    namespace,
    ingressClassName: context.ingressClassName,
    dataPlaneName: context.dataPlaneName,
  });
}

/** Annotations other writers set on any object (kubectl's), not compared. */
const FOREIGN_ANNOTATION_PREFIX = 'kubectl.kubernetes.io/';

function ownAnnotations(object: KubernetesObject): Record<string, string> {
  return Object.fromEntries(
    Object.entries(object.metadata?.annotations ?? {}).filter(
      ([k]) => !k.startsWith(FOREIGN_ANNOTATION_PREFIX),
    ),
  );
}

/**
 * True when `current` is `planned` as applied: every field of `planned`'s spec and ownerReferences
 * with the same value (arrays element by element, same length), whatever the API server defaulted
 * beside them (an HTTPRoute's parentRef group and kind, a backendRef's weight), and the same
 * annotations (but kubectl's), so that a redirect annotation no longer planned is removed. Pure.
 */
export function covers(current: KubernetesObject, planned: KubernetesObject): boolean {
  const c = current as { spec?: unknown; metadata?: { ownerReferences?: unknown } };
  const p = planned as { spec?: unknown; metadata?: { ownerReferences?: unknown } };
  const a = ownAnnotations(current);
  const b = ownAnnotations(planned);
  return (
    subset(c.spec, p.spec) &&
    subset(c.metadata?.ownerReferences ?? [], p.metadata?.ownerReferences ?? []) &&
    Object.keys(a).length === Object.keys(b).length &&
    subset(a, b)
  );
}

function subset(have: unknown, want: unknown): boolean {
  if (want === undefined) return true;
  if (Array.isArray(want))
    return Array.isArray(have) && have.length === want.length && want.every((w, i) => subset(have[i], w));
  if (want !== null && typeof want === 'object') {
    if (have === null || typeof have !== 'object' || Array.isArray(have)) return false;
    return Object.entries(want).every(([k, v]) => subset((have as Record<string, unknown>)[k], v));
  }
  return have === want;
}
