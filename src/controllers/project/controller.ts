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
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  type KubernetesObjectApi,
} from '@kubernetes/client-node';
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
import { serverSideApply } from '../../kube/server-side-apply.js';
import { CONTOUR_API_VERSION, HTTPPROXY_KIND, type HTTPProxy } from '../../data-planes/contour/httpproxy.js';
import type { ServicePortEntry } from '../../routing/plan.js';
import type { AppsCertificateState } from './apps-certificate.js';
import { planSubdomain, subdomainHolder, subdomainProxyName } from './subdomain.js';
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

/** The TLSCertificateDelegation that lets the projects' HTTPProxies use the wildcard Secret. */
export const SUBDOMAIN_DELEGATION_NAME = 'portico-apps-domain';
/** Milliseconds before a Project is looked at again while Contour has not judged its subdomain route. */
const PROXY_RECHECK_MS = 1_000;

/**
 * The auto-generated subdomains (docs/customdomains.md, "The auto-generated subdomain"):
 * undefined when the operator runs without `--apps-domain`.
 */
export interface SubdomainOptions {
  /** The platform's apps domain, normalized. */
  readonly appsDomain: string;
  /** The wildcard certificate (apps-certificate.ts). */
  readonly certificate: { readonly state: AppsCertificateState; readonly secretReference: string };
  /** The deploy gate's and the port's reads (the CustomDomain controller's caches). */
  readonly view: {
    readyEndpoints(namespace: string, service: string): number;
    servicePorts(namespace: string, name: string): readonly ServicePortEntry[] | undefined;
  };
  readonly objects: KubernetesObjectApi;
  /** The operator's namespace: the wildcard Secret and its TLSCertificateDelegation live there. */
  readonly operatorNamespace: string;
  /** The operator writes HTTPProxies (ingress mode, `contour` flavor). */
  readonly routingSupported: boolean;
  readonly ingressClassName?: string | undefined;
}

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
  /** The namespaces the TLSCertificateDelegation lists as last applied (sorted, joined). */
  #delegatedNamespaces: string | undefined;
  /** Serializes the delegation's applies across workers. */
  #delegation: Promise<void> = Promise.resolve();

  constructor(options: ProjectControllerOptions) {
    this.#o = options;
    this.#log = options.log.child({ controller: CONTROLLER });
    this.#custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
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
   * The auto-generated subdomain of `project` (subdomain.ts): its HTTPProxy applied or deleted, the
   * wildcard Secret delegated to the namespaces that hold a subdomain; undefined without an apps
   * domain. `recheck`: Contour has not judged the route as applied yet.
   */
  async #reconcileSubdomain(
    project: Project,
    servingPrimary: string | undefined,
  ): Promise<{ status: ProjectSubdomainStatus; recheck: boolean } | undefined> {
    const o = this.#o.subdomain;
    if (o === undefined) return undefined;
    const namespace = project.metadata.namespace;
    const hostname = appsSubdomain(namespace, o.appsDomain);
    const holder = this.#subdomainHolder(hostname);
    const current = await this.#readProxy(project);
    const plan = planSubdomain(project, {
      hostname,
      heldBy:
        holder === undefined || holder.metadata.uid === project.metadata.uid
          ? undefined
          : { namespace: holder.metadata.namespace, name: holder.metadata.name },
      routingSupported: o.routingSupported,
      readyEndpoints: o.view.readyEndpoints(namespace, project.spec.service.name),
      servicePorts: o.view.servicePorts(namespace, project.spec.service.name),
      current,
      certificate: { ...o.certificate.state, secretReference: o.certificate.secretReference },
      servingPrimary,
      ingressClassName: o.ingressClassName,
    });
    await this.#applyDelegation();
    const ours = current?.metadata.ownerReferences?.some(
      (r) => r.controller === true && r.uid === project.metadata.uid,
    );
    if (plan.proxy !== undefined) {
      const same = ours === true && current !== undefined && isDeepStrictEqual(current.spec, plan.proxy.spec);
      if (!same) {
        await serverSideApply(o.objects, plan.proxy, { fieldManager: FIELD_MANAGER, force: true });
        this.#log.info(
          { namespace, name: plan.proxy.metadata.name, hostname },
          'applied subdomain HTTPProxy',
        );
      }
      return { status: plan.status, recheck: plan.status.serving !== 'True' && plan.delegated };
    }
    if (ours === true && current !== undefined) await this.#deleteProxy(current);
    return { status: plan.status, recheck: false };
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

  /** Deletes the subdomain HTTPProxy of a gone (or going) Project, and drops its namespace's delegation. */
  async #sweepSubdomain(namespace: string, name: string, uid: string | undefined): Promise<void> {
    if (this.#o.subdomain === undefined) return;
    const proxy = await this.#readProxy({ metadata: { name, namespace } });
    const owner = proxy?.metadata.ownerReferences?.find((r) => r.controller === true);
    const owned =
      owner?.kind === PROJECT_KIND && owner.name === name && (uid === undefined || owner.uid === uid);
    if (proxy && owned) await this.#deleteProxy(proxy);
    await this.#applyDelegation();
  }

  async #readProxy(project: Pick<Project, 'metadata'>): Promise<HTTPProxy | undefined> {
    const o = this.#o.subdomain;
    if (o === undefined) return undefined;
    try {
      return await o.objects.read<HTTPProxy>({
        apiVersion: CONTOUR_API_VERSION,
        kind: HTTPPROXY_KIND,
        metadata: { name: subdomainProxyName(project), namespace: project.metadata.namespace },
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async #deleteProxy(proxy: HTTPProxy): Promise<void> {
    try {
      await this.#o.subdomain?.objects.delete(proxy, undefined, undefined, undefined, undefined, undefined, {
        preconditions: { uid: proxy.metadata.uid ?? '' },
      });
      this.#log.info(
        { namespace: proxy.metadata.namespace, name: proxy.metadata.name },
        'deleted subdomain HTTPProxy',
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /**
   * The TLSCertificateDelegation `portico-apps-domain` in the operator's namespace: the wildcard
   * Secret, delegated to the namespace of every Project that holds its subdomain (Contour's
   * `namespace/name` secretName needs it: apis/projectcontour/v1/tlscertificatedelegation.go). The
   * key never leaves the operator's namespace; Contour reads it there. Applied when the set changed.
   */
  #applyDelegation(): Promise<void> {
    const o = this.#o.subdomain;
    if (o === undefined || !o.routingSupported) return Promise.resolve();
    const run = async (): Promise<void> => {
      const namespaces = [
        ...new Set(
          this.#projects
            .list()
            .filter((p) => {
              if (p.metadata.deletionTimestamp) return false;
              const holder = this.#subdomainHolder(appsSubdomain(p.metadata.namespace, o.appsDomain));
              return holder?.metadata.uid === p.metadata.uid;
            })
            .map((p) => p.metadata.namespace),
        ),
      ].sort();
      const joined = namespaces.join(',');
      if (joined === this.#delegatedNamespaces) return;
      const [secretNamespace = '', secretName = ''] = o.certificate.secretReference.split('/');
      await serverSideApply(
        o.objects,
        {
          apiVersion: CONTOUR_API_VERSION,
          kind: 'TLSCertificateDelegation',
          metadata: { name: SUBDOMAIN_DELEGATION_NAME, namespace: secretNamespace },
          spec: { delegations: [{ secretName, targetNamespaces: namespaces }] },
        } as KubernetesObject,
        { fieldManager: FIELD_MANAGER, force: true },
      );
      this.#delegatedNamespaces = joined;
      this.#log.info({ namespaces }, 'applied the wildcard certificate delegation');
    };
    const next = this.#delegation.then(run);
    this.#delegation = next.catch(() => undefined);
    return next;
  }

  /** Deletes the CustomDomains a gone (or going) Project controlled, as the garbage collector would. */
  async #sweep(
    namespace: string,
    name: string,
    uid: string | undefined,
    domains: readonly CustomDomain[],
  ): Promise<void> {
    await this.#sweepSubdomain(namespace, name, uid);
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
