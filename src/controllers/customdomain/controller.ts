/**
 * Wires the CustomDomain reconcile to the cluster: watches CustomDomains, the objects Portico owns
 * (Ingresses, Secrets and Services label-selected, so no other Secret is cached; Traefik Middlewares,
 * HTTPRoutes, ListenerSets and Contour HTTPProxies where the API server serves them; status included, so the data plane's
 * acknowledgement is seen at once), HostnameClaims, Namespaces (the plan label),
 * EndpointSlices (the first ready endpoint), every Service, trimmed to its ports (the port a
 * domain names must exist), and the Ingresses, HTTPProxies and HTTPRoutes Portico does not own
 * (every one, trimmed to its hostnames and CustomDomain owner: foreign routes, docs/routing.md,
 * routing/foreign-routes.ts), feeds a de-duplicating work queue, and runs N workers.
 * The reconcile reads all of these from the caches (`view()`), so a pass that changes nothing sends
 * no request. Events find the domains they affect through an index, never a scan of every domain.
 * A failure on one key is retried with backoff and never blocks another.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig, KubernetesObject, V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  CUSTOM_DOMAIN_LABEL,
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  VERSION,
  objectKey,
  splitKey,
  VERIFY_REQUESTED_AT_ANNOTATION,
  type CustomDomain,
} from '../../api/customdomain.js';
import { HOSTNAME_CLAIM_PLURAL, type HostnameClaim } from '../../api/hostnameclaim.js';
import { backoffDelayMs } from '../../kube/backoff.js';
import { apiStatusCode, isNotFound } from '../../kube/errors.js';
import { normalizeDnsName } from '../../domain/hostname.js';
import { collectionLister, collectionPath, ResilientInformer } from '../../kube/informer.js';
import { slimTlsSecret } from '../../certificates/parsed-secret.js';
import { WorkQueue } from '../../kube/work-queue.js';
import { runWorkers } from '../../kube/workers.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import type { ObjectHeader } from '../../routing/plan.js';
import { ROUTE_KINDS } from '../../data-planes/registry.js';
import type { RouteKind } from '../../data-planes/types.js';
import {
  controllerOwnerUid,
  ForeignRouteIndex,
  ownerKey,
  hostnamesOf,
  routeId,
  slimForeignRoute,
  type ForeignRouteKind,
} from '../../routing/foreign-routes.js';
import type { ClusterView, OwnedLookup } from './cluster-view.js';
import { isAccepted, servesHostname } from './claim-precedence.js';
import { acceptedBeforeIn } from './phases/acceptance.js';
import type { RoutingClassSettings } from '../../routing/routing-class.js';
import { CustomDomainIndex } from './domain-index.js';
import type { ClaimsCache } from './hostname-claims.js';
import type { CustomDomainReconciler } from './reconciler.js';

const CONTROLLER = 'customdomain';
const OWNED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${CUSTOM_DOMAIN_LABEL}`;
/** Services Portico applies are shared by a namespace's domains (the HTTP-01 Service): no owner label. */
const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;
/** The wait between failed probes of the optional kinds, milliseconds. */
const PROBE_BACKOFF = { baseMs: 1_000, maxMs: 30_000 };
/**
 * Owned kinds from CRDs the cluster may not have (the route kinds of src/data-planes/ with `crd`:
 * Gateway API's HTTPRoute and ListenerSet, Contour's HTTPProxy, Traefik's Middleware); each is
 * watched only where the API serves it.
 */
const OPTIONAL_OWNED_KINDS: readonly RouteKind[] = [...ROUTE_KINDS.values()].filter((k) => k.crd);
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** The optional kinds that are also watched for foreign routes, once known to be served. */
const FOREIGN_OPTIONAL_KINDS: ReadonlySet<string> = new Set(
  OPTIONAL_OWNED_KINDS.filter((k) => k.foreignRoute !== undefined).map((k) => k.kind),
);

export interface CustomDomainControllerDeps {
  kubeConfig: KubeConfig;
  /**
   * The operator's `--ingress-class`: foreign Ingresses and HTTPProxies of another class are
   * not served with Portico's routes and are not counted (routing/foreign-routes.ts
   * `servedWithPortico`). Undefined: all count.
   */
  ingressClassName?: string;
  /**
   * The settings of Portico's routing class (routing/routing-class.ts), for telling the operator's
   * own routes from routes anyone could write at its names (phases/acceptance.ts
   * `acceptedBeforeIn`). Default: ingress mode with `ingressClassName`.
   */
  routingClass?: RoutingClassSettings;
  /** `view` also answers HostnameClaims' cache reads (`ClaimsCache`). */
  createReconciler: (view: ClusterView & ClaimsCache) => CustomDomainReconciler;
  queue: WorkQueue;
  metrics: ControllerMetrics;
  log: Logger;
  workers: number;
  resyncMs: number;
  /**
   * Called once with every cached CustomDomain when the caches have synced, before the first
   * reconcile: for state that is rebuilt from status after a restart (the ACME order budget).
   */
  onSynced?: (domains: readonly CustomDomain[]) => void;
  /**
   * Called with every event of the CustomDomain watch (the new object; the deleted one for
   * `delete`), before the controller acts on it: for the metrics of Ready transitions.
   */
  onCustomDomainChange?: (domain: CustomDomain, verb: 'add' | 'update' | 'delete') => void;
  /**
   * Called when an EndpointSlice or a Service of `namespace` changed: the Projects there re-check
   * the deploy gate and the port of their auto-generated subdomain.
   */
  onServiceChange?: (namespace: string) => void;
  /**
   * A route of namespace `namespace` changed the hostnames it names (`hostnames`: those it names now
   * or named before, not both): the Project controller re-reads the foreign routes of the subdomains.
   */
  onForeignRouteChange?: (namespace: string, hostnames: readonly string[]) => void;
  /**
   * Asked before each worker takes a key: a promise holds the worker until it resolves (the memory
   * reducer's `MemoryHold`, while the resident set is far above the memory target).
   */
  relief?: () => Promise<void> | undefined;
  /**
   * The operator's ownership key once loaded (ownership-store.ts `loadedKey`), for telling an
   * `Accepted=True` the operator wrote from one written by anyone else (phases/acceptance.ts
   * `acceptedBeforeIn`) when choosing which domains an event queues. Default: never loaded (only a
   * routing object of the operator's then shows a domain accepted).
   */
  loadedKey?: () => Uint8Array | undefined;
}

/**
 * What a reconcile reads of a CustomDomain besides its own status, as one string: the generation
 * (spec), the verify annotation, deletion and finalizers. An update that leaves it unchanged only
 * wrote status (most often the reconcile's own write) and queues nothing; without this, every
 * status write queued its domain again (controller-runtime's GenerationChangedPredicate, widened
 * to the annotation and metadata the reconcile acts on).
 */
function inputsOf(domain: CustomDomain): string {
  const { generation, annotations, deletionTimestamp, finalizers } = domain.metadata;
  return JSON.stringify([
    generation,
    annotations?.[VERIFY_REQUESTED_AT_ANNOTATION],
    deletionTimestamp,
    finalizers,
  ]);
}

/**
 * What the Service cache keeps of a Service: its name, namespace, resourceVersion and the name and
 * number of each port (all a reconcile reads: routing/plan.ts checks the port a domain names).
 * Mutates `service`.
 */
export function keepServicePorts(service: V1Service): void {
  const { name = '', namespace = '', resourceVersion = '' } = service.metadata ?? {};
  service.metadata = { name, namespace, resourceVersion };
  const ports = (service.spec?.ports ?? []).map((p) =>
    p.name ? { name: p.name, port: p.port } : { port: p.port },
  );
  service.spec = { ports };
  // Not `delete`: a deleted property turns the object into a hash table (V8's dictionary mode).
  Reflect.set(service, 'status', undefined);
}

function readyEndpointCount(slice: V1EndpointSlice): number {
  // EndpointConditions.ready: nil means ready (discovery.k8s.io/v1 API reference).
  return (slice.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length;
}

export class CustomDomainController {
  readonly #d: CustomDomainControllerDeps;
  readonly #domains: ResilientInformer<CustomDomain>;
  readonly #namespaces: ResilientInformer<KubernetesObject>;
  readonly #slices: ResilientInformer<V1EndpointSlice>;
  readonly #claims: ResilientInformer<HostnameClaim>;
  /** Every Service, trimmed to its ports (`keepServicePorts`). */
  readonly #services: ResilientInformer<V1Service>;
  /** Owned objects by `apiVersion/kind`; optional kinds join once the API is known to serve them. */
  readonly #owned = new Map<string, ResilientInformer<KubernetesObject>>();
  readonly #informers: ResilientInformer<KubernetesObject>[];
  readonly #index = new CustomDomainIndex();
  /** Hostname → the routes Portico does not own that name it (routing/foreign-routes.ts). */
  readonly #foreign = new ForeignRouteIndex();
  /** The watches of routes Portico does not own, by kind; optional kinds join once served. */
  readonly #foreignInformers = new Map<string, ResilientInformer<KubernetesObject>>();
  /** The reconcile's inputs of each CustomDomain as last seen (`inputsOf`), by key. */
  readonly #seen = new Map<string, string>();
  /** Keys of the CustomDomains whose status shows them serving their hostname (claim-precedence.ts). */
  readonly #serving = new Set<string>();
  readonly #reconciler: CustomDomainReconciler;
  /** Optional owned kinds the API server does not serve (`apiVersion/kind`): no object can exist. */
  readonly #absentKinds = new Set<string>();
  #optionalKindsProbed = false;
  /** `onSynced` has been called. */
  /** Aborted by `stop`: ends the probe's wait between attempts at once. */
  readonly #stopped = new AbortController();
  #running: Promise<void>[] = [];
  #stopping = false;

  constructor(deps: CustomDomainControllerDeps) {
    this.#d = deps;
    const common = { resyncMs: 0, log: deps.log };
    this.#domains = new ResilientInformer<CustomDomain>(deps.kubeConfig, {
      path: `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
      onChange: (obj, verb) => {
        deps.onCustomDomainChange?.(obj, verb);
        const key = objectKey(obj);
        const servingChanged = this.#noteServing(key, obj, verb);
        if (verb === 'update' && this.#seen.get(key) === inputsOf(obj)) {
          // Status only; but a domain that stops serving (e.g. its plan went) may let a rival take
          // the hostname, which that rival's claim check waits for (claim-precedence.ts).
          if (servingChanged) this.#enqueue(this.#index.ofHostname(obj.spec.hostname));
          // Its Ready condition decides whether the redirects to it are routed (routing/redirect.ts).
          this.#enqueue(this.#index.redirectingTo(obj.spec.hostname));
          // An Accepted=True the operator did not write (docs/customdomains.md, "What status
          // Portico trusts"): reconciled at once, which writes the operator's own verdict over it.
          if (isAccepted(obj) && !this.#acceptedBefore(obj)) deps.queue.add(key);
          return;
        }
        // The redirects to its hostname as last indexed lose their target when the hostname changed.
        const former = this.#index.hostnameOf(key);
        if (former !== undefined) this.#enqueue(this.#index.redirectingTo(former));
        if (verb === 'delete') {
          this.#index.delete(obj);
          this.#seen.delete(key);
        } else {
          this.#index.upsert(obj);
          this.#seen.set(key, inputsOf(obj));
        }
        deps.queue.add(key);
        this.#enqueue(this.#index.ofHostname(obj.spec.hostname));
        this.#enqueue(this.#index.redirectingTo(obj.spec.hostname));
      },
      // The periodic resync waits behind new and changed work (a created domain is not queued
      // behind 10,000 unchanged ones).
      onResync: (objects) => {
        for (const obj of objects) deps.queue.addLowPriority(objectKey(obj));
      },
      // Its HostnameClaim's copies of its hostname, name and UID (the claim took them from an earlier
      // copy of this domain), so a status update does not bring in copies of its own.
      alike: (obj) => [this.#claims.get(normalizeDnsName(obj.spec.hostname))],
      resyncMs: deps.resyncMs,
      log: deps.log,
    });
    this.#namespaces = new ResilientInformer(deps.kubeConfig, {
      ...common,
      path: '/api/v1/namespaces',
      onChange: (ns) => {
        this.#enqueue(this.#index.inNamespace(ns.metadata?.name ?? ''));
      },
    });
    this.#slices = new ResilientInformer<V1EndpointSlice>(deps.kubeConfig, {
      ...common,
      path: '/apis/discovery.k8s.io/v1/endpointslices',
      onChange: (slice) => {
        const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
        if (service) this.#enqueueAwaitingDeploy(slice.metadata?.namespace ?? '', service);
        deps.onServiceChange?.(slice.metadata?.namespace ?? '');
      },
    });
    // A Service whose ports change changes whether its domains can be routed (the port they name).
    this.#services = new ResilientInformer<V1Service>(deps.kubeConfig, {
      ...common,
      path: '/api/v1/services',
      keep: keepServicePorts,
      onChange: (service) => {
        this.#enqueue(this.#index.ofService(service.metadata?.namespace ?? '', service.metadata?.name ?? ''));
        deps.onServiceChange?.(service.metadata?.namespace ?? '');
      },
    });
    // A claim taken, released or deleted by hand changes the verdict of every domain of its hostname,
    // and whether the redirects to it point into another project (routing/redirect.ts).
    this.#claims = new ResilientInformer<HostnameClaim>(deps.kubeConfig, {
      ...common,
      path: `/apis/${GROUP}/${VERSION}/${HOSTNAME_CLAIM_PLURAL}`,
      alike: (claim) => {
        const holder = claim.spec?.customDomainRef;
        return holder ? [this.#domains.get(holder.name, holder.namespace)] : [];
      },
      onChange: (claim) => {
        this.#enqueue(this.#index.ofHostname(claim.metadata.name));
        this.#enqueue(this.#index.redirectingTo(claim.metadata.name));
      },
    });
    this.#watchOwned(
      'networking.k8s.io/v1',
      'Ingress',
      '/apis/networking.k8s.io/v1/ingresses',
      OWNED_SELECTOR,
    );
    this.#watchForeign('Ingress', '/apis/networking.k8s.io/v1/ingresses');
    // A cached Secret keeps its parsed certificate, not its PEM and key (parsed-secret.ts).
    this.#watchOwned('v1', 'Secret', '/api/v1/secrets', OWNED_SELECTOR, { keep: slimTlsSecret });
    this.#watchOwned('v1', 'Service', '/api/v1/services', MANAGED_SELECTOR);
    this.#informers = [
      this.#domains,
      this.#namespaces,
      this.#slices,
      this.#services,
      this.#claims,
    ] as ResilientInformer<KubernetesObject>[];
    this.#reconciler = deps.createReconciler(this.view());
  }

  /** Records whether `obj` serves its hostname now; true when that changed. */
  #noteServing(key: string, obj: CustomDomain, verb: 'add' | 'update' | 'delete'): boolean {
    const was = this.#serving.has(key);
    // Only which domains to queue: the claim rules themselves ask for the operator's proof.
    const is =
      verb !== 'delete' && servesHostname(obj, normalizeDnsName(obj.spec.hostname), new Date(), () => true);
    if (is) this.#serving.add(key);
    else this.#serving.delete(key);
    return was !== is;
  }

  /** The cached CustomDomains of `hostname` (by the index, no scan). */
  #domainsOfHostname(hostname: string): CustomDomain[] {
    const found: CustomDomain[] = [];
    for (const key of this.#index.ofHostname(hostname)) {
      const { namespace, name } = splitKey(key);
      const domain = this.#domains.get(name, namespace);
      if (domain) found.push(domain);
    }
    return found;
  }

  /** The cached CustomDomains of `namespace` (by the index, no scan of other namespaces). */
  #domainsInNamespace(namespace: string): CustomDomain[] {
    const found: CustomDomain[] = [];
    for (const key of this.#index.inNamespace(namespace)) {
      const domain = this.#domains.get(splitKey(key).name, namespace);
      if (domain) found.push(domain);
    }
    return found;
  }

  /**
   * Caches the objects of one owned kind at `path` (`keep` trims each object); a change re-queues
   * the domain named by its owner label.
   */
  #watchOwned(
    apiVersion: string,
    kind: string,
    path: string,
    labelSelector: string,
    options: { keep?: (obj: KubernetesObject) => void } = {},
  ): ResilientInformer<KubernetesObject> {
    const { keep } = options;
    const informer = new ResilientInformer<KubernetesObject>(this.#d.kubeConfig, {
      resyncMs: 0,
      log: this.#d.log,
      path,
      labelSelector,
      ...(keep ? { keep } : {}),
      // The owning CustomDomain's copies of its name, UID and hostname.
      alike: (obj) => {
        const owner = obj.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
        return owner ? [this.#domains.get(owner, obj.metadata?.namespace)] : [];
      },
      onChange: (obj) => {
        const owner = obj.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
        if (owner) this.#d.queue.add(`${obj.metadata?.namespace ?? ''}/${owner}`);
      },
    });
    this.#owned.set(`${apiVersion}/${kind}`, informer);
    return informer;
  }

  /**
   * Caches every object of `kind` at `path`, trimmed to its hostnames and its CustomDomain controller
   * owner (routing/foreign-routes.ts `slimForeignRoute`); no label selector, since a label is anyone's
   * to set and would hide a foreign route (docs/routing.md, "Foreign routes"). Each event updates the
   * route index and re-queues the CustomDomains of every hostname the object names now or named
   * before.
   */
  #watchForeign(kind: ForeignRouteKind, path: string): ResilientInformer<KubernetesObject> {
    const informer = new ResilientInformer<KubernetesObject>(this.#d.kubeConfig, {
      resyncMs: 0,
      log: this.#d.log,
      path,
      keep: (obj) => {
        slimForeignRoute(kind, obj, this.#d.ingressClassName);
      },
      onChange: (obj, verb) => {
        const id = routeId(kind, obj);
        const uid = controllerOwnerUid(obj);
        const owner = uid === undefined ? undefined : ownerKey(obj.metadata?.namespace ?? '', uid);
        const changed =
          verb === 'delete' ? this.#foreign.delete(id) : this.#foreign.set(id, hostnamesOf(kind, obj), owner);
        for (const hostname of changed) this.#enqueue(this.#index.ofHostname(hostname));
        if (changed.length > 0) this.#d.onForeignRouteChange?.(obj.metadata?.namespace ?? '', changed);
      },
    });
    this.#foreignInformers.set(kind, informer);
    return informer;
  }

  /**
   * Watches each optional owned kind the API server serves (one discovery request per group at
   * start). A kind it does not serve can hold no object, so the reconcile knows there is nothing to
   * delete without asking; a CRD installed later is seen after a restart.
   */
  async #probeOptionalKinds(): Promise<void> {
    for (const { apiVersion, kind, plural } of OPTIONAL_OWNED_KINDS) {
      const type = `${apiVersion}/${kind}`;
      // Known from an earlier attempt that failed on a later kind: never watched twice.
      if (this.#owned.has(type) || this.#absentKinds.has(type)) continue;
      const path = collectionPath(apiVersion, plural);
      let served: boolean;
      try {
        // A list of at most one object: the API server answers 404 when it serves no such kind.
        await collectionLister(this.#d.kubeConfig, path, OWNED_SELECTOR)({ limit: 1 });
        served = true;
      } catch (err) {
        if (!isNotFound(err) && apiStatusCode(err) !== 403) throw err;
        // 403: the CRD is installed but the operator may not list the kind (RBAC of a release
        // older than the kind's use). Retrying would hold every worker back for good; the kind is
        // treated as not served, and a domain that needs it says so (HTTPProxyUnsupported).
        if (!isNotFound(err))
          this.#d.log.warn(
            { apiVersion, kind, err },
            'the operator may not list this kind (RBAC); not watched, treated as not served',
          );
        served = false;
      }
      this.#d.log.debug({ apiVersion, kind, served }, 'owned kind probed');
      if (served && !this.#stopping) {
        this.#watchOwned(apiVersion, kind, path, OWNED_SELECTOR).start();
        if (FOREIGN_OPTIONAL_KINDS.has(kind)) this.#watchForeign(kind, path).start();
      } else if (!served) this.#absentKinds.add(type);
    }
    this.#optionalKindsProbed = true;
  }

  /** The cluster as the caches see it, for the reconcile's and HostnameClaims' reads. */
  view(): ClusterView & ClaimsCache {
    return {
      customDomainsOfHostname: (hostname) => this.#domainsOfHostname(hostname),
      namespaceLabels: (name) => this.#namespaces.get(name)?.metadata?.labels,
      namespaceUid: (name) => this.#namespaces.get(name)?.metadata?.uid,
      readyEndpoints: (namespace, service) =>
        this.#slices
          .list(namespace)
          .filter((s) => s.metadata?.labels?.[SERVICE_NAME_LABEL] === service)
          .reduce((sum, s) => sum + readyEndpointCount(s), 0),
      servicePorts: (namespace, name) => {
        const service = this.#services.get(name, namespace);
        return service ? service.spec?.ports : undefined;
      },
      customDomain: (namespace, name) => this.#domains.get(name, namespace),
      customDomainsInNamespace: (namespace) => this.#domainsInNamespace(namespace),
      hostnameClaim: (hostname) => this.#claims.get(hostname),
      owned: (header) => this.#ownedLookup(header),
      serves: (apiVersion, kind) => !this.#absentKinds.has(`${apiVersion}/${kind}`),
      foreignRoutes: (hostname, owners) => this.#foreign.routesOf(hostname, owners),
      foreignRoutesUnder: (domain, owners) => this.#foreign.routesUnder(domain, owners),
    };
  }

  #ownedLookup(header: ObjectHeader): OwnedLookup {
    const type = `${header.apiVersion}/${header.kind}`;
    if (this.#absentKinds.has(type)) return { cached: true, object: undefined };
    const informer = this.#owned.get(type);
    if (!informer?.synced) return { cached: false };
    return { cached: true, object: informer.get(header.metadata.name, header.metadata.namespace) };
  }

  /**
   * An EndpointSlice changed: only the Service's domains not yet accepted can change verdict (an
   * accepted domain is not gated by its endpoints again, acceptance.ts), so only those are queued;
   * an `Accepted=True` counts only as the operator proves it (`#acceptedBefore`).
   */
  #enqueueAwaitingDeploy(namespace: string, service: string): void {
    for (const key of this.#index.ofService(namespace, service)) {
      const { name } = splitKey(key);
      const domain = this.#domains.get(name, namespace);
      if (!domain || !this.#acceptedBefore(domain)) this.#d.queue.add(key);
    }
  }

  /**
   * Whether `domain`'s `Accepted=True` is the operator's (phases/acceptance.ts `acceptedBeforeIn`:
   * its status proof, or a routing object of its own for the domain in the owned caches).
   */
  #acceptedBefore(domain: CustomDomain): boolean {
    return acceptedBeforeIn(
      { owned: (header) => this.#ownedLookup(header) },
      this.#d.loadedKey?.(),
      domain,
      this.#d.routingClass ?? {
        mode: 'ingress',
        ...(this.#d.ingressClassName === undefined ? {} : { ingressClassName: this.#d.ingressClassName }),
      },
    );
  }

  #enqueue(keys: Iterable<string>): void {
    for (const key of keys) this.#d.queue.add(key);
  }

  /** Every CustomDomain in the cache now (empty before `start`): for the metrics read at each scrape. */
  customDomains(): readonly CustomDomain[] {
    return this.#domains.list();
  }

  /** The cached CustomDomains of `namespace` (the Project controller reads them). */
  customDomainsInNamespace(namespace: string): readonly CustomDomain[] {
    return this.#domainsInNamespace(namespace);
  }

  /** True once every watch has listed and the optional owned kinds are known. */
  get synced(): boolean {
    return (
      this.#optionalKindsProbed &&
      this.#informers.every((i) => i.synced) &&
      [...this.#owned.values()].every((i) => i.synced) &&
      [...this.#foreignInformers.values()].every((i) => i.synced)
    );
  }

  /** Starts the watches; workers start once every cache has listed, so no gate reads an empty cache. */
  start(): void {
    for (const informer of [...this.#informers, ...this.#owned.values(), ...this.#foreignInformers.values()])
      informer.start();
    const workers = runWorkers(this.#d.workers, {
      controller: CONTROLLER,
      queue: this.#d.queue,
      metrics: this.#d.metrics,
      log: this.#d.log,
      reconcile: async (key) => (await this.#reconciler.reconcile(key)).requeueAfterMs,
      synced: () => this.synced,
      stopping: () => this.#stopping,
      onSynced: () => this.#d.onSynced?.(this.#domains.list()),
      relief: () => this.#d.relief?.(),
    });
    this.#running = [this.#probe(), ...workers];
  }

  /** Probes the optional kinds, retrying with backoff until it succeeds or the controller stops. */
  async #probe(): Promise<void> {
    for (let attempt = 1; !this.#stopping; attempt += 1) {
      try {
        await this.#probeOptionalKinds();
        return;
      } catch (err) {
        const retryInMs = backoffDelayMs(PROBE_BACKOFF, attempt);
        this.#d.log.warn({ err, retryInMs }, 'API discovery failed; retrying');
        await sleep(retryInMs, undefined, { signal: this.#stopped.signal }).catch(() => undefined);
      }
    }
  }

  /** Stops the watches, lets each worker finish its current key, and returns. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#stopped.abort();
    await Promise.all(
      [...this.#informers, ...this.#owned.values(), ...this.#foreignInformers.values()].map((i) => i.stop()),
    );
    this.#d.queue.shutDown();
    await Promise.all(this.#running);
  }
}
