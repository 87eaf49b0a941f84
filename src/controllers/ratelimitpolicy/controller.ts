/**
 * The RateLimitPolicy controller (docs/ratelimits.md, "The compiled config" and "Conditions"). It
 * watches every RateLimitPolicy and the rate-limit ConfigMaps in the operator's namespace, and runs
 * two kinds of reconcile on one de-duplicating work queue:
 *
 * - the config key: compile every policy (`compile.ts`), spread the entries over the config shards
 *   (`portico-ratelimit-config`, `portico-ratelimit-config-1`, ...; `shards.ts`) and server-side apply
 *   each shard whose text changes (key `config.json`), so one policy change writes one shard or two
 *   (`ConfigShardWriter`, shard-writer.ts);
 * - a policy key (`namespace/name`): write its status, `Accepted` from the compilation and the shard
 *   that holds it, `Enforced` from the servers' load reports in `portico-ratelimit-status`
 *   (`enforced.ts`).
 *
 * A policy change queues its key and the config key; a change of the load reports queues the policies
 * it concerns (report-changes.ts), and every policy when the set of live reports changes; a shard
 * change queues the policies whose entries it changed. Workers start only once every cache has
 * listed, so the config is never compiled from an empty cache. A shard deleted by hand is re-created
 * at once (the servers keep enforcing what they loaded from it meanwhile); hand edits of a shard are
 * repaired at the next policy change or resync (every `resyncMs`), not at once.
 *
 * A policy's `spec.targetRefs` are wired by the data planes' attachers whose flag is on
 * (`attachers`: data-planes/attacher-registry.ts, each data plane's `attacher.ts`; e.g. Contour's,
 * docs/ratelimits.md, "Attaching to Contour", and Envoy Gateway's, docs/routing.md): the policy
 * reconcile asks each for the verdicts of the targets of its kinds and sets `Attached` from them (a
 * target of a data plane whose flag is off, or of no data plane, says so); an attacher's own queue
 * keys (e.g. Contour's `extensionservice` and `httpproxy:<namespace>/<name>`) are reconciled by it,
 * and its watches queue the policies a change concerns. An attacher's watch does not hold back the
 * workers: without its CRD the rest still runs, and its targeted policies say so (Attached=Unknown,
 * TargetsNotRead).
 *
 * The operator's main starts it: `new RateLimitPolicyController({...}).start()`, `synced`, `stop()`.
 */
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObjectApi,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { API_VERSION, FIELD_MANAGER, GROUP, VERSION, objectKey } from '../../api/customdomain.js';
import {
  DEFAULT_RATELIMIT_CONFIG_NAME,
  DEFAULT_RATELIMIT_STATUS_NAME,
  RATE_LIMIT_POLICY_KIND,
  RATE_LIMIT_POLICY_PLURAL,
  RATELIMIT_COMPONENT_LABEL,
  RATELIMIT_COMPONENT_VALUE,
  type RateLimitPolicy,
} from '../../api/ratelimitpolicy.js';
import { RATE_LIMIT_ATTACHED_REASONS, type RateLimitAttachedReason } from '../../api/reasons.js';
import { findCondition, type ConditionInput } from '../../kube/conditions.js';
import { isNotFound } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import { ResilientInformer } from '../../kube/informer.js';
import { WorkQueue } from '../../kube/work-queue.js';
import { runWorkers } from '../../kube/workers.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import { parseReports, policyToken, type LoadReport } from '../../ratelimit/load-report.js';
import { RATE_LIMIT_ATTACHERS } from '../../data-planes/attacher-registry.js';
import {
  isAttachmentTarget,
  targetKey,
  type AttachResult,
  type RateLimitAttacher,
  type RateLimitAttacherModule,
  type RateLimitWiring,
} from '../../data-planes/types.js';
import { attachedCondition, targetsOf, targetVerdict, type TargetVerdict } from './attachment.js';
import { compilePolicy } from './compile.js';
import { liveReports } from './enforced.js';
import { reportChanges, type ReportChanges } from './report-changes.js';
import { ReportLiveness } from './report-liveness.js';
import { ConfigShardWriter } from './shard-writer.js';
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
  /** The operator's namespace: the rate-limit ConfigMaps live here. */
  readonly namespace: string;
  /** Default `portico-ratelimit-config` (the server's `--config-name`): shard 0 and the others' prefix. */
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
  /**
   * The data planes whose rate-limit attachment is on (their `--<name>-attachment` flags), by data
   * plane name, with where their proxies find the rate-limit service; a data plane not named: off.
   */
  readonly attachments?: ReadonlyMap<string, RateLimitWiring>;
  /** The attachers to choose from (default: data-planes/attacher-registry.ts's). */
  readonly attachers?: readonly RateLimitAttacherModule[];
}

/** Reasons that ask a person to act, recorded as Warning Events; the rest are Normal. */
const WARNING_REASONS = new Set([
  'InvalidSpec',
  'ConfigRejected',
  'NoRateLimitServer',
  ...Object.entries(RATE_LIMIT_ATTACHED_REASONS)
    .filter(([, entry]) => entry.severity === 'Warning')
    .map(([reason]) => reason),
]);

export class RateLimitPolicyController {
  readonly #o: RateLimitPolicyControllerOptions;
  readonly #log: Logger;
  readonly #queue = new WorkQueue(undefined, { name: 'ratelimitpolicy' });
  readonly #customObjects: CustomObjectsApi;
  readonly #policies: ResilientInformer<RateLimitPolicy>;
  readonly #configMaps: ResilientInformer<V1ConfigMap>;
  readonly #configName: string;
  readonly #statusName: string;
  /** The generation of each policy the config was last queued for, by `namespace/name`. */
  readonly #seenGenerations = new Map<string, number | undefined>();
  /** The config shards: the cache's, parsed, and their writes (shard-writer.ts). */
  readonly #shards: ConfigShardWriter;
  /**
   * The load reports of the status ConfigMap, parsed once per resourceVersion: every policy's verdict
   * reads them.
   */
  #reports: { resourceVersion: string; list: LoadReport[] } = { resourceVersion: '', list: [] };
  /** Which reports are live; queues every policy when that changes. */
  readonly #liveness: ReportLiveness;
  /** `policyToken` of each cached policy object (a new object, a new token), computed once. */
  readonly #tokens = new WeakMap<RateLimitPolicy, string>();
  #running: Promise<void>[] = [];
  #stopping = false;
  /** Every registered attacher, with its instance where its flag is on. */
  readonly #attachers: { readonly module: RateLimitAttacherModule; readonly on?: RateLimitAttacher }[];

  constructor(options: RateLimitPolicyControllerOptions) {
    this.#o = options;
    this.#log = options.log.child({ controller: CONTROLLER });
    this.#customObjects = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#configName = options.configName ?? DEFAULT_RATELIMIT_CONFIG_NAME;
    this.#statusName = options.statusName ?? DEFAULT_RATELIMIT_STATUS_NAME;
    this.#shards = new ConfigShardWriter({
      objects: options.objects,
      log: this.#log,
      namespace: options.namespace,
      configName: this.#configName,
      enqueuePolicy: (key) => {
        this.#queue.add(key);
      },
      enqueueConfig: () => {
        this.#queue.add(CONFIG_KEY);
      },
    });
    this.#liveness = new ReportLiveness(
      () => this.#nowMs(),
      () => {
        this.#enqueuePolicies();
      },
    );
    const resyncMs = options.resyncMs ?? 600_000;
    this.#policies = new ResilientInformer<RateLimitPolicy>(options.kubeConfig, {
      path: `/apis/${GROUP}/${VERSION}/${RATE_LIMIT_POLICY_PLURAL}`,
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
        for (const key of this.#attacherKeys()) this.#queue.addLowPriority(key);
      },
      resyncMs,
      log: this.#log,
    });
    this.#configMaps = new ResilientInformer<V1ConfigMap>(options.kubeConfig, {
      path: `/api/v1/namespaces/${options.namespace}/configmaps`,
      labelSelector: SELECTOR,
      onChange: (cm, verb) => {
        this.#onConfigMap(cm, verb);
      },
      resyncMs: 0,
      log: this.#log,
    });
    this.#attachers = (options.attachers ?? RATE_LIMIT_ATTACHERS).map((module) => {
      const wiring = options.attachments?.get(module.dataPlane.name);
      if (wiring === undefined) return { module };
      const on = module.create({
        kubeConfig: options.kubeConfig,
        objects: options.objects,
        log: this.#log,
        resyncMs,
        wiring,
        policies: {
          list: (namespace) => this.#policies.list(namespace),
          get: (key) => this.#policy(key),
        },
        enqueue: (key) => {
          this.#queue.add(key);
        },
      });
      return { module, on };
    });
  }

  /** The attachers whose flag is on. */
  #on(): RateLimitAttacher[] {
    return this.#attachers.flatMap((a) => (a.on === undefined ? [] : [a.on]));
  }

  /** The keys of the attachers on that are queued at start and every resync. */
  #attacherKeys(): string[] {
    return this.#on().flatMap((a) => a.resyncKeys);
  }

  /** True once both watches have listed. */
  get synced(): boolean {
    return this.#policies.synced && this.#configMaps.synced;
  }

  /** Starts the watches and the workers (which wait for the caches). */
  start(): void {
    for (const w of [this.#policies, this.#configMaps, ...this.#on()]) w.start();
    this.#queue.add(CONFIG_KEY);
    for (const key of this.#attacherKeys()) this.#queue.add(key);
    this.#running = runWorkers(this.#o.workers ?? 2, {
      controller: CONTROLLER,
      queue: this.#queue,
      metrics: this.#o.metrics,
      log: this.#log,
      reconcile: (key) => this.#reconcileKey(key),
      synced: () => this.synced,
      stopping: () => this.#stopping,
    });
  }

  /** Stops the watches, lets each worker finish its key, and returns. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#liveness.stop();
    await Promise.all([this.#policies.stop(), this.#configMaps.stop(), ...this.#on().map((a) => a.stop())]);
    this.#queue.shutDown();
    await Promise.all(this.#running);
  }

  #enqueuePolicies(): void {
    for (const p of this.#policies.list()) this.#queue.add(objectKey(p));
  }

  #onConfigMap(cm: V1ConfigMap, verb: 'add' | 'update' | 'delete'): void {
    const name = cm.metadata?.name ?? '';
    if (name === this.#statusName) {
      this.#onReports(verb === 'delete' ? undefined : cm);
      return;
    }
    this.#shards.onConfigMap(cm, verb);
  }

  /**
   * A new reading of the status ConfigMap (undefined: deleted): parses it once, and queues the
   * policies whose verdict it may change (`reportChanges`), not every policy at every heartbeat.
   */
  #onReports(status: V1ConfigMap | undefined): void {
    const resourceVersion = status?.metadata?.resourceVersion ?? '';
    if (status !== undefined && resourceVersion === this.#reports.resourceVersion) return;
    const list = parseReports(status?.data);
    const changes = reportChanges(this.#reports.list, list);
    this.#reports = { resourceVersion, list };
    this.#enqueueConcerned(changes);
    this.#liveness.update(list);
    // A server holds policies of a shard that is gone: write it again.
    if (this.#retainedShards().some((s) => !this.#shards.has(s))) this.#queue.add(CONFIG_KEY);
  }

  /** Queues the policies `changes` concerns. */
  #enqueueConcerned(changes: ReportChanges): void {
    if (changes.all) {
      this.#enqueuePolicies();
      return;
    }
    for (const domain of changes.domains) if (this.#policy(domain) !== undefined) this.#queue.add(domain);
    if (changes.tokens.size === 0) return;
    for (const p of this.#policies.list()) {
      let token = this.#tokens.get(p);
      if (token === undefined) {
        token = policyToken(p.metadata.uid ?? '');
        this.#tokens.set(p, token);
      }
      if (changes.tokens.has(token)) this.#queue.add(objectKey(p));
    }
  }

  /** The cached policy of a key (`namespace/name`, its rate-limit domain too). */
  #policy(key: string): RateLimitPolicy | undefined {
    const slash = key.indexOf('/');
    return this.#policies.get(key.slice(slash + 1), key.slice(0, slash));
  }

  #nowMs(): number {
    return this.#o.now?.().getTime() ?? Date.now();
  }

  /** Names of shards a live rate-limit server still enforces policies of after their deletion. */
  #retainedShards(): string[] {
    return liveReports(this.#reports.list, this.#liveness.judgedAtMs)
      .flatMap((r) => r.retainedShards ?? [])
      .filter((name) => this.#shards.isShardName(name));
  }

  /** The reconcile of one key of the queue: the config shards, an attacher's own key, or a policy. */
  async #reconcileKey(key: string): Promise<number | undefined> {
    if (key === CONFIG_KEY) return this.#shards.reconcile(this.#policies.list(), this.#retainedShards());
    const owner = this.#on().find((a) => a.ownsKey(key));
    if (owner !== undefined) return owner.reconcileKey(key);
    return this.#reconcilePolicy(key);
  }

  /**
   * The `Attached` condition of a policy, wiring its targets on the way (undefined: no targets):
   * each target's verdict from the attacher of its kind whose flag is on, else that data plane's
   * disabled verdict, else UnsupportedTarget. Unknown (`TargetsNotRead`) while an attacher has not
   * listed what it reads; it queues the policies again then.
   */
  async #attach(
    policy: RateLimitPolicy,
  ): Promise<{ condition: ConditionInput | undefined; requeueAfterMs?: number }> {
    const targets = targetsOf(policy);
    if (targets.length === 0) return { condition: undefined };
    const results = new Map<RateLimitAttacherModule, AttachResult>();
    for (const a of this.#attachers) if (a.on !== undefined) results.set(a.module, await a.on.attach(policy));
    let requeueAfterMs: number | undefined;
    for (const result of results.values()) {
      if ('notRead' in result) {
        const reason: RateLimitAttachedReason = 'TargetsNotRead';
        return { condition: { type: 'Attached', status: 'Unknown', reason, message: result.notRead } };
      }
      if (result.requeueAfterMs !== undefined)
        requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, result.requeueAfterMs);
    }
    const verdicts = targets.map((ref): TargetVerdict => {
      const attacher = this.#attachers.find((a) => isAttachmentTarget(a.module.dataPlane, ref));
      if (attacher === undefined)
        return targetVerdict(ref, { kind: 'unsupported' }, policy.metadata.namespace);
      const result = results.get(attacher.module);
      if (result === undefined) return attacher.module.disabledVerdict(ref);
      const verdict = 'verdicts' in result ? result.verdicts.get(targetKey(ref)) : undefined;
      return verdict ?? targetVerdict(ref, { kind: 'unsupported' }, policy.metadata.namespace);
    });
    return {
      condition: attachedCondition(verdicts),
      ...(requeueAfterMs === undefined ? {} : { requeueAfterMs }),
    };
  }

  /** Writes one policy's status (nothing when it is as desired); returns when to look again, if due. */
  async #reconcilePolicy(key: string): Promise<number | undefined> {
    const policy = this.#policy(key);
    const slash = key.indexOf('/');
    const [namespace, name] = [key.slice(0, slash), key.slice(slash + 1)];
    if (policy === undefined) {
      this.#queue.remove(key);
      for (const a of this.#on()) await a.settle(namespace, name, undefined);
      return undefined;
    }
    const attached = await this.#attach(policy);
    for (const a of this.#on()) await a.settle(namespace, name, policy);
    await this.#writeStatus(policy, attached.condition);
    return attached.requeueAfterMs;
  }

  /** Writes the status of `policy` with `attached` (nothing when it is as desired). */
  async #writeStatus(policy: RateLimitPolicy, attached: ConditionInput | undefined): Promise<void> {
    const key = objectKey(policy);
    const status = desiredStatus({
      policy,
      compiled: compilePolicy(policy),
      reports: this.#reports.list,
      now: this.#o.now?.() ?? new Date(),
      reportsJudgedAtMs: this.#liveness.judgedAtMs,
      ...this.#shards.whereabouts(policy),
      statusConfigMap: `${this.#o.namespace}/${this.#statusName}`,
      attached,
    });
    if (isDeepStrictEqual(JSON.parse(JSON.stringify(status)), policy.status ?? {})) return;
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
      if (isNotFound(err)) return;
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
    const enforced = findCondition(status.conditions, 'Enforced');
    this.#log.info(
      { key, generation: status.observedGeneration, enforced: enforced?.status, reason: enforced?.reason },
      'status updated',
    );
  }
}
