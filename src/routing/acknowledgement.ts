/**
 * Whether the data plane has taken a domain's routing objects, read from the status fields the
 * ingress controller or gateway writes. Pure: each function judges one object as the operator's
 * cache holds it.
 *
 * - Ingress (networking.k8s.io/v1): its controller publishes the address it serves the Ingress on in
 *   `status.loadBalancer.ingress` (ingress-nginx and Traefik do, with `--publish-service` /
 *   `publishedService`). Ingress has no conditions and no observed generation: an address is the
 *   only sign.
 * - HTTPRoute (Gateway API, apis/v1/httproute_types.go `RouteParentStatus`): each parent's
 *   controller writes one entry in `status.parents` for the parentRef it handles, with conditions
 *   `Accepted` and `ResolvedRefs`; both must be True at the route's current generation
 *   (`observedGeneration`), for every parentRef of the route.
 * - ListenerSet (apis/v1/listenerset_types.go): conditions `Accepted` and `Programmed` True at the
 *   current generation; its listener's entry in `status.listeners` must not say otherwise
 *   (`Accepted`, `ResolvedRefs` or `Programmed` False, or `Conflicted` True: e.g. an unresolvable
 *   certificate Secret). The CRD defaults both conditions to Unknown, reason `Pending`, "Waiting for
 *   controller": that is what a Gateway without ListenerSet support leaves.
 */
import type { KubernetesObject, V1Ingress } from '@kubernetes/client-node';
import { GATEWAY_API_GROUP, HTTPS_LISTENER_NAME, type RouteParentRef } from './gateway.js';

/**
 * What the data plane says about one object, or a set of them: `confirmed` (a sentence saying so),
 * `refused` with the data plane's own reason and message, or `awaiting` (nothing current reported
 * yet; the sentence says what is missing).
 */
export type Acknowledgement =
  | { kind: 'confirmed'; message: string }
  | { kind: 'refused'; reason: string; message: string }
  | { kind: 'awaiting'; message: string };

/** A metav1.Condition as the data plane writes it. */
export interface StatusCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

/** One entry of an HTTPRoute's `status.parents` (`RouteParentStatus`). */
export interface RouteParentStatus {
  parentRef: RouteParentRef;
  controllerName?: string;
  conditions?: StatusCondition[];
}

type WithStatus<S> = KubernetesObject & { status?: S };
export type HTTPRouteWithStatus = WithStatus<{ parents?: RouteParentStatus[] }>;
export type ListenerSetWithStatus = WithStatus<{
  conditions?: StatusCondition[];
  listeners?: { name: string; conditions?: StatusCondition[] }[];
}>;

/** A sub-condition of a Contour DetailedCondition (`errors[]`, `warnings[]`). */
export interface SubCondition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
}

/** Contour's `Valid` condition of an HTTPProxy (a DetailedCondition). */
export interface DetailedCondition extends StatusCondition {
  errors?: SubCondition[];
  warnings?: SubCondition[];
}

export type HTTPProxyWithStatus = WithStatus<{
  currentStatus?: string;
  description?: string;
  conditions?: DetailedCondition[];
}>;

/**
 * The Ingress `name` as cached: `confirmed` once `status.loadBalancer.ingress` holds an address (IP
 * or hostname), else `awaiting`. `ingressClassName` names the class in the message (undefined: the
 * cluster's default class); `dataPlaneName` (e.g. `Contour`, the `--data-plane-name` setting) names
 * the controller, else "the ingress controller". An awaited Ingress's message says since when it
 * exists (its `metadata.creationTimestamp`, ISO 8601 UTC), so a stalled controller shows how long it
 * has been silent.
 */
export function ingressAcknowledgement(
  ingress: V1Ingress | undefined,
  name: string,
  ingressClassName: string | undefined,
  dataPlaneName?: string,
): Acknowledgement {
  const addresses = (ingress?.status?.loadBalancer?.ingress ?? [])
    .map((entry) => entry.ip ?? entry.hostname)
    .filter((a): a is string => a !== undefined && a !== '');
  if (addresses.length > 0)
    return {
      kind: 'confirmed',
      message: `${dataPlaneName ?? 'The ingress controller'} took Ingress ${name} (published address ${addresses.join(', ')}).`,
    };
  const controller =
    ingressClassName === undefined
      ? "the cluster's default ingress class"
      : `ingress class ${ingressClassName}`;
  const who =
    dataPlaneName === undefined
      ? `the controller of ${controller}`
      : `${dataPlaneName} (the controller of ${controller})`;
  const created = ingress?.metadata?.creationTimestamp as Date | string | undefined;
  const since = created === undefined ? '' : ` since ${new Date(created).toISOString()}`;
  return {
    kind: 'awaiting',
    message: `Ingress ${name} is written${since}, but no address is published in its status.loadBalancer.ingress: ${who} has not taken it. Check that ${dataPlaneName ?? 'the controller'} runs, serves that class and publishes its address (ingress-nginx: --publish-service; Contour: --ingress-status-address or its Envoy Service).`,
  };
}

function conditionOf(conditions: StatusCondition[] | undefined, type: string): StatusCondition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** `parent` as a person reads it: `Gateway infra/public`, `ListenerSet portico-www`, with its section. */
export function describeParent(parent: RouteParentRef, routeNamespace: string): string {
  const kind = parent.kind ?? 'Gateway';
  const at = `${parent.namespace ?? routeNamespace}/${parent.name}`;
  const section = parent.sectionName === undefined ? '' : ` listener ${parent.sectionName}`;
  return `${kind} ${at}${section}`;
}

/** Whether two parentRefs name the same parent (defaults applied: group, kind, the route's namespace). */
export function sameParent(a: RouteParentRef, b: RouteParentRef, routeNamespace: string): boolean {
  return (
    (a.group ?? GATEWAY_API_GROUP) === (b.group ?? GATEWAY_API_GROUP) &&
    (a.kind ?? 'Gateway') === (b.kind ?? 'Gateway') &&
    (a.namespace ?? routeNamespace) === (b.namespace ?? routeNamespace) &&
    a.name === b.name &&
    a.sectionName === b.sectionName &&
    a.port === b.port
  );
}

/** `Type=Status (Reason): message`, as the data plane wrote it. */
function said(c: StatusCondition): string {
  return `${c.type}=${c.status} (${c.reason || 'no reason'}): ${c.message || 'no message'}`;
}

/** A refusal in the data plane's own words: its reason (or `Not<Type>` when it gave none). */
function refusal(c: StatusCondition, what: string): Acknowledgement {
  return { kind: 'refused', reason: c.reason || `Not${c.type}`, message: `${what}: ${said(c)}` };
}

/** Whether `c` was written for `generation` (any, when the object has none). */
function current(c: StatusCondition, generation: number | undefined): boolean {
  return generation === undefined || c.observedGeneration === generation;
}

/** Why `c` (of type `type`, maybe absent) does not yet confirm, or undefined when it does. */
function pending(
  c: StatusCondition | undefined,
  type: string,
  generation: number | undefined,
  what: string,
): Acknowledgement | undefined {
  if (c === undefined) return { kind: 'awaiting', message: `${what}: no ${type} condition reported yet.` };
  // Not True, and of no generation (the CRD's default, `Pending`) or of this one: the words it has.
  if (c.status !== 'True' && (c.observedGeneration === undefined || current(c, generation)))
    return { kind: 'awaiting', message: `${what}: ${said(c)}` };
  if (!current(c, generation))
    return {
      kind: 'awaiting',
      message: `${what}: ${type} was reported for generation ${c.observedGeneration ?? 'unknown'}, not for the current generation ${generation ?? 'unknown'}.`,
    };
  return undefined;
}

/**
 * What `conditions` (all of `types` True at `generation`) say: undefined when they all do; else
 * `refused` by the first that is False at `generation`, else `awaiting` (missing, of an earlier
 * generation, or Unknown).
 */
function judge(
  conditions: StatusCondition[] | undefined,
  types: readonly string[],
  generation: number | undefined,
  what: string,
): Acknowledgement | undefined {
  const found = types.map((type) => conditionOf(conditions, type));
  const refused = found.find((c) => c !== undefined && current(c, generation) && c.status === 'False');
  if (refused) return refusal(refused, what);
  for (const [i, type] of types.entries()) {
    const open = pending(found[i], type, generation, what);
    if (open) return open;
  }
  return undefined;
}

/**
 * The HTTPRoute as cached: `confirmed` when, for every parentRef in `parentRefs` (those Portico
 * wrote), some entry of `status.parents` has `Accepted` and `ResolvedRefs` True at the route's
 * `metadata.generation`; `refused` (the gateway's reason and message) when an entry of the current
 * generation says False; else `awaiting`. Every parent that is not confirmed is named in the message;
 * the reason is the first refusal's. `dataPlaneName` (e.g. `Envoy Gateway`, the `--data-plane-name`
 * setting) names the implementation in the confirmation, with the `controllerName` it wrote.
 */
export function httpRouteAcknowledgement(
  route: HTTPRouteWithStatus | undefined,
  name: string,
  namespace: string,
  parentRefs: readonly RouteParentRef[],
  dataPlaneName?: string,
): Acknowledgement {
  if (route === undefined)
    return { kind: 'awaiting', message: `HTTPRoute ${name} is not in the operator's cache yet.` };
  const generation = route.metadata?.generation;
  const entries = route.status?.parents ?? [];
  const outcomes = parentRefs.map((ref) => {
    const what = `${describeParent(ref, namespace)} on HTTPRoute ${name}`;
    const mine = entries.filter((e) => sameParent(e.parentRef, ref, namespace));
    if (mine.length === 0)
      return {
        kind: 'awaiting',
        message: `${what}: no entry in status.parents; the gateway has not reported on it.`,
      } as const;
    const judged = mine.map((e) =>
      judge(
        e.conditions,
        ['Accepted', 'ResolvedRefs'],
        generation,
        e.controllerName ? `${what} (${e.controllerName})` : what,
      ),
    );
    if (judged.some((j) => j === undefined)) return undefined;
    return judged.find((j) => j?.kind === 'refused') ?? judged[0];
  });
  const open = outcomes.filter((o): o is Exclude<Acknowledgement, { kind: 'confirmed' }> => o !== undefined);
  if (open.length === 0) {
    const parents = parentRefs.map((ref) => describeParent(ref, namespace)).join(', ');
    if (dataPlaneName === undefined)
      return { kind: 'confirmed', message: `${parents} accepted HTTPRoute ${name}.` };
    const controllers = [...new Set(entries.map((e) => e.controllerName).filter(Boolean))].join(', ');
    const by = controllers === '' ? dataPlaneName : `${dataPlaneName} (${controllers})`;
    return { kind: 'confirmed', message: `${by} accepted HTTPRoute ${name} on ${parents}.` };
  }
  return combine(open);
}

/**
 * The ListenerSet as cached: `confirmed` when `Accepted` and `Programmed` are True at its
 * generation and its HTTPS listener's entry reports no refusal; `refused` with the gateway's reason
 * and message; else `awaiting`. `dataPlaneName` names the implementation in the confirmation
 * (default "The gateway").
 */
export function listenerSetAcknowledgement(
  set: ListenerSetWithStatus | undefined,
  name: string,
  dataPlaneName?: string,
): Acknowledgement {
  if (set === undefined)
    return { kind: 'awaiting', message: `ListenerSet ${name} is not in the operator's cache yet.` };
  const generation = set.metadata?.generation;
  const listener = set.status?.listeners?.find((l) => l.name === HTTPS_LISTENER_NAME);
  const refused = listenerRefusal(listener?.conditions, generation);
  if (refused) return refusal(refused, `ListenerSet ${name} listener ${HTTPS_LISTENER_NAME}`);
  const judged = judge(set.status?.conditions, ['Accepted', 'Programmed'], generation, `ListenerSet ${name}`);
  return (
    judged ?? {
      kind: 'confirmed',
      message: `${dataPlaneName ?? 'The gateway'} programmed ListenerSet ${name}.`,
    }
  );
}

/**
 * The condition of a listener's entry that refuses it: `Conflicted` True, or `Accepted`,
 * `ResolvedRefs` or `Programmed` False at `generation` (a listener's conditions carry its
 * ListenerSet's generation).
 */
function listenerRefusal(
  conditions: StatusCondition[] | undefined,
  generation: number | undefined,
): StatusCondition | undefined {
  const conflicted = conditionOf(conditions, 'Conflicted');
  if (conflicted?.status === 'True') return conflicted;
  return ['Accepted', 'ResolvedRefs', 'Programmed']
    .map((type) => conditionOf(conditions, type))
    .find((c) => c !== undefined && c.status === 'False' && current(c, generation));
}

/** `Type (Reason): message` of each sub-condition, joined with "; ". */
function subConditions(subs: readonly SubCondition[]): string {
  return subs.map((c) => `${c.type} (${c.reason || 'no reason'}): ${c.message || 'no message'}`).join('; ');
}

/**
 * The HTTPProxy `name` as cached (undefined: not in the cache yet). `confirmed` when Contour's
 * `Valid` condition is True at the HTTPProxy's `metadata.generation` (`currentStatus` `valid`), its
 * warnings named in the message; `refused` when it is False at that generation (`invalid` or
 * `orphaned`), with the first error's reason (Contour's own, e.g. `DuplicateVhost`, `SecretNotValid`;
 * `Orphaned` for an orphaned one) and every error's words; `awaiting` while Contour has not reported
 * on this generation (no `Valid` condition, another `observedGeneration`, or status Unknown).
 */
export function httpProxyAcknowledgement(
  proxy: HTTPProxyWithStatus | undefined,
  name: string,
): Acknowledgement {
  const what = `HTTPProxy ${name}`;
  if (proxy === undefined)
    return { kind: 'awaiting', message: `${what} is not in the operator's cache yet.` };
  const generation = proxy.metadata?.generation;
  const valid = conditionOf(proxy.status?.conditions, 'Valid') as DetailedCondition | undefined;
  const status = proxy.status?.currentStatus;
  if (valid === undefined)
    return {
      kind: 'awaiting',
      message: `${what}: Contour has not reported on it yet (no Valid condition${status ? `; currentStatus ${status}` : ''}). Check that Contour runs and serves its ingress class.`,
    };
  if (!current(valid, generation))
    return {
      kind: 'awaiting',
      message: `${what}: Contour reported on generation ${valid.observedGeneration ?? 'unknown'}, not yet on the current generation ${generation ?? 'unknown'}.`,
    };
  return judgeProxy(valid, status, what);
}

/** `httpProxyAcknowledgement` once `valid` is of the current generation. */
function judgeProxy(valid: DetailedCondition, status: string | undefined, what: string): Acknowledgement {
  if (valid.status === 'True') {
    const warnings = valid.warnings ?? [];
    const warned = warnings.length > 0 ? ` Warnings: ${subConditions(warnings)}.` : '';
    return {
      kind: 'confirmed',
      message: `Contour took ${what} (currentStatus ${status ?? 'valid'}).${warned}`,
    };
  }
  if (valid.status !== 'False') return { kind: 'awaiting', message: `${what}: ${said(valid)}` };
  const errors = valid.errors ?? [];
  const reason = errors[0]?.reason || valid.reason || 'Invalid';
  const words = errors.length > 0 ? subConditions(errors) : said(valid);
  return { kind: 'refused', reason, message: `Contour marks ${what} ${status ?? 'invalid'}: ${words}.` };
}

/**
 * Several acknowledgements as one: the first refusal's reason, every message that is not a
 * confirmation; `confirmed` only when all are.
 */
export function combine(parts: readonly Acknowledgement[]): Acknowledgement {
  const open = parts.filter((p) => p.kind !== 'confirmed');
  const messages = (open.length > 0 ? open : parts).map((p) => p.message).join(' ');
  const refused = open.find((p) => p.kind === 'refused');
  if (refused) return { kind: 'refused', reason: refused.reason, message: messages };
  if (open.length > 0) return { kind: 'awaiting', message: messages };
  return { kind: 'confirmed', message: messages };
}
