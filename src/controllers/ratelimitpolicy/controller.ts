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
 * With Contour attachment on (`contour`), a policy's `spec.targetRefs` are wired too
 * (docs/ratelimits.md, "Attaching to Contour"; attachment.ts, contour-attacher.ts): the policy
 * reconcile applies its descriptors to each target HTTPProxy under the policy's own field manager
 * and sets `Attached`; a change of an HTTPProxy queues the policies that target it; an
 * `httpproxy:<namespace>/<name>` key removes the fields of policies that no longer target it
 * (deleted, or the target taken out of the list); the `extensionservice` key applies the
 * ExtensionService Contour's config names (at start and every resync). The HTTPProxy watch does not
 * hold back the workers: without Contour's CRD the rest still runs, and targeted policies say so
 * (Attached=Unknown, TargetsNotRead).
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
import {
  attachedCondition,
  attachmentFieldManager,
  isSupportedTarget,
  targetsOf,
  targetVerdict,
  type HTTPProxy,
  type TargetOutcome,
  type TargetVerdict,
} from './attachment.js';
import { compilePolicy } from './compile.js';
import { ContourAttacher, type ContourAttachmentOptions } from './contour-attacher.js';
import { EnvoyGatewayAttacher, targetKey } from './envoy-gateway-attacher.js';
import {
  ENVOY_GATEWAY_PENDING_MS,
  EPP_LIST_KEY,
  envoyGatewayVerdicts,
  envoyGatewayWatch,
  envoyPatchPolicyKey,
  isEnvoyGatewayKey,
  reconcileEnvoyGatewayKey,
} from './envoy-gateway-keys.js';
import type { RateLimitServiceTarget } from '../../routing/envoy-gateway-ratelimit.js';
import { liveReports } from './enforced.js';
import { reportChanges, type ReportChanges } from './report-changes.js';
import { ReportLiveness } from './report-liveness.js';
import { ConfigShardWriter } from './shard-writer.js';
import { desiredStatus } from './status.js';

const CONTROLLER = 'ratelimitpolicy';
/** The queue key of the config reconcile; never a `namespace/name`, which always has a slash. */
const CONFIG_KEY = 'config';
/** The queue key of the ExtensionService. */
const EXTENSION_SERVICE_KEY = 'extensionservice';
/** The prefix of an HTTPProxy's sweep key (`httpproxy:<namespace>/<name>`); ':' is in no namespace. */
const PROXY_KEY_PREFIX = 'httpproxy:';
/** How often the controller looks whether the HTTPProxies have been listed, until they have. */
const PROXIES_LISTED_POLL_MS = 1_000;
/** How soon the ExtensionService is applied again while the API server does not serve the kind. */
const EXTENSION_SERVICE_RETRY_MS = 60_000;
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
  /** Attaching `spec.targetRefs` to Contour's HTTPProxies; undefined: off (`--contour-attachment=false`). */
  readonly contour?: ContourAttachmentOptions | undefined;
  /**
   * Attaching HTTPRoute `spec.targetRefs` through an EnvoyPatchPolicy per Gateway: where Envoy finds
   * the rate-limit service; undefined: off (`--envoy-gateway-attachment=false`).
   */
  readonly envoyGateway?: RateLimitServiceTarget | undefined;
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
  /** The HTTPProxy side (undefined when Contour attachment is off). */
  readonly #contour: ContourAttacher | undefined;
  /** The EnvoyPatchPolicy side (undefined when Envoy Gateway attachment is off). */
  readonly #envoyGateway: EnvoyGatewayAttacher | undefined;
  /** Looks whether the HTTPProxies have been listed, until they have. */
  #listedPoll: NodeJS.Timeout | undefined;

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
        if (this.#contour !== undefined) this.#queue.addLowPriority(EXTENSION_SERVICE_KEY);
        if (this.#envoyGateway !== undefined) this.#queue.addLowPriority(EPP_LIST_KEY);
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
    this.#contour =
      options.contour === undefined
        ? undefined
        : new ContourAttacher({
            kubeConfig: options.kubeConfig,
            objects: options.objects,
            options: options.contour,
            log: this.#log,
            resyncMs,
            onProxy: (proxy) => {
              this.#onProxy(proxy);
            },
          });
    this.#envoyGateway =
      options.envoyGateway === undefined
        ? undefined
        : new EnvoyGatewayAttacher({
            kubeConfig: options.kubeConfig,
            objects: options.objects,
            service: options.envoyGateway,
            log: this.#log,
            watch: envoyGatewayWatch(this.#policies, this.#queue),
          });
  }

  /**
   * Once the HTTPProxies have been listed (looked at every second; one timer, not one per policy),
   * queues every policy with targets: their Attached was Unknown until then.
   */
  #awaitProxiesListed(): void {
    this.#listedPoll = setInterval(() => {
      if (this.#contour?.listed !== true) return;
      clearInterval(this.#listedPoll);
      for (const p of this.#policies.list()) if (targetsOf(p).length > 0) this.#queue.add(objectKey(p));
    }, PROXIES_LISTED_POLL_MS);
    this.#listedPoll.unref();
  }

  /** Queues the policies that target the HTTPProxy, and its sweep when Portico has fields on it. */
  #onProxy(proxy: HTTPProxy): void {
    const { namespace, name } = proxy.metadata;
    for (const p of this.#policies.list(namespace)) {
      if (targetsOf(p).some((r) => isSupportedTarget(r) && r.name === name)) this.#queue.add(objectKey(p));
    }
    if ((this.#contour?.managersOn(namespace, name).length ?? 0) > 0) {
      this.#queue.add(`${PROXY_KEY_PREFIX}${namespace}/${name}`);
    }
  }

  /** True once both watches have listed. */
  get synced(): boolean {
    return this.#policies.synced && this.#configMaps.synced;
  }

  /** Starts the watches and the workers (which wait for the caches). */
  start(): void {
    for (const w of [this.#policies, this.#configMaps, this.#contour, this.#envoyGateway]) w?.start();
    this.#queue.add(CONFIG_KEY);
    if (this.#envoyGateway !== undefined) this.#queue.add(EPP_LIST_KEY);
    if (this.#contour !== undefined) {
      this.#queue.add(EXTENSION_SERVICE_KEY);
      this.#awaitProxiesListed();
    }
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
    clearInterval(this.#listedPoll);
    this.#liveness.stop();
    await Promise.all([this.#policies.stop(), this.#configMaps.stop(), this.#contour?.stop()]);
    await this.#envoyGateway?.stop();
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

  /** The reconcile of one key of the queue: the config shards, the extension service, a swept HTTPProxy, or a policy. */
  async #reconcileKey(key: string): Promise<number | undefined> {
    if (key === CONFIG_KEY) return this.#shards.reconcile(this.#policies.list(), this.#retainedShards());
    if (key === EXTENSION_SERVICE_KEY) return this.#applyExtensionService();
    if (key.startsWith(PROXY_KEY_PREFIX)) {
      await this.#sweepProxy(key.slice(PROXY_KEY_PREFIX.length));
      return undefined;
    }
    return this.#reconcilePolicy(key);
  }

  /**
   * The `Attached` condition of a policy, wiring its targets on the way (undefined: no targets).
   * Unknown (`TargetsNotRead`) until the HTTPProxies are listed; every policy with targets is queued
   * again then (`#awaitProxiesListed`).
   */
  async #attach(
    policy: RateLimitPolicy,
  ): Promise<{ condition: ConditionInput | undefined; requeueAfterMs?: number }> {
    const targets = targetsOf(policy);
    if (targets.length === 0) return { condition: undefined };
    const eg = await envoyGatewayVerdicts(this.#envoyGateway, policy, this.#policies.list(), (k) => {
      this.#queue.add(k);
    });
    const withEnvoyGateway = (verdicts: readonly TargetVerdict[]): TargetVerdict[] =>
      verdicts.map((v) => eg.verdicts.get(targetKey(v.ref)) ?? v);
    const requeue = eg.pending ? { requeueAfterMs: ENVOY_GATEWAY_PENDING_MS } : {};
    const contour = this.#contour;
    if (contour === undefined) {
      const outcome = (supported: boolean): TargetOutcome => ({
        kind: supported ? 'disabled' : 'unsupported',
      });
      const verdicts = targets.map((r) =>
        targetVerdict(r, outcome(isSupportedTarget(r)), policy.metadata.namespace),
      );
      return { condition: attachedCondition(withEnvoyGateway(verdicts)), ...requeue };
    }
    if (!contour.listed && targets.some(isSupportedTarget)) {
      const reason: RateLimitAttachedReason = 'TargetsNotRead';
      return {
        condition: {
          type: 'Attached',
          status: 'Unknown',
          reason,
          message: `the operator has not listed HTTPProxies yet (is Contour's HTTPProxy CRD installed, and may the operator list them?)`,
        },
      };
    }
    return { condition: attachedCondition(withEnvoyGateway(await contour.attach(policy))), ...requeue };
  }

  /** Applies the ExtensionService; while Contour's CRDs are not installed, looks again in a minute. */
  async #applyExtensionService(): Promise<number | undefined> {
    const served = await this.#contour?.applyExtensionService();
    return served === false ? EXTENSION_SERVICE_RETRY_MS : undefined;
  }

  /** Queues the sweep of each HTTPProxy of `namespace` that carries fields of the policy `name`. */
  #sweepUntargeted(namespace: string, name: string, targeted: ReadonlySet<string>): void {
    const manager = attachmentFieldManager(name);
    for (const proxy of this.#contour?.proxiesWithManager(namespace, manager) ?? []) {
      if (!targeted.has(proxy)) this.#queue.add(`${PROXY_KEY_PREFIX}${namespace}/${proxy}`);
    }
  }

  /**
   * Removes from one HTTPProxy the fields of every policy that no longer targets it (deleted, the
   * target taken out of its list, or the HTTPProxy no longer a root proxy).
   */
  async #sweepProxy(proxyKey: string): Promise<void> {
    const contour = this.#contour;
    if (contour === undefined) return;
    const slash = proxyKey.indexOf('/');
    const namespace = proxyKey.slice(0, slash);
    const name = proxyKey.slice(slash + 1);
    const proxy = contour.proxy(namespace, name);
    if (proxy === undefined) return;
    const wanted = new Set(
      proxy.spec?.virtualhost === undefined
        ? []
        : this.#policies
            .list(namespace)
            .filter((p) => targetsOf(p).some((r) => isSupportedTarget(r) && r.name === name))
            .map((p) => attachmentFieldManager(p.metadata.name)),
    );
    for (const manager of contour.managersOn(namespace, name)) {
      if (!wanted.has(manager)) await contour.release(namespace, name, manager);
    }
  }

  /** Writes one policy's status (nothing when it is as desired); returns when to look again, if due. */
  async #reconcilePolicy(key: string): Promise<number | undefined> {
    if (isEnvoyGatewayKey(key)) {
      const enqueue = (k: string): void => {
        this.#queue.add(k);
      };
      await reconcileEnvoyGatewayKey(
        this.#envoyGateway,
        key,
        this.#policies.list(),
        enqueue,
        (k) => this.#policy(k) !== undefined,
      );
      return undefined;
    }
    const policy = this.#policy(key);
    if (policy === undefined) {
      this.#queue.remove(key);
      const slash = key.indexOf('/');
      this.#sweepUntargeted(key.slice(0, slash), key.slice(slash + 1), new Set());
      for (const gateway of (await this.#envoyGateway?.gatewaysCarrying(key)) ?? [])
        this.#queue.add(envoyPatchPolicyKey(gateway));
      return undefined;
    }
    const attached = await this.#attach(policy);
    this.#sweepUntargeted(
      policy.metadata.namespace,
      policy.metadata.name,
      new Set(
        targetsOf(policy)
          .filter(isSupportedTarget)
          .map((r) => r.name),
      ),
    );
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
