/**
 * Attaching a RateLimitPolicy to Envoy Gateway (docs/routing.md, "Envoy Gateway"; docs/ratelimits.md):
 * where a targeted Gateway API HTTPRoute lands in Envoy Gateway's xDS, the one EnvoyPatchPolicy per
 * Gateway that carries every such policy (built by routing/envoy-gateway-ratelimit.ts), and the
 * verdict read from Envoy Gateway's status of it. Pure: the attacher (envoy-gateway-attacher.ts) reads
 * the objects and applies what this returns.
 *
 * Names in Envoy Gateway v1.9.1's xDS with the runtime flag `XDSNameSchemeV2` (docs/routing.md):
 * an HTTP listener's routes are in the route configuration `http-<port>`; an HTTPS listener's in one
 * named after the listener, `<gateway namespace>/<gateway>/<listener>` for a Gateway's own and
 * `<gateway namespace>/<gateway>/<listenerset namespace>/<listenerset>/<listener>` for a ListenerSet's;
 * the Envoy listener of a port is `tcp-<port>`.
 */
import type { PolicyTargetRef, RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import {
  RATELIMIT_CLUSTER_NAME,
  envoyGatewayRateLimitPatch,
  type RateLimitServiceTarget,
  type TargetedRoute,
} from '../../routing/envoy-gateway-ratelimit.js';
import { GATEWAY_API_GROUP, HTTPROUTE_KIND, LISTENERSET_KIND } from '../../routing/gateway.js';

/** The EnvoyPatchPolicy of each Gateway: in the Gateway's namespace, this name. */
export const ENVOY_PATCH_POLICY_NAME = RATELIMIT_CLUSTER_NAME;
/**
 * The annotation on an EnvoyPatchPolicy naming what it carries: `<namespace>/<name>@<generation>` of
 * each policy, comma-separated, sorted. A policy reads its own entry to know its generation is in.
 */
export const POLICIES_ANNOTATION = 'portico.dev/ratelimit-policies';

/** A Gateway API listener as far as this reads it. */
export interface Listener {
  readonly name: string;
  readonly port: number;
  readonly protocol: string;
}
/** A parentRefs entry (Gateway API `ParentReference`). */
export interface ParentRef {
  readonly group?: string;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name: string;
  readonly sectionName?: string;
}
export interface HTTPRouteObject {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly spec?: { readonly parentRefs?: readonly ParentRef[] };
}
export interface GatewayObject {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly spec?: { readonly listeners?: readonly Listener[] };
}
export interface ListenerSetObject {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly spec?: { readonly parentRef?: ParentRef; readonly listeners?: readonly Listener[] };
}

/** Where an HTTPRoute lands on one Gateway: the ports to filter and the route configurations to patch. */
export interface Placement {
  /** `namespace/name` of the Gateway. */
  readonly gateway: string;
  readonly ports: readonly number[];
  readonly routeConfigurations: readonly string[];
}

/** True when `ref` names a Gateway API HTTPRoute (wired through Envoy Gateway). */
export function isEnvoyGatewayTarget(ref: PolicyTargetRef): boolean {
  return ref.group === GATEWAY_API_GROUP && ref.kind === HTTPROUTE_KIND;
}

/** `namespace/name`. */
export function keyOf(o: { namespace: string; name: string }): string {
  return `${o.namespace}/${o.name}`;
}

/** The route's parents of one kind (`Gateway`, the default, or `ListenerSet`), namespace filled in. */
export function parentsOf(
  route: HTTPRouteObject,
  kind: 'Gateway' | typeof LISTENERSET_KIND,
): { namespace: string; name: string; sectionName?: string }[] {
  return (route.spec?.parentRefs ?? [])
    .filter((p) => (p.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP && (p.kind ?? 'Gateway') === kind)
    .map((p) => ({
      name: p.name,
      namespace: p.namespace ?? route.metadata.namespace,
      ...(p.sectionName === undefined ? {} : { sectionName: p.sectionName }),
    }));
}

function routed(l: Listener): boolean {
  return l.protocol === 'HTTP' || l.protocol === 'HTTPS';
}

/**
 * Where an HTTPRoute lands: for each parent Gateway (directly, or through a ListenerSet of its
 * parentRefs), the ports and route configurations of the listeners it attaches to (those named by
 * `sectionName`, else every HTTP and HTTPS listener). Parents missing from `gateways` or
 * `listenerSets` (not found) are left out.
 *
 * @param gateways the parent Gateways read, by `namespace/name`
 * @param listenerSets the parent ListenerSets read, by `namespace/name`
 */
export function placements(
  route: HTTPRouteObject,
  gateways: ReadonlyMap<string, GatewayObject>,
  listenerSets: ReadonlyMap<string, ListenerSetObject>,
): Placement[] {
  // Each attached listener: its Gateway, and its route configuration when HTTPS.
  const attached: { gateway: string; listener: Listener; https: string }[] = [];
  for (const parent of parentsOf(route, 'Gateway')) {
    const gateway = keyOf(parent);
    for (const l of selected(gateways.get(gateway)?.spec?.listeners, parent.sectionName))
      attached.push({ gateway, listener: l, https: `${gateway}/${l.name}` });
  }
  for (const parent of parentsOf(route, LISTENERSET_KIND)) {
    const ls = listenerSets.get(keyOf(parent));
    const gateway = ls === undefined ? undefined : listenerSetGateway(ls);
    if (ls === undefined || gateway === undefined || !gateways.has(gateway)) continue;
    for (const l of selected(ls.spec?.listeners, parent.sectionName))
      attached.push({ gateway, listener: l, https: `${gateway}/${keyOf(ls.metadata)}/${l.name}` });
  }
  const byGateway = new Map<string, { ports: Set<number>; configs: Set<string> }>();
  for (const { gateway, listener, https } of attached) {
    const entry = byGateway.get(gateway) ?? { ports: new Set<number>(), configs: new Set<string>() };
    byGateway.set(gateway, entry);
    entry.ports.add(listener.port);
    entry.configs.add(listener.protocol === 'HTTP' ? `http-${listener.port}` : https);
  }
  return [...byGateway.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([gateway, e]) => ({
      gateway,
      ports: [...e.ports].sort((a, b) => a - b),
      routeConfigurations: [...e.configs].sort(),
    }));
}

/** The HTTP and HTTPS listeners of `listeners` a parentRef attaches to (the one `sectionName` names, else all). */
function selected(listeners: readonly Listener[] | undefined, sectionName: string | undefined): Listener[] {
  return (listeners ?? []).filter((l) => routed(l) && (sectionName === undefined || sectionName === l.name));
}

/** The Gateways of a ListenerSet parent's `parentRef` (`namespace/name`), for reading them. */
export function listenerSetGateway(ls: ListenerSetObject): string | undefined {
  const ref = ls.spec?.parentRef;
  return ref === undefined ? undefined : `${ref.namespace ?? ls.metadata.namespace}/${ref.name}`;
}

/** `<namespace>/<name>@<generation>` of a policy, its entry in `POLICIES_ANNOTATION`. */
export function policyEntry(policy: RateLimitPolicy): string {
  return `${policy.metadata.namespace}/${policy.metadata.name}@${policy.metadata.generation ?? 1}`;
}

/** The entries of `POLICIES_ANNOTATION` (empty when absent). */
export function parseEntries(value: string | undefined): string[] {
  return (value ?? '').split(',').filter((e) => e !== '');
}

/** The `namespace/name` of an annotation entry. */
export function entryPolicy(entry: string): string {
  const at = entry.lastIndexOf('@');
  return at < 0 ? entry : entry.slice(0, at);
}

/** One policy's HTTPRoute on a Gateway, for the Gateway's EnvoyPatchPolicy. */
export interface GatewayRoute {
  readonly policy: RateLimitPolicy;
  readonly route: { readonly namespace: string; readonly name: string };
  readonly placement: Placement;
}

/**
 * Which policy wires each HTTPRoute when several target it: the oldest (creationTimestamp, then
 * `namespace/name`). Two `rate_limits` adds on one route would leave only the last one.
 *
 * @returns the winner of each HTTPRoute, by `namespace/name` of the route
 */
export function routeOwners(routes: readonly GatewayRoute[]): Map<string, RateLimitPolicy> {
  const owners = new Map<string, RateLimitPolicy>();
  // The API's creationTimestamp: an RFC 3339 string as read from JSON (a Date when typed by the client).
  const rank = (p: RateLimitPolicy): string => {
    const created = p.metadata.creationTimestamp as Date | string | undefined;
    const at = created === undefined ? '' : new Date(created).toISOString();
    return `${at} ${p.metadata.namespace}/${p.metadata.name}`;
  };
  for (const r of routes) {
    const key = keyOf(r.route);
    const current = owners.get(key);
    if (current === undefined || rank(r.policy) < rank(current)) owners.set(key, r.policy);
  }
  return owners;
}

/**
 * The server-side apply configuration of a Gateway's EnvoyPatchPolicy carrying `routes` (each route
 * once: the caller keeps only `routeOwners`' winners), labelled as Portico's and annotated with the
 * policies it carries.
 *
 * @throws RangeError from the builder when no port is placed
 */
export function gatewayPatchPolicy(
  gateway: { namespace: string; name: string },
  routes: readonly GatewayRoute[],
  service: RateLimitServiceTarget,
): Record<string, unknown> {
  const targeted: TargetedRoute[] = routes.map((r) => ({
    policy: r.policy,
    httpRoute: r.route,
    routeConfigurations: r.placement.routeConfigurations,
  }));
  const body = envoyGatewayRateLimitPatch({
    gateway,
    ports: [...new Set(routes.flatMap((r) => r.placement.ports))],
    routes: targeted,
    service,
    name: ENVOY_PATCH_POLICY_NAME,
  });
  const entries = [...new Set(routes.map((r) => policyEntry(r.policy)))].sort();
  body.metadata = {
    ...(body.metadata as Record<string, unknown>),
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
    annotations: { [POLICIES_ANNOTATION]: entries.join(',') },
  };
  return body;
}

/** An EnvoyPatchPolicy as far as the verdict reads it. */
export interface EnvoyPatchPolicyObject {
  metadata: {
    namespace: string;
    name: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  status?: {
    ancestors?: {
      ancestorRef?: { name?: string; namespace?: string; kind?: string };
      conditions?: {
        type: string;
        status: string;
        reason?: string;
        message?: string;
        observedGeneration?: number;
      }[];
    }[];
  };
}

/** Envoy Gateway's word on an EnvoyPatchPolicy's current generation. */
export type PatchState =
  | { readonly state: 'pending' }
  | { readonly state: 'programmed'; readonly message: string }
  | { readonly state: 'refused'; readonly reason: string; readonly message: string };

/**
 * Envoy Gateway's verdict on the EnvoyPatchPolicy, from the conditions it wrote for the policy's
 * current generation under the Gateway ancestor: `Accepted=False` or `Programmed=False` is a refusal
 * (that condition's reason and message), `Programmed=True` programmed, anything else pending.
 */
export function patchState(epp: EnvoyPatchPolicyObject, gatewayName: string): PatchState {
  const generation = epp.metadata.generation ?? 0;
  const ancestor = (epp.status?.ancestors ?? []).find(
    (a) => (a.ancestorRef?.kind ?? 'Gateway') === 'Gateway' && a.ancestorRef?.name === gatewayName,
  );
  const current = (ancestor?.conditions ?? []).filter((c) => (c.observedGeneration ?? -1) >= generation);
  const refusal = current.find(
    (c) => (c.type === 'Accepted' || c.type === 'Programmed') && c.status === 'False',
  );
  if (refusal !== undefined)
    return { state: 'refused', reason: refusal.reason ?? '', message: refusal.message ?? '' };
  const programmed = current.find((c) => c.type === 'Programmed' && c.status === 'True');
  if (programmed !== undefined) return { state: 'programmed', message: programmed.message ?? '' };
  return { state: 'pending' };
}
