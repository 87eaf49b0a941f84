/**
 * The Envoy Gateway side of RateLimitPolicy attachment (`--envoy-gateway-attachment`; docs/routing.md,
 * "Envoy Gateway"): reads a targeted HTTPRoute's parent Gateways and ListenerSets, or a targeted
 * Gateway and its ListenerSets; keeps each Gateway's EnvoyPatchPolicies in the Gateway's namespace
 * (server-side applied under the operator's field manager; the service wiring once per Gateway and
 * one per target: envoy-gateway-attachment.ts), deletes those no policy needs (owner references
 * cannot cross namespaces), and turns Envoy Gateway's status of them into each target's verdict.
 *
 * The objects are read from the API server at each reconcile; watches on HTTPRoutes, Gateways and
 * ListenerSets (`start`) only say when to look again: a change of one queues the Gateways it is
 * under and the policies that target it, so a new parent or ListenerSet is wired within seconds.
 */
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  type KubernetesObjectApi,
} from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../../api/customdomain.js';
import type { PolicyTargetRef, RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { isNotFound } from '../../kube/errors.js';
import { ResilientInformer } from '../../kube/informer.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import {
  ENVOY_PATCH_POLICY_PLURAL,
  type RateLimitServiceTarget,
} from '../../routing/envoy-gateway-ratelimit.js';
import {
  describeTarget,
  targetsOf,
  type TargetVerdict,
} from '../../controllers/ratelimitpolicy/attachment.js';
import { HTTPROUTE_KIND } from '../../routing/gateway.js';
import { targetKey } from '../types.js';
import {
  GATEWAY_KIND,
  POLICIES_ANNOTATION,
  TARGET_ANNOTATION,
  entryPolicy,
  gatewayPatchPolicies,
  gatewayPlacement,
  isEnvoyGatewayTarget,
  keyOf,
  listenerSetGateway,
  parentsOf,
  parseEntries,
  patchState,
  placements,
  policyEntry,
  serviceWiringPolicyName,
  targetOwners,
  targetPolicyName,
  targetText,
  type EnvoyPatchPolicyObject,
  type GatewayObject,
  type GatewayTarget,
  type HTTPRouteObject,
  type ListenerSetObject,
  type PatchState,
  type Placement,
} from '../../controllers/ratelimitpolicy/envoy-gateway-attachment.js';

const GATEWAY_API = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;
const EG_API = {
  group: 'gateway.envoyproxy.io',
  version: 'v1alpha1',
  plural: ENVOY_PATCH_POLICY_PLURAL,
} as const;
const SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

/** What reading one target found. */
type Resolution =
  | { readonly kind: 'notFound' }
  | { readonly kind: 'noGateway'; readonly parents: string }
  | { readonly kind: 'noRoutes' }
  | { readonly kind: 'placed'; readonly placements: readonly Placement[] };

/** The verdicts of a policy's Envoy Gateway targets, and the Gateways whose EnvoyPatchPolicies are behind. */
export interface EnvoyGatewayVerdicts {
  /** By target (`group/kind/name`). */
  readonly verdicts: ReadonlyMap<string, TargetVerdict>;
  /** `namespace/name` of each Gateway whose EnvoyPatchPolicies must be applied again. */
  readonly behind: ReadonlySet<string>;
  /** True when a verdict waits on Envoy Gateway or on the apply. */
  readonly pending: boolean;
}

/** `namespace/name` split. */
function split(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** What the watches tell the controller: keys to queue. */
export interface EnvoyGatewayWatchHandlers {
  /** Queues the EnvoyPatchPolicies of a Gateway (`namespace/name`). */
  readonly gateway: (gateway: string) => void;
  /** Queues the policies of `namespace` that target the `kind` (HTTPRoute or Gateway) `name`. */
  readonly targeted: (namespace: string, kind: string, name: string) => void;
}

export class EnvoyGatewayAttacher {
  readonly #custom: CustomObjectsApi;
  readonly #objects: KubernetesObjectApi;
  readonly #service: RateLimitServiceTarget;
  readonly #log: Logger;
  readonly #informers: ResilientInformer<KubernetesObject>[] = [];
  readonly #listenerSets: ResilientInformer<ListenerSetObject & KubernetesObject> | undefined;

  constructor(o: {
    kubeConfig: KubeConfig;
    objects: KubernetesObjectApi;
    service: RateLimitServiceTarget;
    log: Logger;
    /** When given, `start` watches HTTPRoutes, Gateways and ListenerSets and calls these on changes. */
    watch?: EnvoyGatewayWatchHandlers;
    /** Milliseconds between the watches' resyncs (0: none). */
    resyncMs?: number;
  }) {
    this.#custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#objects = o.objects;
    this.#service = o.service;
    this.#log = o.log;
    const watch = o.watch;
    if (watch === undefined) return;
    const path = (plural: string): string => `/apis/${GATEWAY_API.group}/${GATEWAY_API.version}/${plural}`;
    const common = { resyncMs: 0, log: this.#log };
    const listenerSets = new ResilientInformer<ListenerSetObject & KubernetesObject>(o.kubeConfig, {
      ...common,
      path: path('listenersets'),
      keep: trimListenerSet,
      onChange: (ls) => {
        const gateway = listenerSetGateway(ls);
        if (gateway !== undefined) watch.gateway(gateway);
        // The routes attached to it: their policies' verdicts name the ListenerSet's listeners.
        for (const route of routes.list(ls.metadata.namespace) as HTTPRouteObject[])
          if (parentsOf(route, 'ListenerSet').some((p) => keyOf(p) === keyOf(ls.metadata)))
            watch.targeted(route.metadata.namespace, HTTPROUTE_KIND, route.metadata.name);
      },
    });
    const routes = new ResilientInformer<KubernetesObject>(o.kubeConfig, {
      ...common,
      path: path('httproutes'),
      keep: trimRoute,
      onChange: (obj) => {
        const route = obj as unknown as HTTPRouteObject;
        watch.targeted(route.metadata.namespace, HTTPROUTE_KIND, route.metadata.name);
        for (const p of parentsOf(route, 'Gateway')) watch.gateway(keyOf(p));
        for (const p of parentsOf(route, 'ListenerSet')) {
          const ls = listenerSets.get(p.name, p.namespace);
          const gateway = ls === undefined ? undefined : listenerSetGateway(ls);
          if (gateway !== undefined) watch.gateway(gateway);
        }
      },
    });
    const gateways = new ResilientInformer<KubernetesObject>(o.kubeConfig, {
      ...common,
      path: path('gateways'),
      keep: (gw) => {
        // Only its name is read; undefined rather than `delete` (V8 keeps such objects compact).
        Object.assign(gw, { spec: undefined, status: undefined });
      },
      onChange: (gw) => {
        const key = keyOf(gw.metadata as { namespace: string; name: string });
        watch.gateway(key);
        watch.targeted(split(key).namespace, GATEWAY_KIND, split(key).name);
      },
    });
    this.#listenerSets = listenerSets;
    this.#informers.push(routes, gateways, listenerSets as unknown as ResilientInformer<KubernetesObject>);
  }

  /** Starts the watches (when constructed with `watch`); never throws. */
  start(): void {
    for (const i of this.#informers) i.start();
  }

  /** Stops the watches. */
  async stop(): Promise<void> {
    await Promise.all(this.#informers.map((i) => i.stop()));
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
  async #resolveRoute(namespace: string, name: string): Promise<Resolution> {
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
      const { namespace: ns, name: n } = split(key);
      const gw = await this.#get<GatewayObject>(GATEWAY_API, 'gateways', ns, n);
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

  /**
   * The ListenerSets whose parentRef is the Gateway `namespace/name`: from the watch's cache when
   * it has listed, else listed from the API server.
   */
  async #listenerSetsOf(gateway: string): Promise<ListenerSetObject[]> {
    let all: readonly ListenerSetObject[];
    if (this.#listenerSets?.synced === true) all = this.#listenerSets.list();
    else {
      try {
        const list = (await this.#custom.listClusterCustomObject({
          ...GATEWAY_API,
          plural: 'listenersets',
        })) as { items?: ListenerSetObject[] };
        all = list.items ?? [];
      } catch (err: unknown) {
        // The ListenerSet CRD not installed: no ListenerSets.
        if (isNotFound(err)) all = [];
        else throw err;
      }
    }
    return all.filter((ls) => listenerSetGateway(ls) === gateway);
  }

  /** Reads a Gateway of `namespace` and its ListenerSets; the listeners with routes. */
  async #resolveGateway(namespace: string, name: string): Promise<Resolution> {
    const gw = await this.#get<GatewayObject>(GATEWAY_API, 'gateways', namespace, name);
    if (gw === undefined) return { kind: 'notFound' };
    const placement = gatewayPlacement(gw, await this.#listenerSetsOf(`${namespace}/${name}`));
    return placement === undefined ? { kind: 'noRoutes' } : { kind: 'placed', placements: [placement] };
  }

  #resolve(namespace: string, ref: PolicyTargetRef): Promise<Resolution> {
    return ref.kind === GATEWAY_KIND
      ? this.#resolveGateway(namespace, ref.name)
      : this.#resolveRoute(namespace, ref.name);
  }

  /** The placed targets of every policy in `policies` (each policy's targets read once). */
  async #targets(policies: readonly RateLimitPolicy[]): Promise<GatewayTarget[]> {
    const out: GatewayTarget[] = [];
    for (const policy of policies) {
      for (const ref of targetsOf(policy).filter(isEnvoyGatewayTarget)) {
        const target = { kind: ref.kind, namespace: policy.metadata.namespace, name: ref.name };
        const r = await this.#resolve(target.namespace, ref);
        if (r.kind !== 'placed') continue;
        for (const placement of r.placements) out.push({ policy, target, placement });
      }
    }
    return out;
  }

  /** Every EnvoyPatchPolicy Portico keeps (its label), in every namespace. */
  async patchPolicies(): Promise<EnvoyPatchPolicyObject[]> {
    const list = (await this.#custom.listClusterCustomObject({ ...EG_API, labelSelector: SELECTOR })) as {
      items?: EnvoyPatchPolicyObject[];
    };
    return list.items ?? [];
  }

  /** `namespace/name` of the Gateways whose EnvoyPatchPolicies name the policy `policyKey`. */
  async gatewaysCarrying(policyKey: string): Promise<string[]> {
    const gateways = (await this.patchPolicies())
      .filter((e) =>
        parseEntries(e.metadata.annotations?.[POLICIES_ANNOTATION]).some((x) => entryPolicy(x) === policyKey),
      )
      .map((e) => `${e.metadata.namespace}/${gatewayOf(e)}`);
    return [...new Set(gateways)];
  }

  /** Deletes one EnvoyPatchPolicy (gone already: nothing to do). */
  async #delete(namespace: string, name: string): Promise<void> {
    try {
      await this.#custom.deleteNamespacedCustomObject({ ...EG_API, namespace, name });
    } catch (err: unknown) {
      if (!isNotFound(err)) throw err;
    }
    this.#log.info(
      { envoyPatchPolicy: `${namespace}/${name}` },
      'rate-limit EnvoyPatchPolicy deleted: no policy needs it',
    );
  }

  /**
   * Applies the EnvoyPatchPolicies of one Gateway with every policy's targets placed on it (one
   * policy per target: `targetOwners`), and deletes Portico's others targeting the Gateway (all of
   * them when no target is placed there). An EnvoyPatchPolicy whose spec and annotations are as
   * wanted is not written again.
   *
   * @param gateway `namespace/name`
   * @returns `namespace/name` of the policies whose verdict is to be read again: those carried by an
   *   EnvoyPatchPolicy written or deleted, and those that lost a target to an older policy
   * @throws the API error of a failed read, apply or delete (retry with backoff)
   */
  async syncGateway(gateway: string, policies: readonly RateLimitPolicy[]): Promise<Set<string>> {
    const gw = split(gateway);
    const all = (await this.#targets(policies.filter((p) => targetsOf(p).some(isEnvoyGatewayTarget)))).filter(
      (t) => t.placement.gateway === gateway,
    );
    const owners = targetOwners(all);
    const targets = all.filter((t) => owners.get(targetText(t.target)) === t.policy);
    const wanted = gatewayPatchPolicies(gw, targets, this.#service);
    const existing = (await this.patchPolicies()).filter(
      (e) => e.metadata.namespace === gw.namespace && gatewayOf(e) === gw.name,
    );
    const changed = new Set<string>();
    const carried = (e: { metadata?: unknown }): void => {
      const annotations = (e.metadata as { annotations?: Record<string, string> }).annotations;
      for (const x of parseEntries(annotations?.[POLICIES_ANNOTATION])) changed.add(entryPolicy(x));
    };
    const wantedNames = new Set<string>();
    for (const body of wanted) {
      const metadata = body.metadata as { name: string; annotations: Record<string, string> };
      wantedNames.add(metadata.name);
      const current = existing.find((e) => e.metadata.name === metadata.name);
      if (
        current !== undefined &&
        isDeepStrictEqual((current as { spec?: unknown }).spec, body.spec) &&
        isDeepStrictEqual(
          current.metadata.annotations?.[POLICIES_ANNOTATION],
          metadata.annotations[POLICIES_ANNOTATION],
        ) &&
        isDeepStrictEqual(
          current.metadata.annotations?.[TARGET_ANNOTATION],
          metadata.annotations[TARGET_ANNOTATION],
        )
      )
        continue;
      await serverSideApply(this.#objects, body as never, { fieldManager: FIELD_MANAGER, force: true });
      this.#log.info(
        {
          envoyPatchPolicy: `${gw.namespace}/${metadata.name}`,
          policies: metadata.annotations[POLICIES_ANNOTATION],
        },
        'rate-limit EnvoyPatchPolicy applied',
      );
      carried(body);
      if (current !== undefined) carried(current);
    }
    for (const e of existing) {
      if (wantedNames.has(e.metadata.name)) continue;
      await this.#delete(e.metadata.namespace, e.metadata.name);
      carried(e);
    }
    // Policies that lost a target to an older one: their verdict says so.
    for (const t of all)
      if (owners.get(targetText(t.target)) !== t.policy) changed.add(keyOf(t.policy.metadata));
    return changed;
  }

  /**
   * The verdict of each Envoy Gateway target of `policy` (Envoy Gateway's status of the
   * EnvoyPatchPolicies of each Gateway the target is under), and the Gateways whose EnvoyPatchPolicies
   * do not carry this generation of the policy, or carry a policy that no longer has a target there.
   *
   * @param policies every policy (which one wires a target several name)
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
      const r = await this.#resolve(policy.metadata.namespace, ref);
      if (r.kind === 'placed') for (const p of r.placements) placedOn.add(p.gateway);
      verdicts.set(targetKey(ref), await this.#verdict(policy, ref, r, policies, behind));
    }
    // Gateways that still carry this policy although none of its targets is placed there any more.
    for (const gw of await this.gatewaysCarrying(keyOf(policy.metadata)))
      if (!placedOn.has(gw)) behind.add(gw);
    const pending = [...verdicts.values()].some((v) => v.pending === true);
    return { verdicts, behind, pending };
  }

  /** One target's verdict; adds to `behind` the Gateways not carrying this generation. */
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
    if (r.kind === 'noRoutes')
      return {
        ref,
        wired: true,
        reason: 'Attached',
        message: `${what}: no HTTP or HTTPS listener of it or of its ListenerSets has a route attached (Envoy Gateway's status): nothing to limit yet; the limits are wired when a route attaches`,
      };
    const target = { kind: ref.kind, namespace, name: ref.name };
    const placement = r.placements[0] as Placement;
    const owner = targetOwners(
      policies
        .filter(
          (c) =>
            c.metadata.namespace === namespace &&
            targetsOf(c).some((t) => isEnvoyGatewayTarget(t) && t.kind === ref.kind && t.name === ref.name),
        )
        .map((c) => ({ policy: c, target, placement })),
    ).get(targetText(target));
    if (owner !== undefined && keyOf(owner.metadata) !== keyOf(policy.metadata))
      return no(
        'FieldConflict',
        `RateLimitPolicy ${owner.metadata.name}, older, targets it too and is the one wired (one policy per target)`,
      );
    const states = [];
    for (const p of r.placements) states.push(await this.#placementState(policy, target, p.gateway, behind));
    const refused = states.find((s) => s.state === 'refused');
    if (refused !== undefined) return no('RefusedByEnvoyGateway', refused.text);
    const text = `${what}: ${states.map((s) => s.text).join('; ')}`;
    if (states.some((s) => s.state === 'pending'))
      return { ref, wired: false, pending: true, reason: 'AwaitingEnvoyGateway', message: text };
    return { ref, wired: true, reason: 'Attached', message: text };
  }

  /**
   * Envoy Gateway's word on this generation of the policy in the Gateway's EnvoyPatchPolicies that
   * matter to the target: the service wiring's and the target's own.
   */
  async #placementState(
    policy: RateLimitPolicy,
    target: GatewayTarget['target'],
    gateway: string,
    behind: Set<string>,
  ): Promise<{ state: PatchState['state']; text: string }> {
    const gw = split(gateway);
    const names = [serviceWiringPolicyName(gw.name), targetPolicyName(gw.name, policy, target)];
    const read: { name: string; epp: EnvoyPatchPolicyObject | undefined }[] = [];
    for (const name of names)
      read.push({
        name,
        epp: await this.#get<EnvoyPatchPolicyObject>(EG_API, EG_API.plural, gw.namespace, name),
      });
    const missing = read.filter(
      ({ epp }) =>
        !parseEntries(epp?.metadata.annotations?.[POLICIES_ANNOTATION]).includes(policyEntry(policy)),
    );
    if (missing.length > 0) {
      behind.add(gateway);
      return {
        state: 'pending',
        text: `EnvoyPatchPolicy ${missing.map((m) => `${gw.namespace}/${m.name}`).join(', ')} of Gateway ${gateway} being applied`,
      };
    }
    const states = read.map(({ name, epp }) => ({
      name: `${gw.namespace}/${name}`,
      generation: epp?.metadata.generation ?? 0,
      state: patchState(epp as EnvoyPatchPolicyObject, gw.name),
    }));
    for (const s of states)
      if (s.state.state === 'refused')
        return {
          state: 'refused',
          text: `EnvoyPatchPolicy ${s.name}: Envoy Gateway refuses it: ${s.state.reason}: ${s.state.message}`,
        };
    const waiting = states.find((s) => s.state.state === 'pending');
    if (waiting !== undefined)
      return {
        state: 'pending',
        text: `EnvoyPatchPolicy ${waiting.name} applied; Envoy Gateway has not yet reported on generation ${waiting.generation}`,
      };
    return {
      state: 'programmed',
      text: `EnvoyPatchPolicies ${states.map((s) => s.name).join(' and ')} programmed by Envoy Gateway on Gateway ${gateway}`,
    };
  }
}

/**
 * What the watch's cache keeps of an HTTPRoute: its `parentRefs` (every HTTPRoute of the cluster is
 * cached, so the rest, rules and status, is dropped).
 */
export function trimRoute(obj: KubernetesObject): void {
  const route = obj as { spec?: { parentRefs?: unknown }; status?: unknown };
  route.spec = { parentRefs: route.spec?.parentRefs };
  route.status = undefined;
}

/**
 * What the watch's cache keeps of a ListenerSet: its `parentRef`, its listeners' names, ports and
 * protocols, and their status' `attachedRoutes` (what `gatewayPlacement` reads).
 */
export function trimListenerSet(obj: ListenerSetObject & KubernetesObject): void {
  const ls = obj as {
    spec?: ListenerSetObject['spec'];
    status?: ListenerSetObject['status'];
  };
  ls.spec = {
    ...(ls.spec?.parentRef === undefined ? {} : { parentRef: ls.spec.parentRef }),
    listeners: (ls.spec?.listeners ?? []).map((l) => ({ name: l.name, port: l.port, protocol: l.protocol })),
  };
  ls.status = {
    listeners: (ls.status?.listeners ?? []).map((l) => ({
      name: l.name,
      ...(l.attachedRoutes === undefined ? {} : { attachedRoutes: l.attachedRoutes }),
    })),
  };
}

/** The Gateway an EnvoyPatchPolicy targets (its `spec.targetRef.name`). */
function gatewayOf(epp: EnvoyPatchPolicyObject): string {
  return (epp as { spec?: { targetRef?: { name?: string } } }).spec?.targetRef?.name ?? '';
}

/** The verdict of an Envoy Gateway target while `--envoy-gateway-attachment` is off. */
export function envoyGatewayDisabledVerdict(ref: PolicyTargetRef): TargetVerdict {
  return {
    ref,
    wired: false,
    reason: 'EnvoyGatewayAttachmentDisabled',
    message: `${describeTarget(ref)}: the operator runs with --envoy-gateway-attachment=false and writes no EnvoyPatchPolicy`,
  };
}
