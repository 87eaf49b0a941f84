/**
 * Routes Portico does not own that name a hostname (docs/routing.md, "Foreign routes"): an Ingress
 * made by hand, a Contour HTTPProxy or a Gateway API HTTPRoute of someone else. Contour merges
 * every Ingress of one host into one virtual host (a foreign rule for `/` can take the traffic),
 * and two HTTPProxies with one fqdn are both marked invalid (DuplicateVhost), so each such object
 * is reported on the CustomDomain that claims the hostname.
 *
 * A route is Portico's own for a hostname only when its controller ownerReference names, by uid and
 * in the route's own namespace (ownerReferences are namespace-local), the CustomDomain that holds
 * the hostname's claim (or the CustomDomain being looked at): never by a label, which anyone who
 * writes the route can set. A tenant can point an ownerReference at its own CustomDomain, but that
 * CustomDomain does not hold the claim of another project's hostname, so its route is still
 * reported there.
 *
 * Pure: `hostnamesOf` reads the hostnames an object names, `controllerOwnerUid` its owner,
 * `ForeignRouteIndex` keeps hostname → objects with their owners (client-go's `Indexers` /
 * `ByIndex`), and the message helpers write and read the `Conflicted` condition's list. No I/O.
 */
import type { KubernetesObject, V1OwnerReference } from '@kubernetes/client-node';
import { CUSTOM_DOMAIN_KIND, GROUP } from '../api/customdomain.js';
import { PROJECT_KIND } from '../api/project.js';
import { normalizeDnsName } from '../domain/hostname.js';
import {
  CLASSES_SERVING_CLASSLESS,
  FOREIGN_ROUTE_KINDS,
  INGRESS_CLASS_ANNOTATIONS,
  ROUTE_KINDS,
} from '../data-planes/registry.js';
import { record } from '../data-planes/shared.js';
import type { ForeignRouteReader } from '../data-planes/types.js';

export { CONTOUR_DEFAULT_CLASS } from '../data-planes/contour/index.js';
/**
 * The kinds read here (their `kind` field): every route kind with a `foreignRoute` reader, the
 * shared ones (Ingress, HTTPRoute) and the data planes' own (Contour's HTTPProxy); see
 * src/data-planes/registry.ts.
 */
export { FOREIGN_ROUTE_KINDS };
/** A kind of `FOREIGN_ROUTE_KINDS`. */
export type ForeignRouteKind = string;

/** At most this many objects are named in a condition message; the rest are counted. */
export const MAX_NAMED_ROUTES = 10;

/** The foreign-route reader of `kind`; undefined for a kind that is no route. */
function readerOf(kind: ForeignRouteKind): ForeignRouteReader | undefined {
  return ROUTE_KINDS.get(kind)?.foreignRoute;
}

/**
 * Whether objects of `kind` name an ingress class (their route kind's `foreignRoute.classed`:
 * Ingress and Contour's HTTPProxy; not an HTTPRoute, nor a kind that is no route).
 */
export function isClassedRouteKind(kind: string): boolean {
  return readerOf(kind)?.classed === true;
}

/**
 * The exact hostnames (normalized: lowercase, no trailing dot) `obj` of kind `kind` names:
 * an Ingress's `spec.rules[].host` and `spec.tls[].hosts[]`, an HTTPProxy's
 * `spec.virtualhost.fqdn`, an HTTPRoute's `spec.hostnames[]` (each kind's `foreignRoute.hostnames`,
 * src/data-planes/); none for a kind that is no route. Wildcards (`*.example.com`) are left
 * out: every data plane here prefers an exact host over a wildcard, so a wildcard takes no traffic
 * from a claimed hostname. Any malformed field is skipped, never thrown on (the objects are
 * anyone's).
 */
export function hostnamesOf(kind: ForeignRouteKind, obj: KubernetesObject): Set<string> {
  const names = readerOf(kind)?.hostnames(record((obj as { spec?: unknown }).spec)) ?? [];
  const out = new Set<string>();
  for (const name of names) {
    const host = normalizeDnsName(name.trim());
    if (host !== '' && !host.includes('*')) out.add(host);
  }
  return out;
}

/**
 * The ingress class `obj` asks for, as Contour v1.33.8 reads it (internal/annotation
 * `IngressClass`, internal/ingressclass): the annotation `projectcontour.io/ingress.class`, else
 * `kubernetes.io/ingress.class`, else `spec.ingressClassName`; '' when none is set. An HTTPRoute
 * has no class (it attaches to a Gateway through `parentRefs`): always ''. The annotations are the
 * data planes' own (`ingressClass.annotation`, src/data-planes/), then `kubernetes.io/ingress.class`.
 */
export function routeClassOf(kind: ForeignRouteKind, obj: KubernetesObject): string {
  if (readerOf(kind)?.classed !== true) return '';
  const annotations = obj.metadata?.annotations ?? {};
  for (const key of INGRESS_CLASS_ANNOTATIONS) {
    const value = annotations[key];
    if (typeof value === 'string' && value !== '') return value;
  }
  const spec = record((obj as { spec?: unknown }).spec);
  return typeof spec.ingressClassName === 'string' ? spec.ingressClassName : '';
}

/**
 * Whether the data plane that serves Portico's routes also serves the foreign `obj`, so that it can
 * take traffic from a claimed hostname. `portico` is the operator's `--ingress-class`:
 * - not set: every object counts (Portico cannot tell which controller serves what);
 * - set: an Ingress or HTTPProxy counts only when its class (`routeClassOf`) is that class, or when
 *   it names no class and that class is `contour`, which a Contour run without
 *   `--ingress-class-name` serves together with classless objects (a data plane's
 *   `ingressClass.defaultClassServesClassless`). A controller given a class of
 *   its own ignores objects of any other class and, Contour and ingress-nginx by default, those
 *   with none (docs/routing.md, "A routing class of Portico's own"). An HTTPRoute always counts.
 */
export function servedWithPortico(
  kind: ForeignRouteKind,
  obj: KubernetesObject,
  portico: string | undefined,
): boolean {
  if (portico === undefined || portico === '' || readerOf(kind)?.classed !== true) return true;
  const own = routeClassOf(kind, obj);
  return own === portico || (own === '' && CLASSES_SERVING_CLASSLESS.has(portico));
}

/** The kinds whose controller ownerReference makes a route Portico's: a CustomDomain's, a Project's subdomain. */
const OWNER_KINDS: ReadonlySet<string> = new Set([CUSTOM_DOMAIN_KIND, PROJECT_KIND]);

/**
 * The uid of `obj`'s controller ownerReference when it names a CustomDomain or a Project (the
 * routes of its auto-generated subdomain; group `portico.dev`, any version); undefined otherwise
 * (none, another kind, or not the controller reference). Never throws on a malformed list.
 */
export function controllerOwnerUid(obj: KubernetesObject): string | undefined {
  const refs: unknown = obj.metadata?.ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  for (const ref of refs as Partial<V1OwnerReference>[]) {
    if (typeof ref !== 'object' || ref === null || ref.controller !== true) continue;
    const group = typeof ref.apiVersion === 'string' ? ref.apiVersion.split('/')[0] : undefined;
    if (group === GROUP && OWNER_KINDS.has(ref.kind ?? '') && typeof ref.uid === 'string' && ref.uid !== '')
      return ref.uid;
  }
  return undefined;
}

/**
 * How an owner is keyed in `ForeignRouteIndex`: `namespace/uid` (an ownerReference is namespace-local:
 * it names an owner in the object's own namespace).
 */
export function ownerKey(namespace: string, uid: string): string {
  return `${namespace}/${uid}`;
}

/** `Kind namespace/name`: how a foreign object is named in messages and Events. */
export function routeId(kind: string, obj: KubernetesObject): string {
  return `${kind} ${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/** The namespace of a `routeId`. */
export function routeNamespace(id: string): string {
  const ref = id.slice(id.indexOf(' ') + 1);
  return ref.slice(0, ref.indexOf('/'));
}

/**
 * Hostname → the route objects (`routeId`) that name it, each with its controller owner (`ownerKey`
 * of a CustomDomain, when it has one), kept in step with the route watches' add, update and delete
 * events. Every route is indexed, Portico's own included: which are foreign is decided when a
 * domain asks (`routesOf`), by owner, never by a label.
 */
export class ForeignRouteIndex {
  /** The hostnames each object was last indexed with, by `routeId`. */
  readonly #byRoute = new Map<string, Set<string>>();
  readonly #byHostname = new Map<string, Set<string>>();
  /** The owner (`ownerKey`) of each object that has a CustomDomain controller reference, by `routeId`. */
  readonly #owner = new Map<string, string>();

  /**
   * Records that `id` names `hostnames` now, owned by `owner` (`ownerKey`, or undefined); an add or
   * an update; an empty set forgets it.
   * @returns the hostnames whose list changed (those it names now or named before, not both; all of
   *   them when its owner changed)
   */
  set(id: string, hostnames: ReadonlySet<string>, owner?: string): string[] {
    const before = this.#byRoute.get(id) ?? new Set<string>();
    const ownerBefore = this.#owner.get(id);
    const ownerNow = hostnames.size === 0 ? undefined : owner;
    if (ownerNow === undefined) this.#owner.delete(id);
    else this.#owner.set(id, ownerNow);
    // A new owner changes what the hostnames it keeps see as foreign.
    const changed = ownerBefore === ownerNow ? [] : [...hostnames].filter((h) => before.has(h));
    for (const host of before)
      if (!hostnames.has(host)) {
        changed.push(host);
        const ids = this.#byHostname.get(host);
        ids?.delete(id);
        if (ids?.size === 0) this.#byHostname.delete(host);
      }
    for (const host of hostnames)
      if (!before.has(host)) {
        changed.push(host);
        const ids = this.#byHostname.get(host);
        if (ids) ids.add(id);
        else this.#byHostname.set(host, new Set([id]));
      }
    if (hostnames.size === 0) this.#byRoute.delete(id);
    else this.#byRoute.set(id, new Set(hostnames));
    return changed;
  }

  /** Forgets `id` (a delete). @returns the hostnames it named */
  delete(id: string): string[] {
    return this.set(id, new Set());
  }

  /**
   * The objects naming `hostname` (normalized here) but those whose owner is in `owners`
   * (`ownerKey`s: the CustomDomain that holds the hostname's claim), sorted.
   */
  routesOf(hostname: string, owners: ReadonlySet<string> = new Set()): string[] {
    const ids = this.#byHostname.get(normalizeDnsName(hostname)) ?? [];
    return [...ids].filter((id) => !owners.has(this.#owner.get(id) ?? '')).sort();
  }

  /**
   * Every indexed hostname under `domain` (normalized here; `domain` itself excluded) with the
   * objects naming it but those whose owner is in `owners`, hostnames sorted; those left with no
   * object are left out. For the names under the apps domain (docs/routing.md, "Foreign routes").
   */
  routesUnder(
    domain: string,
    owners: ReadonlySet<string> = new Set(),
  ): { hostname: string; routes: string[] }[] {
    const suffix = `.${normalizeDnsName(domain)}`;
    return [...this.#byHostname.keys()]
      .filter((h) => h.endsWith(suffix))
      .sort()
      .map((hostname) => ({ hostname, routes: this.routesOf(hostname, owners) }))
      .filter((e) => e.routes.length > 0);
  }

  /** Number of hostnames named by at least one indexed route (Portico's own included). */
  get size(): number {
    return this.#byHostname.size;
  }
}

const LIST_START = 'named by routes Portico does not own: ';

/**
 * The `Conflicted=True` message: which objects name `hostname` (at most `MAX_NAMED_ROUTES`, then a
 * count), and what it means. `routes` is non-empty, each a `routeId`.
 */
export function conflictMessage(hostname: string, routes: readonly string[]): string {
  const named = routes.slice(0, MAX_NAMED_ROUTES);
  const more = routes.length - named.length;
  const list = `${named.join('; ')}${more > 0 ? `; and ${more} more` : ''}`;
  return `${hostname} is ${LIST_START}${list}. The ingress controller may send part or all of its traffic there (Contour merges Ingresses of one host and marks duplicate HTTPProxy fqdns invalid); delete them or remove the hostname from them.`;
}

/** The objects a `conflictMessage` names (empty for any other message). */
export function namedRoutes(message: string | undefined): Set<string> {
  if (message === undefined) return new Set();
  const start = message.indexOf(LIST_START);
  if (start < 0) return new Set();
  const end = message.indexOf('. The ingress controller', start);
  const list = message.slice(start + LIST_START.length, end < 0 ? undefined : end);
  return new Set(list.split('; ').filter((s) => s !== '' && !/^and \d+ more$/.test(s)));
}

/** The objects of `now` not named in the previous condition message: each gets one Event. */
export function newRoutes(previousMessage: string | undefined, now: readonly string[]): string[] {
  const before = namedRoutes(previousMessage);
  return now.slice(0, MAX_NAMED_ROUTES).filter((id) => !before.has(id));
}

/**
 * Trims a route object to what the index reads, for the informer's `keep` (every route of the
 * cluster is cached, Portico's own 10,000 Ingresses included): metadata name, namespace,
 * resourceVersion and the CustomDomain controller ownerReference (its uid only), and a spec in the
 * kind's own shape holding only its exact hostnames (`hostnamesOf` reads it the same way), none
 * when the object is not served with Portico's routes (`servedWithPortico` with `ingressClassName`,
 * the operator's class). Idempotent; mutates `obj`; never throws.
 */
export function slimForeignRoute(
  kind: ForeignRouteKind,
  obj: KubernetesObject,
  ingressClassName?: string,
): void {
  const hosts = servedWithPortico(kind, obj, ingressClassName) ? [...hostnamesOf(kind, obj)] : [];
  // The class is kept (as spec.ingressClassName) so that trimming again gives the same object.
  const routeClass = routeClassOf(kind, obj);
  const classField = routeClass === '' ? {} : { ingressClassName: routeClass };
  const uid = controllerOwnerUid(obj);
  const { name = '', namespace = '', resourceVersion = '' } = obj.metadata ?? {};
  obj.metadata = { name, namespace, resourceVersion };
  if (uid !== undefined)
    obj.metadata.ownerReferences = [
      { apiVersion: `${GROUP}/`, kind: CUSTOM_DOMAIN_KIND, name: '', uid, controller: true },
    ];
  const spec = readerOf(kind)?.slimSpec(hosts, classField);
  Reflect.set(obj, 'spec', spec);
  Reflect.set(obj, 'status', undefined);
}
