/**
 * Portico's routing class (docs/routing.md, "A routing class of Portico's own"): what marks a route
 * that only the controller may write, under the chart's admission policies.
 *
 * - Ingress mode: the ingress class `routing.ingress.className` (`--ingress-class`). The chart's
 *   routing-class policy (charts/portico/templates/routing-class-admission.yaml) refuses an Ingress
 *   or HTTPProxy of that class created or changed by anyone but the controller (and the users it
 *   lists), reading the class as Contour does (`routeClassOf`).
 * - Gateway mode: the Gateways of `routing.gateway.parentRefs` that have a namespace. The chart's
 *   gateway-routes policy (templates/gateway-routes-admission.yaml) refuses an HTTPRoute or
 *   ListenerSet whose parentRefs name one of them from another namespace than the Gateway's.
 *
 * A controller ownerReference alone is anyone's to write who may write the route, so a route at
 * Portico's name owned by a CustomDomain is the operator's own only when it is also in this class
 * (`inRoutingClass`). Without a class (no ingress class; gateway parentRefs without a namespace)
 * nothing reserves any route, and every route counts as before: the platform gave that up (chart
 * values `routing.ingress.className`, `admissionPolicy.routingClass.enabled`). Pure.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { isClassedRouteKind, routeClassOf } from './foreign-routes.js';
import { GATEWAY_API_GROUP, HTTPROUTE_KIND, LISTENERSET_KIND } from './gateway.js';
import type { GatewayParentRef, RoutingOptions } from './options.js';

/** The routing settings that decide the routing class (routing/options.ts). */
export type RoutingClassSettings = Pick<RoutingOptions, 'mode' | 'ingressClassName' | 'gatewayParentRefs'>;

/**
 * The Gateways `settings` reserve in gateway mode: the parentRefs with a namespace (a ref without
 * one names a Gateway in each route's own namespace, which its tenant owns). Empty in ingress mode.
 */
export function reservedGateways(settings: RoutingClassSettings): GatewayParentRef[] {
  if ((settings.mode ?? 'ingress') !== 'gateway') return [];
  return (settings.gatewayParentRefs ?? []).filter(
    (ref) => ref.namespace !== undefined && ref.namespace !== '',
  );
}

/** Whether `settings` give Portico a routing class at all (an ingress class, or a reserved Gateway). */
export function hasRoutingClass(settings: RoutingClassSettings): boolean {
  if ((settings.mode ?? 'ingress') === 'gateway') return reservedGateways(settings).length > 0;
  return settings.ingressClassName !== undefined && settings.ingressClassName !== '';
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** The parentRefs of an HTTPRoute (`spec.parentRefs`) or a ListenerSet (`spec.parentRef`). */
function parentRefsOf(obj: KubernetesObject): Record<string, unknown>[] {
  const spec = record((obj as { spec?: unknown }).spec);
  const refs: unknown[] = Array.isArray(spec.parentRefs)
    ? spec.parentRefs
    : spec.parentRef !== undefined
      ? [spec.parentRef]
      : [];
  return refs.map(record);
}

/**
 * Whether `obj`, of kind `kind` (the kind of the cache it was read from: list items carry none),
 * is in the routing class of `settings`, so that only the controller can have written it where the
 * chart's admission policies run:
 * - no routing class (`hasRoutingClass` false): true for every object (nothing is reserved);
 * - ingress mode: an object of a kind that names an ingress class (`isClassedRouteKind`: an
 *   Ingress or HTTPProxy) whose class, as Contour reads it (`routeClassOf`: annotations first,
 *   then `spec.ingressClassName`), is the ingress class; any other kind (a Traefik Middleware,
 *   which has no class) is false;
 * - gateway mode: an HTTPRoute or ListenerSet with a parentRef (group and kind defaulting to the
 *   Gateway's) naming a reserved Gateway (`reservedGateways`) in a namespace other than `obj`'s own,
 *   as the gateway-routes policy matches it; any other kind is false.
 * Never throws on a malformed object (routes are anyone's to write).
 */
export function inRoutingClass(kind: string, obj: KubernetesObject, settings: RoutingClassSettings): boolean {
  if (!hasRoutingClass(settings)) return true;
  if ((settings.mode ?? 'ingress') === 'ingress') {
    if (!isClassedRouteKind(kind)) return false;
    return routeClassOf(kind, obj) === settings.ingressClassName;
  }
  if (kind !== HTTPROUTE_KIND && kind !== LISTENERSET_KIND) return false;
  const namespace = obj.metadata?.namespace ?? '';
  return parentRefsOf(obj).some((ref) => {
    const group = ref.group ?? GATEWAY_API_GROUP;
    const refKind = ref.kind ?? 'Gateway';
    const refNamespace = typeof ref.namespace === 'string' ? ref.namespace : namespace;
    return (
      group === GATEWAY_API_GROUP &&
      refKind === 'Gateway' &&
      refNamespace !== namespace &&
      reservedGateways(settings).some((g) => g.name === ref.name && g.namespace === refNamespace)
    );
  });
}
