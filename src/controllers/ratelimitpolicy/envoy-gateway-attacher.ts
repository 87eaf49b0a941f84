/**
 * The Envoy Gateway side of RateLimitPolicy attachment (`--envoy-gateway-attachment`; docs/routing.md,
 * "Envoy Gateway"): reads a targeted HTTPRoute's parent Gateways and ListenerSets, keeps one
 * EnvoyPatchPolicy `portico-ratelimit` per Gateway (in the Gateway's namespace, server-side applied
 * under the operator's field manager) carrying every policy that targets a route under it, deletes it
 * when none does (owner references cannot cross namespaces), and turns Envoy Gateway's status of it
 * into each target's verdict. The objects are read from the API server at each reconcile (no watch):
 * a change of an HTTPRoute's parents is seen at the policy's next reconcile or resync.
 */
import { CustomObjectsApi, type KubeConfig, type KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import type { PolicyTargetRef, RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import {
  ENVOY_PATCH_POLICY_PLURAL,
  type RateLimitServiceTarget,
} from '../../routing/envoy-gateway-ratelimit.js';
import { describeTarget, targetsOf, type TargetVerdict } from './attachment.js';
import {
  ENVOY_PATCH_POLICY_NAME,
  POLICIES_ANNOTATION,
  entryPolicy,
  gatewayPatchPolicy,
  isEnvoyGatewayTarget,
  keyOf,
  listenerSetGateway,
  parentsOf,
  parseEntries,
  patchState,
  placements,
  policyEntry,
  routeOwners,
  type EnvoyPatchPolicyObject,
  type GatewayObject,
  type GatewayRoute,
  type HTTPRouteObject,
  type ListenerSetObject,
  type PatchState,
  type Placement,
} from './envoy-gateway-attachment.js';

const GATEWAY_API = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;
const EG_API = {
  group: 'gateway.envoyproxy.io',
  version: 'v1alpha1',
  plural: ENVOY_PATCH_POLICY_PLURAL,
} as const;
const SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/** What reading one HTTPRoute target found. */
type Resolution =
  | { readonly kind: 'notFound' }
  | { readonly kind: 'noGateway'; readonly parents: string }
  | { readonly kind: 'placed'; readonly placements: readonly Placement[] };

/** The verdicts of a policy's HTTPRoute targets, and the Gateways whose EnvoyPatchPolicy is behind. */
export interface EnvoyGatewayVerdicts {
  /** By target (`group/kind/name`). */
  readonly verdicts: ReadonlyMap<string, TargetVerdict>;
  /** `namespace/name` of each Gateway whose EnvoyPatchPolicy must be applied again. */
  readonly behind: ReadonlySet<string>;
  /** True when a verdict waits on Envoy Gateway or on the apply. */
  readonly pending: boolean;
}

/** The key of a target in `EnvoyGatewayVerdicts.verdicts`. */
export function targetKey(ref: PolicyTargetRef): string {
  return `${ref.group}/${ref.kind}/${ref.name}`;
}

export class EnvoyGatewayAttacher {
  readonly #custom: CustomObjectsApi;
  readonly #objects: KubernetesObjectApi;
  readonly #service: RateLimitServiceTarget;
  readonly #log: Logger;

  constructor(o: {
    kubeConfig: KubeConfig;
    objects: KubernetesObjectApi;
    service: RateLimitServiceTarget;
    log: Logger;
  }) {
    this.#custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#objects = o.objects;
    this.#service = o.service;
    this.#log = o.log;
  }

  async #get<T>(
    api: { group: string; version: string },
    plural: string,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    try {
      return (await this.#custom.getNamespacedCustomObject({ ...api, plural, namespace, name })) as T;
    } catch (err: unknown) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Reads an HTTPRoute of `namespace` and its parents; where it lands on each Gateway. */
  async #resolve(namespace: string, name: string): Promise<Resolution> {
    const route = await this.#get<HTTPRouteObject>(GATEWAY_API, 'httproutes', namespace, name);
    if (route === undefined) return { kind: 'notFound' };
    const listenerSets = new Map<string, ListenerSetObject>();
    for (const p of parentsOf(route, 'ListenerSet')) {
      const ls = await this.#get<ListenerSetObject>(GATEWAY_API, 'listenersets', p.namespace, p.name);
      if (ls !== undefined) listenerSets.set(keyOf(p), ls);
    }
    const gatewayKeys = new Set([
      ...parentsOf(route, 'Gateway').map(keyOf),
      ...[...listenerSets.values()].map(listenerSetGateway).filter((k): k is string => k !== undefined),
    ]);
    const gateways = new Map<string, GatewayObject>();
    for (const key of gatewayKeys) {
      const slash = key.indexOf('/');
      const gw = await this.#get<GatewayObject>(
        GATEWAY_API,
        'gateways',
        key.slice(0, slash),
        key.slice(slash + 1),
      );
      if (gw !== undefined) gateways.set(key, gw);
    }
    const placed = placements(route, gateways, listenerSets);
    if (placed.length === 0) {
      const parents = (route.spec?.parentRefs ?? [])
        .map((p) => `${p.kind ?? 'Gateway'} ${p.name}`)
        .join(', ');
      return { kind: 'noGateway', parents: parents === '' ? 'none' : parents };
    }
    return { kind: 'placed', placements: placed };
  }

  /** The placed HTTPRoutes of every policy in `policies` (each policy's targets read once). */
  async #routes(policies: readonly RateLimitPolicy[]): Promise<GatewayRoute[]> {
    const out: GatewayRoute[] = [];
    for (const policy of policies) {
      for (const ref of targetsOf(policy).filter(isEnvoyGatewayTarget)) {
        const route = { namespace: policy.metadata.namespace, name: ref.name };
        const r = await this.#resolve(route.namespace, route.name);
        if (r.kind !== 'placed') continue;
        for (const placement of r.placements) out.push({ policy, route, placement });
      }
    }
    return out;
  }

  /** Every EnvoyPatchPolicy Portico keeps (its label), in every namespace. */
  async patchPolicies(): Promise<EnvoyPatchPolicyObject[]> {
    const list = (await this.#custom.listClusterCustomObject({ ...EG_API, labelSelector: SELECTOR })) as {
      items?: EnvoyPatchPolicyObject[];
    };
    return (list.items ?? []).filter((e) => e.metadata.name === ENVOY_PATCH_POLICY_NAME);
  }

  /** `namespace/name` of the Gateways whose EnvoyPatchPolicy names the policy `policyKey`. */
  async gatewaysCarrying(policyKey: string): Promise<string[]> {
    return (await this.patchPolicies())
      .filter((e) =>
        parseEntries(e.metadata.annotations?.[POLICIES_ANNOTATION]).some((x) => entryPolicy(x) === policyKey),
      )
      .map((e) => `${e.metadata.namespace}/${gatewayOf(e)}`);
  }

  /** Deletes the EnvoyPatchPolicy of a Gateway's namespace (gone already: nothing to do). */
  async #delete(namespace: string): Promise<void> {
    try {
      await this.#custom.deleteNamespacedCustomObject({
        ...EG_API,
        namespace,
        name: ENVOY_PATCH_POLICY_NAME,
      });
    } catch (err: unknown) {
      if (!isNotFound(err)) throw err;
    }
    this.#log.info(
      { envoyPatchPolicy: `${namespace}/${ENVOY_PATCH_POLICY_NAME}` },
      'rate-limit EnvoyPatchPolicy deleted: no policy targets a route of its Gateway',
    );
  }

  /**
   * Applies the EnvoyPatchPolicy of one Gateway with every policy's HTTPRoutes placed on it (one
   * policy per HTTPRoute: `routeOwners`), or deletes it when there are none.
   *
   * @param gateway `namespace/name`
   * @returns `namespace/name` of the policies whose entry in it changed (their verdict is to be read again)
   * @throws the API error of a failed read, apply or delete (retry with backoff)
   */
  async syncGateway(gateway: string, policies: readonly RateLimitPolicy[]): Promise<Set<string>> {
    const slash = gateway.indexOf('/');
    const gw = { namespace: gateway.slice(0, slash), name: gateway.slice(slash + 1) };
    const all = (await this.#routes(policies.filter((p) => targetsOf(p).some(isEnvoyGatewayTarget)))).filter(
      (r) => r.placement.gateway === gateway,
    );
    const owners = routeOwners(all);
    const routes = all.filter((r) => owners.get(keyOf(r.route)) === r.policy);
    const existing = await this.#get<EnvoyPatchPolicyObject>(
      EG_API,
      EG_API.plural,
      gw.namespace,
      ENVOY_PATCH_POLICY_NAME,
    );
    const before = parseEntries(existing?.metadata.annotations?.[POLICIES_ANNOTATION]);
    let after: string[] = [];
    if (routes.length === 0) {
      if (existing?.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE)
        await this.#delete(gw.namespace);
    } else {
      const body = gatewayPatchPolicy(gw, routes, this.#service);
      await serverSideApply(this.#objects, body as never, { fieldManager: FIELD_MANAGER, force: true });
      after = parseEntries(
        (body.metadata as { annotations: Record<string, string> }).annotations[POLICIES_ANNOTATION],
      );
      this.#log.info(
        { envoyPatchPolicy: `${gw.namespace}/${ENVOY_PATCH_POLICY_NAME}`, policies: after.length },
        'rate-limit EnvoyPatchPolicy applied',
      );
    }
    const changed = new Set<string>();
    for (const e of [
      ...before.filter((x) => !after.includes(x)),
      ...after.filter((x) => !before.includes(x)),
    ])
      changed.add(entryPolicy(e));
    // Policies that lost their route to an older one: their verdict says so.
    for (const r of all) if (owners.get(keyOf(r.route)) !== r.policy) changed.add(keyOf(r.policy.metadata));
    return changed;
  }

  /**
   * The verdict of each HTTPRoute target of `policy` (Envoy Gateway's status of the EnvoyPatchPolicy
   * of each Gateway the route is under), and the Gateways whose EnvoyPatchPolicy does not carry this
   * generation of the policy, or carries a policy that no longer targets a route under it.
   *
   * @param policies every policy (which one wires an HTTPRoute several target)
   * @throws the API error of a failed read (retry with backoff)
   */
  async verdicts(
    policy: RateLimitPolicy,
    policies: readonly RateLimitPolicy[],
  ): Promise<EnvoyGatewayVerdicts> {
    const verdicts = new Map<string, TargetVerdict>();
    const behind = new Set<string>();
    const placedOn = new Set<string>();
    for (const ref of targetsOf(policy).filter(isEnvoyGatewayTarget)) {
      const r = await this.#resolve(policy.metadata.namespace, ref.name);
      if (r.kind === 'placed') for (const p of r.placements) placedOn.add(p.gateway);
      verdicts.set(targetKey(ref), await this.#verdict(policy, ref, r, policies, behind));
    }
    // Gateways that still carry this policy although none of its routes is placed there any more.
    for (const gw of await this.gatewaysCarrying(keyOf(policy.metadata)))
      if (!placedOn.has(gw)) behind.add(gw);
    const pending = [...verdicts.values()].some((v) => v.pending === true);
    return { verdicts, behind, pending };
  }

  /** One HTTPRoute target's verdict; adds to `behind` the Gateways not carrying this generation. */
  async #verdict(
    policy: RateLimitPolicy,
    ref: PolicyTargetRef,
    r: Resolution,
    policies: readonly RateLimitPolicy[],
    behind: Set<string>,
  ): Promise<TargetVerdict> {
    const namespace = policy.metadata.namespace;
    const what = describeTarget(ref);
    const no = (reason: TargetVerdict['reason'], message: string): TargetVerdict => ({
      ref,
      wired: false,
      reason,
      message: `${what}: ${message}`,
    });
    if (r.kind === 'notFound') return no('TargetNotFound', `not found in namespace ${namespace}`);
    if (r.kind === 'noGateway')
      return no(
        'NoParentGateway',
        `none of its parentRefs (${r.parents}) is a Gateway or ListenerSet the operator could read with an HTTP or HTTPS listener`,
      );
    const route = { namespace, name: ref.name };
    const placement = r.placements[0] as Placement;
    const owner = routeOwners(
      policies
        .filter(
          (c) =>
            c.metadata.namespace === namespace &&
            targetsOf(c).some((t) => isEnvoyGatewayTarget(t) && t.name === ref.name),
        )
        .map((c) => ({ policy: c, route, placement })),
    ).get(keyOf(route));
    if (owner !== undefined && keyOf(owner.metadata) !== keyOf(policy.metadata))
      return no(
        'FieldConflict',
        `RateLimitPolicy ${owner.metadata.name}, older, targets it too and is the one wired (one policy per HTTPRoute)`,
      );
    const states = [];
    for (const p of r.placements) states.push(await this.#placementState(policy, p.gateway, behind));
    const refused = states.find((s) => s.state === 'refused');
    if (refused !== undefined) return no('RefusedByEnvoyGateway', refused.text);
    const text = `${what}: ${states.map((s) => s.text).join('; ')}`;
    if (states.some((s) => s.state === 'pending'))
      return { ref, wired: false, pending: true, reason: 'AwaitingEnvoyGateway', message: text };
    return { ref, wired: true, reason: 'Attached', message: text };
  }

  /** Envoy Gateway's word on this generation of the policy in the EnvoyPatchPolicy of `gateway`. */
  async #placementState(
    policy: RateLimitPolicy,
    gateway: string,
    behind: Set<string>,
  ): Promise<{ state: PatchState['state']; text: string }> {
    const slash = gateway.indexOf('/');
    const namespace = gateway.slice(0, slash);
    const eppName = `${namespace}/${ENVOY_PATCH_POLICY_NAME}`;
    const epp = await this.#get<EnvoyPatchPolicyObject>(
      EG_API,
      EG_API.plural,
      namespace,
      ENVOY_PATCH_POLICY_NAME,
    );
    if (!parseEntries(epp?.metadata.annotations?.[POLICIES_ANNOTATION]).includes(policyEntry(policy))) {
      behind.add(gateway);
      return { state: 'pending', text: `EnvoyPatchPolicy ${eppName} of Gateway ${gateway} being applied` };
    }
    const state = patchState(epp as EnvoyPatchPolicyObject, gateway.slice(slash + 1));
    switch (state.state) {
      case 'pending':
        return {
          state: 'pending',
          text: `EnvoyPatchPolicy ${eppName} applied; Envoy Gateway has not yet reported on generation ${epp?.metadata.generation ?? 0}`,
        };
      case 'refused':
        return {
          state: 'refused',
          text: `EnvoyPatchPolicy ${eppName}: Envoy Gateway refuses it: ${state.reason}: ${state.message}`,
        };
      case 'programmed':
        return {
          state: 'programmed',
          text: `EnvoyPatchPolicy ${eppName} programmed by Envoy Gateway on Gateway ${gateway}`,
        };
    }
  }
}

/** The Gateway an EnvoyPatchPolicy targets (its `spec.targetRef.name`). */
function gatewayOf(epp: EnvoyPatchPolicyObject): string {
  return (epp as { spec?: { targetRef?: { name?: string } } }).spec?.targetRef?.name ?? '';
}

/** The verdict of an HTTPRoute target while `--envoy-gateway-attachment` is off. */
export function envoyGatewayDisabledVerdict(ref: PolicyTargetRef): TargetVerdict {
  return {
    ref,
    wired: false,
    reason: 'EnvoyGatewayAttachmentDisabled',
    message: `${describeTarget(ref)}: the operator runs with --envoy-gateway-attachment=false and writes no EnvoyPatchPolicy`,
  };
}
