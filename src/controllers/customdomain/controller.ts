/**
 * Wires the CustomDomain reconcile to the cluster: watches CustomDomains and the Ingresses and
 * Secrets Portico owns (label-selected, so no other Secret is cached), feeds a de-duplicating work
 * queue, and runs N workers. A failure on one key is retried with backoff and never blocks another.
 */
import type {
  KubeConfig,
  KubernetesListObject,
  KubernetesObject,
  KubernetesObjectApi,
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
} from '../../api/customdomain.js';
import { isConflict } from '../../kube/errors.js';
import { ResilientInformer } from '../../kube/informer.js';
import { WorkQueue } from '../../kube/work-queue.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import type { CustomDomainReconciler } from './reconciler.js';

const CONTROLLER = 'customdomain';
const OWNED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${CUSTOM_DOMAIN_LABEL}`;

export interface CustomDomainControllerDeps {
  kubeConfig: KubeConfig;
  objects: KubernetesObjectApi;
  reconciler: CustomDomainReconciler;
  queue: WorkQueue;
  metrics: ControllerMetrics;
  log: Logger;
  workers: number;
  resyncMs: number;
}

export class CustomDomainController {
  readonly #d: CustomDomainControllerDeps;
  readonly #informers: ResilientInformer<KubernetesObject>[];
  #running: Promise<void>[] = [];

  constructor(deps: CustomDomainControllerDeps) {
    this.#d = deps;
    const list =
      (apiVersion: string, kind: string, labelSelector?: string) =>
      (): Promise<KubernetesListObject<KubernetesObject>> =>
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
    const enqueueOwner = (obj: KubernetesObject): void => {
      const owner = obj.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
      if (owner) deps.queue.add(`${obj.metadata?.namespace ?? ''}/${owner}`);
    };
    this.#informers = [
      new ResilientInformer(deps.kubeConfig, {
        path: `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
        list: list(`${GROUP}/${VERSION}`, 'CustomDomain'),
        onChange: (obj) => {
          deps.queue.add(objectKey(obj));
        },
        onResync: (objects) => {
          for (const obj of objects) deps.queue.add(objectKey(obj));
        },
        resyncMs: deps.resyncMs,
        log: deps.log,
      }),
      new ResilientInformer(deps.kubeConfig, {
        path: '/apis/networking.k8s.io/v1/ingresses',
        list: list('networking.k8s.io/v1', 'Ingress', OWNED_SELECTOR),
        labelSelector: OWNED_SELECTOR,
        onChange: enqueueOwner,
        resyncMs: 0,
        log: deps.log,
      }),
      new ResilientInformer(deps.kubeConfig, {
        path: '/api/v1/secrets',
        list: list('v1', 'Secret', OWNED_SELECTOR),
        labelSelector: OWNED_SELECTOR,
        onChange: enqueueOwner,
        resyncMs: 0,
        log: deps.log,
      }),
    ];
  }

  /** True once every watch has listed. */
  get synced(): boolean {
    return this.#informers.every((i) => i.synced);
  }

  start(): void {
    for (const informer of this.#informers) informer.start();
    this.#running = Array.from({ length: this.#d.workers }, () => this.#work());
  }

  /** Stops the watches, lets each worker finish its current key, and returns. */
  async stop(): Promise<void> {
    await Promise.all(this.#informers.map((i) => i.stop()));
    this.#d.queue.shutDown();
    await Promise.all(this.#running);
  }

  async #work(): Promise<void> {
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
      const result = await this.#d.reconciler.reconcile(key);
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
