/**
 * The RateLimitPolicy controller (issue 4, "Compilation in the operator"). It watches every
 * RateLimitPolicy and the two rate-limit ConfigMaps in the operator's namespace, and runs two kinds
 * of reconcile on one de-duplicating work queue:
 *
 * - the config key: compile every policy (`compile.ts`) and server-side apply the result into the
 *   ConfigMap `portico-ratelimit-config` (key `config.json`) when it differs;
 * - a policy key (`namespace/name`): write its status, `Accepted` from the compilation and `Enforced`
 *   from the servers' load reports in `portico-ratelimit-status` (`enforced.ts`).
 *
 * A policy change queues its key and the config key; a new load report queues every policy. Workers
 * start only once every cache has listed, so the config is never compiled from an empty cache.
 * Hand edits of the config ConfigMap are repaired at the next policy change or resync (every
 * `resyncMs`), not at once.
 *
 * The operator's main starts it: `new RateLimitPolicyController({...}).start()`, `synced`, `stop()`.
 */
import {
  CustomObjectsApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObjectApi,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import {
  API_VERSION,
  FIELD_MANAGER,
  GROUP,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  VERSION,
  objectKey,
} from '../../api/customdomain.js';
import {
  DEFAULT_RATELIMIT_CONFIG_NAME,
  DEFAULT_RATELIMIT_STATUS_NAME,
  RATE_LIMIT_POLICY_KIND,
  RATE_LIMIT_POLICY_PLURAL,
  RATELIMIT_COMPONENT_LABEL,
  RATELIMIT_COMPONENT_VALUE,
  RATELIMIT_CONFIG_KEY,
  type RateLimitPolicy,
} from '../../api/ratelimitpolicy.js';
import { isConflict, isNotFound } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import { ResilientInformer } from '../../kube/informer.js';
import { WorkQueue } from '../../kube/work-queue.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import { parseReports } from '../../ratelimit/load-report.js';
import { compileConfig, compilePolicy, currentEntries } from './compile.js';
import { desiredStatus } from './status.js';

const CONTROLLER = 'ratelimitpolicy';
/** The queue key of the config reconcile; never a `namespace/name`, which always has a slash. */
const CONFIG_KEY = 'config';
const SELECTOR = `${RATELIMIT_COMPONENT_LABEL}=${RATELIMIT_COMPONENT_VALUE}`;

export interface RateLimitPolicyControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly objects: KubernetesObjectApi;
  readonly log: Logger;
  readonly metrics: ControllerMetrics;
  /** The operator's namespace: both rate-limit ConfigMaps live here. */
  readonly namespace: string;
  /** Default `portico-ratelimit-config` (the server's `--config-name`). */
  readonly configName?: string;
  /** Default `portico-ratelimit-status`. */
  readonly statusName?: string;
  /** Parallel reconciles (default 2). */
  readonly workers?: number;
  /** Milliseconds between full resyncs (default 600 000). */
  readonly resyncMs?: number;
  /** The clock (default `new Date()`). */
  readonly now?: () => Date;
  /** Records an Event on each condition transition, so `kubectl describe ratelimitpolicy` tells it. */
  readonly events?: EventRecorder;
}

/** Reasons that ask a person to act, recorded as Warning Events; the rest are Normal. */
const WARNING_REASONS = new Set(['InvalidSpec', 'ConfigRejected', 'NoRateLimitServer']);

export class RateLimitPolicyController {
  readonly #o: RateLimitPolicyControllerOptions;
  readonly #log: Logger;
  readonly #queue = new WorkQueue();
  readonly #customObjects: CustomObjectsApi;
  readonly #policies: ResilientInformer<RateLimitPolicy>;
  readonly #configMaps: ResilientInformer<V1ConfigMap>;
  readonly #configName: string;
  readonly #statusName: string;
  /** The generation of each policy the config was last queued for, by `namespace/name`. */
  readonly #seenGenerations = new Map<string, number | undefined>();
  #running: Promise<void>[] = [];
  #stopping = false;

  constructor(options: RateLimitPolicyControllerOptions) {
    this.#o = options;
    this.#log = options.log.child({ controller: CONTROLLER });
    this.#customObjects = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#configName = options.configName ?? DEFAULT_RATELIMIT_CONFIG_NAME;
    this.#statusName = options.statusName ?? DEFAULT_RATELIMIT_STATUS_NAME;
    const resyncMs = options.resyncMs ?? 600_000;
    this.#policies = new ResilientInformer<RateLimitPolicy>(options.kubeConfig, {
      path: `/apis/${GROUP}/${VERSION}/${RATE_LIMIT_POLICY_PLURAL}`,
      list: () => options.objects.list<RateLimitPolicy>(API_VERSION, RATE_LIMIT_POLICY_KIND),
      onChange: (policy, verb) => {
        const key = objectKey(policy);
        this.#queue.add(key);
        // The config depends on specs only: a status write (generation unchanged) needs no recompile.
        const generation = policy.metadata?.generation;
        if (verb === 'delete') this.#seenGenerations.delete(key);
        else if (this.#seenGenerations.get(key) === generation) return;
        else this.#seenGenerations.set(key, generation);
        this.#queue.add(CONFIG_KEY);
      },
      onResync: (policies) => {
        for (const p of policies) this.#queue.addLowPriority(objectKey(p));
        this.#queue.addLowPriority(CONFIG_KEY);
      },
      resyncMs,
      log: this.#log,
    });
    this.#configMaps = new ResilientInformer<V1ConfigMap>(options.kubeConfig, {
      path: `/api/v1/namespaces/${options.namespace}/configmaps`,
      list: () =>
        options.objects.list<V1ConfigMap>(
          'v1',
          'ConfigMap',
          options.namespace,
          undefined,
          undefined,
          undefined,
          undefined,
          SELECTOR,
        ),
      labelSelector: SELECTOR,
      onChange: (cm) => {
        if (cm.metadata?.name === this.#statusName) this.#enqueuePolicies();
      },
      resyncMs: 0,
      log: this.#log,
    });
  }

  /** True once both watches have listed. */
  get synced(): boolean {
    return this.#policies.synced && this.#configMaps.synced;
  }

  /** Starts the watches and the workers (which wait for the caches). */
  start(): void {
    this.#policies.start();
    this.#configMaps.start();
    this.#queue.add(CONFIG_KEY);
    this.#running = Array.from({ length: this.#o.workers ?? 2 }, () => this.#work());
  }

  /** Stops the watches, lets each worker finish its key, and returns. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all([this.#policies.stop(), this.#configMaps.stop()]);
    this.#queue.shutDown();
    await Promise.all(this.#running);
  }

  #enqueuePolicies(): void {
    for (const p of this.#policies.list()) this.#queue.add(objectKey(p));
  }

  async #work(): Promise<void> {
    while (!this.synced && !this.#stopping) await new Promise((r) => setTimeout(r, 50));
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      this.#o.metrics.workqueueDepth.set({ controller: CONTROLLER }, this.#queue.length);
      await this.#process(key);
      this.#queue.done(key);
    }
  }

  async #process(key: string): Promise<void> {
    const metrics = this.#o.metrics;
    const end = metrics.reconcileDuration.startTimer({ controller: CONTROLLER });
    try {
      const requeueAfterMs =
        key === CONFIG_KEY ? await this.#reconcileConfig() : await this.#reconcilePolicy(key);
      this.#queue.forget(key);
      if (requeueAfterMs !== undefined) this.#queue.addAfter(key, requeueAfterMs);
      metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'success' });
    } catch (err) {
      if (isConflict(err)) {
        metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'conflict' });
        this.#queue.addAfter(key, 100);
      } else {
        const retryInMs = this.#queue.addRateLimited(key);
        metrics.reconcileTotal.inc({ controller: CONTROLLER, result: 'error' });
        this.#log.error({ err, key, retryInMs }, 'reconcile failed; retrying with backoff');
      }
    } finally {
      end();
    }
  }

  #configMap(name: string): V1ConfigMap | undefined {
    return this.#configMaps.get(name, this.#o.namespace);
  }

  /** Compiles every policy and applies the ConfigMap when its text changes. */
  async #reconcileConfig(): Promise<number | undefined> {
    const existing = this.#configMap(this.#configName)?.data?.[RATELIMIT_CONFIG_KEY];
    const text = compileConfig(this.#policies.list(), currentEntries(existing));
    if (text === existing) return undefined;
    await this.#o.objects.patch(
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: this.#configName,
          namespace: this.#o.namespace,
          labels: {
            [MANAGED_BY_LABEL]: MANAGED_BY_VALUE,
            [RATELIMIT_COMPONENT_LABEL]: RATELIMIT_COMPONENT_VALUE,
          },
        },
        data: { [RATELIMIT_CONFIG_KEY]: text },
      },
      undefined,
      undefined,
      FIELD_MANAGER,
      true,
      PatchStrategy.ServerSideApply,
    );
    this.#log.info({ configMap: `${this.#o.namespace}/${this.#configName}` }, 'rate-limit config applied');
    return undefined;
  }

  /** Writes one policy's status. Returns when to look again, in milliseconds. */
  async #reconcilePolicy(key: string): Promise<number | undefined> {
    const slash = key.indexOf('/');
    const policy = this.#policies.get(key.slice(slash + 1), key.slice(0, slash));
    if (policy === undefined) {
      this.#queue.remove(key);
      return undefined;
    }
    const { status, recheckAfterMs } = desiredStatus({
      policy,
      compiled: compilePolicy(policy),
      reports: parseReports(this.#configMap(this.#statusName)?.data),
      now: this.#o.now?.() ?? new Date(),
      configConfigMap: `${this.#o.namespace}/${this.#configName}`,
      statusConfigMap: `${this.#o.namespace}/${this.#statusName}`,
    });
    if (isDeepStrictEqual(JSON.parse(JSON.stringify(status)), policy.status ?? {})) return recheckAfterMs;
    try {
      await this.#customObjects.replaceNamespacedCustomObjectStatus({
        group: GROUP,
        version: VERSION,
        namespace: policy.metadata.namespace,
        plural: RATE_LIMIT_POLICY_PLURAL,
        name: policy.metadata.name,
        body: { ...policy, status },
        fieldManager: FIELD_MANAGER,
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    // The conditions whose status or reason changed: a Warning Event each where a person must act,
    // one Normal Event for the rest.
    await this.#o.events?.recordTransitions(
      { apiVersion: API_VERSION, kind: RATE_LIMIT_POLICY_KIND, metadata: policy.metadata },
      policy.status?.conditions,
      status.conditions ?? [],
      WARNING_REASONS,
    );
    const enforced = status.conditions?.find((c) => c.type === 'Enforced');
    this.#log.info(
      { key, generation: status.observedGeneration, enforced: enforced?.status, reason: enforced?.reason },
      'status updated',
    );
    return recheckAfterMs;
  }
}
