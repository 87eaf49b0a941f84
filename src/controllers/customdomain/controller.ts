/**
 * Wires the CustomDomain reconcile to the cluster: watches CustomDomains, the Ingresses and Secrets
 * Portico owns (label-selected, so no other Secret is cached), Namespaces (the plan label) and
 * EndpointSlices (the first ready endpoint), feeds a de-duplicating work queue, and runs N workers.
 * A failure on one key is retried with backoff and never blocks another.
 */
import type {
  KubeConfig,
  KubernetesListObject,
  KubernetesObject,
  KubernetesObjectApi,
  V1EndpointSlice,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  CUSTOM_DOMAIN_LABEL,
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  VERSION,
  objectKey,
  type CustomDomain,
} from '../../api/customdomain.js';
import { normalizeDnsName } from '../../dns/answers.js';
import { isConflict } from '../../kube/errors.js';
import { ResilientInformer } from '../../kube/informer.js';
import { WorkQueue } from '../../kube/work-queue.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import type { ClusterView } from './cluster-view.js';
import type { CustomDomainReconciler } from './reconciler.js';

const CONTROLLER = 'customdomain';
const OWNED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${CUSTOM_DOMAIN_LABEL}`;
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

export interface CustomDomainControllerDeps {
  kubeConfig: KubeConfig;
  objects: KubernetesObjectApi;
  createReconciler: (view: ClusterView) => CustomDomainReconciler;
  queue: WorkQueue;
  metrics: ControllerMetrics;
  log: Logger;
  workers: number;
  resyncMs: number;
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
  readonly #informers: ResilientInformer<KubernetesObject>[];
  readonly #reconciler: CustomDomainReconciler;
  #running: Promise<void>[] = [];
  #stopping = false;

  constructor(deps: CustomDomainControllerDeps) {
    this.#d = deps;
    const list =
      <T extends KubernetesObject>(apiVersion: string, kind: string, labelSelector?: string) =>
      (): Promise<KubernetesListObject<T>> =>
        deps.objects.list(
          apiVersion,
          kind,
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          labelSelector,
        );
    const common = { resyncMs: 0, log: deps.log };
    const enqueueOwner = (obj: KubernetesObject): void => {
      const owner = obj.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
      if (owner) deps.queue.add(`${obj.metadata?.namespace ?? ''}/${owner}`);
    };
    this.#domains = new ResilientInformer<CustomDomain>(deps.kubeConfig, {
      path: `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
      list: list(`${GROUP}/${VERSION}`, 'CustomDomain'),
      onChange: (obj) => {
        deps.queue.add(objectKey(obj));
        this.#enqueueClaimants(obj.spec.hostname);
      },
      onResync: (objects) => {
        for (const obj of objects) deps.queue.add(objectKey(obj));
      },
      resyncMs: deps.resyncMs,
      log: deps.log,
    });
    this.#namespaces = new ResilientInformer(deps.kubeConfig, {
      ...common,
      path: '/api/v1/namespaces',
      list: list('v1', 'Namespace'),
      onChange: (ns) => {
        this.#enqueueWhere((cd) => cd.metadata.namespace === ns.metadata?.name);
      },
    });
    this.#slices = new ResilientInformer<V1EndpointSlice>(deps.kubeConfig, {
      ...common,
      path: '/apis/discovery.k8s.io/v1/endpointslices',
      list: list('discovery.k8s.io/v1', 'EndpointSlice'),
      onChange: (slice) => {
        const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
        this.#enqueueWhere(
          (cd) => cd.metadata.namespace === slice.metadata?.namespace && cd.spec.service?.name === service,
        );
      },
    });
    this.#informers = [
      this.#domains,
      this.#namespaces,
      this.#slices,
      new ResilientInformer(deps.kubeConfig, {
        ...common,
        path: '/apis/networking.k8s.io/v1/ingresses',
        list: list('networking.k8s.io/v1', 'Ingress', OWNED_SELECTOR),
        labelSelector: OWNED_SELECTOR,
        onChange: enqueueOwner,
      }),
      new ResilientInformer(deps.kubeConfig, {
        ...common,
        path: '/api/v1/secrets',
        list: list('v1', 'Secret', OWNED_SELECTOR),
        labelSelector: OWNED_SELECTOR,
        onChange: enqueueOwner,
      }),
    ] as ResilientInformer<KubernetesObject>[];
    this.#reconciler = deps.createReconciler(this.view());
  }

  /** The cluster as the caches see it, for the reconcile's gates. */
  view(): ClusterView {
    return {
      namespaceLabels: (name) => this.#namespaces.get(name)?.metadata?.labels,
      readyEndpoints: (namespace, service) =>
        this.#slices
          .list(namespace)
          .filter((s) => s.metadata?.labels?.[SERVICE_NAME_LABEL] === service)
          .reduce((sum, s) => sum + readyEndpointCount(s), 0),
    };
  }

  #enqueueWhere(match: (cd: CustomDomain) => boolean): void {
    for (const cd of this.#domains.list()) if (match(cd)) this.#d.queue.add(objectKey(cd));
  }

  /** A claim released or taken changes the verdict of every CustomDomain of that hostname. */
  #enqueueClaimants(hostname: string): void {
    const wanted = normalizeDnsName(hostname);
    this.#enqueueWhere((cd) => normalizeDnsName(cd.spec.hostname) === wanted);
  }

  /** True once every watch has listed. */
  get synced(): boolean {
    return this.#informers.every((i) => i.synced);
  }

  /** Starts the watches; workers start once every cache has listed, so no gate reads an empty cache. */
  start(): void {
    for (const informer of this.#informers) informer.start();
    this.#running = Array.from({ length: this.#d.workers }, () => this.#work());
  }

  async #waitForSync(): Promise<void> {
    while (!this.synced && !this.#stopping) await new Promise((r) => setTimeout(r, 50));
  }

  /** Stops the watches, lets each worker finish its current key, and returns. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(this.#informers.map((i) => i.stop()));
    this.#d.queue.shutDown();
    await Promise.all(this.#running);
  }

  async #work(): Promise<void> {
    await this.#waitForSync();
    for (;;) {
      const key = await this.#d.queue.get();
      if (key === undefined) return;
      this.#d.metrics.workqueueDepth.set({ controller: CONTROLLER }, this.#d.queue.length);
      await this.#process(key);
      this.#d.queue.done(key);
    }
  }

  async #process(key: string): Promise<void> {
    const end = this.#d.metrics.reconcileDuration.startTimer({ controller: CONTROLLER });
    try {
      const result = await this.#reconciler.reconcile(key);
      this.#d.queue.forget(key);
      if (result.requeueAfterMs !== undefined) this.#d.queue.addAfter(key, result.requeueAfterMs);
      this.#d.metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'success' });
    } catch (err) {
      if (isConflict(err)) {
        // Someone wrote the object since it was read: read it again, quietly.
        this.#d.metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'conflict' });
        this.#d.queue.addAfter(key, 100);
      } else {
        const retryInMs = this.#d.queue.addRateLimited(key);
        this.#d.metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'error' });
        this.#d.log.error({ err, key, retryInMs }, 'reconcile failed; retrying with backoff');
      }
    } finally {
      end();
    }
  }
}
