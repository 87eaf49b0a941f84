/**
 * Attaching a RateLimitPolicy to Envoy Gateway (docs/routing.md, "Envoy Gateway"; docs/ratelimits.md):
 * where a targeted Gateway API HTTPRoute or Gateway lands in Envoy Gateway's xDS, the EnvoyPatchPolicies
 * of each Gateway (built from routing/envoy-gateway-ratelimit.ts), and the verdict read from Envoy
 * Gateway's status of them. Pure: the attacher (envoy-gateway-attacher.ts) reads the objects and
 * applies what this returns.
 *
 * Each Gateway gets one EnvoyPatchPolicy `portico-ratelimit-<gateway>` with what every policy needs
 * once (the service's cluster, the filter on the listeners' ports), and one per (policy, target) with
 * that target's `rate_limits`, so Envoy Gateway's verdict is per target: one HTTPRoute it cannot patch
 * refuses that target's EnvoyPatchPolicy, not the others' (Envoy Gateway applies each patch on its own
 * and reports per EnvoyPatchPolicy: internal/xds/translator/jsonpatch.go).
 *
 * A Gateway target puts the policy's `rate_limits` on every virtual host of the route configurations
 * of the Gateway's listeners and of its ListenerSets' listeners that have routes attached (a route
 * configuration without a virtual host cannot take the patch). Envoy applies a virtual host's
 * `rate_limits` to each of its routes without `rate_limits` of its own (`vh_rate_limits` OVERRIDE,
 * the default), so where an HTTPRoute's policy and its Gateway's both apply, the HTTPRoute's wins for
 * that route's requests and the Gateway's is not counted there: the more specific policy wins, as in
 * Gateway API policy attachment (GEP-713), never both.
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
  envoyPatchPolicy,
  routeRateLimitsPatch,
  serviceWiringPatches,
  virtualHostRateLimitsPatch,
  type RateLimitServiceTarget,
} from '../../routing/envoy-gateway-ratelimit.js';
import { createHash } from 'node:crypto';
import { envoyRateLimits } from '../../routing/ratelimit-descriptors.js';
import { GATEWAY_API_GROUP, LISTENERSET_KIND } from '../../routing/gateway.js';
import { envoyGateway } from '../../data-planes/envoy-gateway/index.js';
import { isAttachmentTarget } from '../../data-planes/types.js';

/** The Gateway kind of Gateway API. */
export const GATEWAY_KIND = 'Gateway';
/**
 * The name of the one EnvoyPatchPolicy per namespace earlier releases kept (it carried every Gateway
 * of its namespace's wiring); deleted when its Gateway is synced.
 */
export const LEGACY_ENVOY_PATCH_POLICY_NAME = RATELIMIT_CLUSTER_NAME;
/** The annotation on a target's EnvoyPatchPolicy naming its target: `<Kind> <namespace>/<name>`. */
export const TARGET_ANNOTATION = 'portico.dev/ratelimit-target';
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
/** A listener's status as the implementation writes it (`attachedRoutes`: routes attached to it). */
export interface ListenerStatus {
  readonly name: string;
  readonly attachedRoutes?: number;
}
export interface GatewayObject {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly spec?: { readonly listeners?: readonly Listener[] };
  readonly status?: { readonly listeners?: readonly ListenerStatus[] };
}
export interface ListenerSetObject {
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly spec?: { readonly parentRef?: ParentRef; readonly listeners?: readonly Listener[] };
  readonly status?: { readonly listeners?: readonly ListenerStatus[] };
}

/** Where an HTTPRoute lands on one Gateway: the ports to filter and the route configurations to patch. */
export interface Placement {
  /** `namespace/name` of the Gateway. */
  readonly gateway: string;
  readonly ports: readonly number[];
  readonly routeConfigurations: readonly string[];
}

/**
 * True when `ref` names a Gateway API HTTPRoute or Gateway (wired through Envoy Gateway): the
 * targets of Envoy Gateway's `rateLimitAttachment` (src/data-planes/envoy-gateway).
 */
export function isEnvoyGatewayTarget(ref: PolicyTargetRef): boolean {
  return isAttachmentTarget(envoyGateway, ref);
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

/**
 * Where a Gateway target lands: the ports and route configurations of the Gateway's own HTTP and
 * HTTPS listeners and of those of `listenerSets` (the ListenerSets whose parentRef is this Gateway)
 * that have routes attached (`status.listeners[].attachedRoutes` > 0, as Envoy Gateway writes it):
 * the route configuration of a listener without routes has no virtual host to carry the limits.
 *
 * @returns undefined when no such listener has a route attached
 */
export function gatewayPlacement(
  gateway: GatewayObject,
  listenerSets: readonly ListenerSetObject[],
): Placement | undefined {
  const key = keyOf(gateway.metadata);
  const ports = new Set<number>();
  const configs = new Set<string>();
  const take = (
    listeners: readonly Listener[] | undefined,
    status: readonly ListenerStatus[] | undefined,
    https: (l: Listener) => string,
  ): void => {
    for (const l of (listeners ?? []).filter(routed)) {
      if ((status?.find((s) => s.name === l.name)?.attachedRoutes ?? 0) <= 0) continue;
      ports.add(l.port);
      configs.add(l.protocol === 'HTTP' ? `http-${l.port}` : https(l));
    }
  };
  take(gateway.spec?.listeners, gateway.status?.listeners, (l) => `${key}/${l.name}`);
  for (const ls of listenerSets) {
    if (listenerSetGateway(ls) !== key) continue;
    take(ls.spec?.listeners, ls.status?.listeners, (l) => `${key}/${keyOf(ls.metadata)}/${l.name}`);
  }
  if (configs.size === 0) return undefined;
  return {
    gateway: key,
    ports: [...ports].sort((a, b) => a - b),
    routeConfigurations: [...configs].sort(),
  };
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

/** One target of one policy placed on a Gateway, for the Gateway's EnvoyPatchPolicies. */
export interface GatewayTarget {
  readonly policy: RateLimitPolicy;
  /** The HTTPRoute or Gateway, in the policy's namespace. */
  readonly target: { readonly kind: string; readonly namespace: string; readonly name: string };
  readonly placement: Placement;
}

/** `<Kind> <namespace>/<name>` of a target: its key in `targetOwners`, its `TARGET_ANNOTATION`. */
export function targetText(target: GatewayTarget['target']): string {
  return `${target.kind} ${keyOf(target)}`;
}

/**
 * Which policy wires each target when several target it: the oldest (creationTimestamp, then
 * `namespace/name`). Two `rate_limits` adds on one route or virtual host would leave only the last one.
 *
 * @returns the winner of each target, by `targetText`
 */
export function targetOwners(targets: readonly GatewayTarget[]): Map<string, RateLimitPolicy> {
  const owners = new Map<string, RateLimitPolicy>();
  // The API's creationTimestamp: an RFC 3339 string as read from JSON (a Date when typed by the client).
  const rank = (p: RateLimitPolicy): string => {
    const created = p.metadata.creationTimestamp as Date | string | undefined;
    const at = created === undefined ? '' : new Date(created).toISOString();
    return `${at} ${p.metadata.namespace}/${p.metadata.name}`;
  };
  for (const t of targets) {
    const key = targetText(t.target);
    const current = owners.get(key);
    if (current === undefined || rank(t.policy) < rank(current)) owners.set(key, t.policy);
  }
  return owners;
}

/** `<prefix><gateway><suffix>`, within a DNS subdomain's 253 characters (a long Gateway name cut, its hash added). */
function boundedName(prefix: string, gateway: string, suffix: string): string {
  const whole = `${prefix}${gateway}${suffix}`;
  if (whole.length <= 253) return whole;
  const hash = createHash('sha256').update(gateway).digest('hex').slice(0, 10);
  return `${prefix}${gateway.slice(0, 200).replace(/[-.]+$/, '')}-${hash}${suffix}`;
}

/** The name of a Gateway's service-wiring EnvoyPatchPolicy: `portico-ratelimit-<gateway>`. */
export function serviceWiringPolicyName(gatewayName: string): string {
  return boundedName(`${RATELIMIT_CLUSTER_NAME}-`, gatewayName, '');
}

/**
 * The name of a target's EnvoyPatchPolicy on a Gateway: `portico-ratelimit-<gateway>-<hash>`, the
 * hash (10 hex digits of SHA-256) of the policy's `namespace/name` and the target's `targetText`.
 */
export function targetPolicyName(
  gatewayName: string,
  policy: RateLimitPolicy,
  target: GatewayTarget['target'],
): string {
  const hash = createHash('sha256')
    .update(`${keyOf(policy.metadata)} ${targetText(target)}`)
    .digest('hex')
    .slice(0, 10);
  return boundedName(`${RATELIMIT_CLUSTER_NAME}-`, gatewayName, `-${hash}`);
}

function labelled(
  body: Record<string, unknown>,
  annotations: Record<string, string>,
): Record<string, unknown> {
  body.metadata = {
    ...(body.metadata as Record<string, unknown>),
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
    annotations,
  };
  return body;
}

/**
 * The server-side apply configurations of a Gateway's EnvoyPatchPolicies for `targets` (each target
 * once: the caller keeps only `targetOwners`' winners), labelled as Portico's and annotated with the
 * policies they carry: the service wiring (every policy's entry) and one per target (its policy's
 * entry and the target). None when `targets` is empty.
 */
export function gatewayPatchPolicies(
  gateway: { namespace: string; name: string },
  targets: readonly GatewayTarget[],
  service: RateLimitServiceTarget,
): Record<string, unknown>[] {
  if (targets.length === 0) return [];
  const entries = [...new Set(targets.map((t) => policyEntry(t.policy)))].sort();
  const out = [
    labelled(
      envoyPatchPolicy(
        serviceWiringPolicyName(gateway.name),
        gateway,
        serviceWiringPatches(service, [...new Set(targets.flatMap((t) => t.placement.ports))]),
      ),
      { [POLICIES_ANNOTATION]: entries.join(',') },
    ),
  ];
  for (const t of targets) {
    const rateLimits = envoyRateLimits(t.policy, service.headers);
    const patches = t.placement.routeConfigurations.map((rc) =>
      t.target.kind === GATEWAY_KIND
        ? virtualHostRateLimitsPatch(rc, rateLimits)
        : routeRateLimitsPatch(rc, t.target, rateLimits),
    );
    out.push(
      labelled(envoyPatchPolicy(targetPolicyName(gateway.name, t.policy, t.target), gateway, patches), {
        [POLICIES_ANNOTATION]: policyEntry(t.policy),
        [TARGET_ANNOTATION]: targetText(t.target),
      }),
    );
  }
  return out;
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
