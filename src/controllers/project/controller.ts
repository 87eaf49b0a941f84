/**
 * The Project controller (docs/customdomains.md, "Projects"): keeps one CustomDomain per hostname of
 * each Project in step with it (plan.ts) and writes the Project's status from theirs.
 *
 * It watches Projects; the CustomDomains it reads are the CustomDomain controller's cache
 * (`domains`), whose every event the operator's main hands to `onCustomDomainChange`, which queues
 * the Projects of that namespace: a CustomDomain turning Live, or one made by hand for a listed
 * hostname, is seen at once, with no second watch of CustomDomains. One de-duplicating work queue
 * and the operator's worker loop (kube/workers.ts), as every controller of the operator.
 *
 * A deleted Project: its CustomDomains (controller ownerReference to it) are deleted by
 * Kubernetes' garbage collector in a cluster; the controller deletes them too, so that a cluster
 * without one (the sandbox and the tests run no kube-controller-manager) behaves the same, and
 * sooner. `kubectl delete --cascade=orphan` still orphans them: the garbage collector removes the
 * ownerReferences before the Project is gone, so nothing is left for this sweep.
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import {
  API_VERSION,
  CUSTOM_DOMAIN_PLURAL,
  FIELD_MANAGER,
  GROUP,
  VERSION,
  objectKey,
  splitKey,
  type Condition,
  type CustomDomain,
} from '../../api/customdomain.js';
import {
  PROJECT_KIND,
  PROJECT_PLURAL,
  type Project,
  type ProjectStatus,
  type ProjectSubdomainStatus,
} from '../../api/project.js';
import { appsSubdomain } from '../../domain/apps-subdomain.js';
import { subdomainHolder } from './subdomain.js';
import { SubdomainRoutes, type SubdomainOptions } from './subdomain-objects.js';
import { findCondition, setCondition, type ConditionInput } from '../../kube/conditions.js';
import { apiStatusCode, isNotFound } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import { ResilientInformer } from '../../kube/informer.js';
import { WorkQueue } from '../../kube/work-queue.js';
import { runWorkers } from '../../kube/workers.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import { planProject, type DomainAction } from './plan.js';

const CONTROLLER = 'project';

/** Ready reasons that ask a person to act: recorded as Warning Events. */
const WARNING_REASONS = new Set(['HostnameConflict', 'CustomDomainControlledElsewhere']);

/** The CustomDomains the controller reads: the CustomDomain controller's cache. */
export interface CustomDomainCache {
  customDomainsInNamespace(namespace: string): readonly CustomDomain[];
  readonly synced: boolean;
}

export type { SubdomainOptions };
/** Milliseconds before a Project is looked at again while the data plane has not judged its subdomain route. */
const PROXY_RECHECK_MS = 1_000;

export interface ProjectControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly domains: CustomDomainCache;
  readonly log: Logger;
  readonly metrics: ControllerMetrics;
  /** Milliseconds between full resyncs. */
  readonly resyncMs: number;
  /** Parallel reconciles (default 2). */
  readonly workers?: number;
  readonly events?: EventRecorder;
  readonly now?: () => Date;
  readonly subdomain?: SubdomainOptions;
}

/** The Project's conditions after this reconcile: Ready, and Conflicted once it was ever needed. */
function nextConditions(
  project: Project,
  ready: ConditionInput,
  conflicted: ConditionInput | undefined,
  now: Date,
): Condition[] {
  const generation = project.metadata.generation ?? 0;
  const before = project.status?.conditions ?? [];
  const withReady = setCondition(before, ready, generation, now);
  if (conflicted !== undefined) return setCondition(withReady, conflicted, generation, now);
  if (findCondition(before, 'Conflicted') === undefined) return withReady;
  const none: ConditionInput = {
    type: 'Conflicted',
    status: 'False',
    reason: 'NoConflict',
    message: 'every listed hostname has a CustomDomain of this Project',
  };
  return setCondition(withReady, none, generation, now);
}

export class ProjectController {
  readonly #o: ProjectControllerOptions;
  readonly #log: Logger;
  readonly #queue = new WorkQueue(undefined, { name: CONTROLLER });
  readonly #custom: CustomObjectsApi;
  readonly #projects: ResilientInformer<Project>;
  #running: Promise<void>[] = [];
  #stopping = false;
  /** The subdomain routes (subdomain-objects.ts); undefined without an apps domain. */
  readonly #subdomains: SubdomainRoutes | undefined;

  constructor(options: ProjectControllerOptions) {
    this.#o = options;
    this.#log = options.log.child({ controller: CONTROLLER });
    this.#custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#subdomains = options.subdomain && new SubdomainRoutes(options.subdomain, this.#log);
    this.#projects = new ResilientInformer<Project>(options.kubeConfig, {
      path: `/apis/${GROUP}/${VERSION}/${PROJECT_PLURAL}`,
      onChange: (project) => {
        this.#queue.add(objectKey(project));
      },
      onResync: (projects) => {
        for (const p of projects) this.#queue.addLowPriority(objectKey(p));
      },
      resyncMs: options.resyncMs,
      log: this.#log,
    });
  }

  /** True once the Projects and the CustomDomain cache have listed. */
  get synced(): boolean {
    return this.#projects.synced && this.#o.domains.synced;
  }

  /**
   * A CustomDomain changed (every event of the CustomDomain watch): queues the Projects of its
   * namespace, and the Project that controlled it when that one is gone (its sweep).
   */
  onCustomDomainChange(domain: CustomDomain): void {
    const namespace = domain.metadata.namespace;
    for (const p of this.#projects.list(namespace)) this.#queue.add(objectKey(p));
    const owner = domain.metadata.ownerReferences?.find(
      (r) => r.controller === true && r.kind === PROJECT_KIND,
    );
    if (owner !== undefined && this.#projects.get(owner.name, namespace) === undefined)
      this.#queue.add(`${namespace}/${owner.name}`);
  }

  /** The Projects of `namespace` are queued (an EndpointSlice or Service there changed: the deploy gate). */
  onNamespaceChange(namespace: string): void {
    for (const p of this.#projects.list(namespace)) this.#queue.add(objectKey(p));
  }

  /** Every Project is queued (the wildcard certificate was stored, or its order failed). */
  onCertificateChange(): void {
    for (const p of this.#projects.list()) this.#queue.add(objectKey(p));
  }

  /** Every Project in the cache (for `kubectl portico`-style readers and tests). */
  projects(): readonly Project[] {
    return this.#projects.list();
  }

  start(): void {
    this.#projects.start();
    this.#running = runWorkers(this.#o.workers ?? 2, {
      controller: CONTROLLER,
      queue: this.#queue,
      metrics: this.#o.metrics,
      log: this.#log,
      reconcile: (key) => this.#reconcile(key),
      synced: () => this.synced,
      stopping: () => this.#stopping,
    });
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#projects.stop();
    this.#queue.shutDown();
    await Promise.all(this.#running);
  }

  async #reconcile(key: string): Promise<number | undefined> {
    const { namespace, name } = splitKey(key);
    const project = this.#projects.get(name, namespace);
    const domains = this.#o.domains.customDomainsInNamespace(namespace);
    if (project === undefined || project.metadata.deletionTimestamp) {
      await this.#sweep(namespace, name, project?.metadata.uid, domains);
      return undefined;
    }
    const uids = new Set(this.#projects.list(namespace).map((p) => p.metadata.uid));
    const plan = planProject(project, domains, {
      projectExists: (uid) => uids.has(uid),
    });
    for (const action of plan.actions) await this.#act(namespace, action);
    const subdomain = await this.#reconcileSubdomain(project, plan.servingPrimary);
    await this.#writeStatus(
      project,
      plan.domains,
      plan.servingPrimary,
      plan.ready,
      plan.conflicted,
      subdomain?.status,
    );
    return subdomain?.recheck === true ? PROXY_RECHECK_MS : undefined;
  }

  /**
   * The auto-generated subdomain of `project` (subdomain.ts, subdomain-objects.ts): its route
   * applied or deleted, the wildcard Secret's access object listing the namespaces that hold a
   * subdomain; undefined without an apps domain. `recheck`: the data plane has not judged the route
   * as applied yet.
   */
  async #reconcileSubdomain(
    project: Project,
    servingPrimary: string | undefined,
  ): Promise<{ status: ProjectSubdomainStatus; recheck: boolean } | undefined> {
    const routes = this.#subdomains;
    if (routes === undefined) return undefined;
    const holder = this.#subdomainHolder(routes.hostnameOf(project.metadata.namespace));
    const heldBy =
      holder === undefined || holder.metadata.uid === project.metadata.uid
        ? undefined
        : { namespace: holder.metadata.namespace, name: holder.metadata.name };
    await routes.applyCertificateAccess(() => this.#holdingNamespaces());
    return routes.reconcile(project, servingPrimary, heldBy);
  }

  /** The Project that has `hostname` as its subdomain: the oldest of those that would. */
  #subdomainHolder(hostname: string): Project | undefined {
    const o = this.#o.subdomain;
    if (o === undefined) return undefined;
    return subdomainHolder(
      this.#projects
        .list()
        .filter(
          (p) =>
            !p.metadata.deletionTimestamp && appsSubdomain(p.metadata.namespace, o.appsDomain) === hostname,
        ),
    );
  }

  /** The namespaces of the Projects that hold their subdomain. */
  #holdingNamespaces(): string[] {
    const o = this.#o.subdomain;
    if (o === undefined) return [];
    const holding = this.#projects.list().filter((p) => {
      if (p.metadata.deletionTimestamp) return false;
      const holder = this.#subdomainHolder(appsSubdomain(p.metadata.namespace, o.appsDomain));
      return holder?.metadata.uid === p.metadata.uid;
    });
    return [...new Set(holding.map((p) => p.metadata.namespace))];
  }

  /**
   * Routes of `namespace` changed the hostnames they name (the CustomDomain controller's route
   * watch): queues the Projects whose subdomain is one of them, and the Projects of `namespace` when
   * one is under the apps domain (its own routes for names it does not hold).
   */
  onForeignRouteChange(namespace: string, hostnames: readonly string[]): void {
    const routes = this.#subdomains;
    const o = this.#o.subdomain;
    if (routes === undefined || o === undefined) return;
    const under = hostnames.filter((h) => h.endsWith(`.${o.appsDomain}`));
    if (under.length === 0) return;
    for (const p of this.#projects.list())
      if (under.includes(routes.hostnameOf(p.metadata.namespace)) || p.metadata.namespace === namespace)
        this.#queue.add(objectKey(p));
  }

  /** Deletes the CustomDomains a gone (or going) Project controlled, as the garbage collector would. */
  async #sweep(
    namespace: string,
    name: string,
    uid: string | undefined,
    domains: readonly CustomDomain[],
  ): Promise<void> {
    await this.#subdomains?.sweep(namespace, name, uid);
    await this.#subdomains?.applyCertificateAccess(() => this.#holdingNamespaces());
    for (const d of domains) {
      const owner = d.metadata.ownerReferences?.find((r) => r.controller === true);
      if (owner?.kind !== PROJECT_KIND || owner.name !== name || owner.apiVersion !== API_VERSION) continue;
      if (uid !== undefined && owner.uid !== uid) continue;
      if (d.metadata.deletionTimestamp) continue;
      await this.#act(namespace, { kind: 'delete', name: d.metadata.name, uid: d.metadata.uid ?? '' });
    }
  }

  async #act(namespace: string, action: DomainAction): Promise<void> {
    const api = { group: GROUP, version: VERSION, plural: CUSTOM_DOMAIN_PLURAL, namespace };
    try {
      if (action.kind === 'create') {
        await this.#custom.createNamespacedCustomObject({
          ...api,
          body: action.object,
          fieldManager: FIELD_MANAGER,
        });
        this.#log.info({ namespace, name: action.object.metadata.name }, 'created CustomDomain');
      } else if (action.kind === 'update') {
        const body: CustomDomain = { ...action.object };
        delete body.status;
        await this.#custom.replaceNamespacedCustomObject({
          ...api,
          name: action.object.metadata.name,
          body,
          fieldManager: FIELD_MANAGER,
        });
        this.#log.info(
          { namespace, name: action.object.metadata.name, spec: action.object.spec },
          'updated CustomDomain',
        );
      } else {
        await this.#custom.deleteNamespacedCustomObject({
          ...api,
          name: action.name,
          body: { preconditions: { uid: action.uid } },
        });
        this.#log.info({ namespace, name: action.name }, 'deleted CustomDomain');
      }
    } catch (err) {
      // Gone already, or a precondition that no longer holds: the next event queues the Project again.
      if (isNotFound(err)) return;
      if (action.kind === 'create' && apiStatusCode(err) === 409) return;
      throw err;
    }
  }

  async #writeStatus(
    project: Project,
    domains: ProjectStatus['domains'],
    servingPrimary: string | undefined,
    ready: ConditionInput,
    conflicted: ConditionInput | undefined,
    subdomain: ProjectSubdomainStatus | undefined,
  ): Promise<void> {
    const generation = project.metadata.generation ?? 0;
    const conditions = nextConditions(project, ready, conflicted, this.#o.now?.() ?? new Date());
    const status: ProjectStatus = {
      observedGeneration: generation,
      ...(servingPrimary !== undefined ? { servingPrimary } : {}),
      ...(subdomain !== undefined ? { subdomain } : {}),
      hostnameCount: domains?.length ?? 0,
      domains: domains ?? [],
      conditions,
    };
    if (isDeepStrictEqual(JSON.parse(JSON.stringify(status)), project.status ?? {})) return;
    try {
      await this.#custom.replaceNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        namespace: project.metadata.namespace,
        plural: PROJECT_PLURAL,
        name: project.metadata.name,
        body: { ...project, status },
        fieldManager: FIELD_MANAGER,
      });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    await this.#o.events?.recordTransitions(
      { apiVersion: API_VERSION, kind: PROJECT_KIND, metadata: project.metadata },
      project.status?.conditions,
      conditions,
      WARNING_REASONS,
    );
    this.#log.info(
      {
        key: objectKey(project),
        generation,
        ready: ready.status,
        reason: ready.reason,
        servingPrimary,
      },
      'status updated',
    );
  }
}
