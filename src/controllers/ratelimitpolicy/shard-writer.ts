/**
 * The config shards' side of the RateLimitPolicy controller (docs/ratelimits.md, "The compiled
 * config"): keeps the shards the cache holds, parsed once per resourceVersion; runs the config
 * reconcile (compile every policy, plan the shards with `planShards`, shards.ts, and server-side apply
 * each shard whose text changes, in an order that never hides a moving policy from the servers); and
 * tells a policy's status which shard holds it, or why none does yet.
 *
 * The controller (controller.ts) owns the queue: it hands this class the shard ConfigMaps its watch
 * sees and the config reconcile's key, and gives it `enqueuePolicy` (queue a policy's
 * `namespace/name`) and `enqueueConfig` (queue the config reconcile).
 */
import type { KubernetesObjectApi, V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE, objectKey } from '../../api/customdomain.js';
import {
  RATELIMIT_COMPONENT_LABEL,
  RATELIMIT_COMPONENT_VALUE,
  RATELIMIT_CONFIG_KEY,
  type RateLimitPolicy,
} from '../../api/ratelimitpolicy.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import {
  CONFIG_SHARD_BUDGET_BYTES,
  configShardIndex,
  type CompiledPolicy,
} from '../../ratelimit/config-schema.js';
import { desiredEntries, readShard } from './compile.js';
import { planShards, type CurrentShard, type ShardPlan, type ShardWrite } from './shards.js';
import type { StatusInput } from './status.js';

/** A config shard read from the cache, kept while its resourceVersion is the same. */
interface ReadShard {
  readonly resourceVersion: string;
  readonly index: number;
  readonly shard: CurrentShard;
  /** Its valid entries, by domain. */
  readonly valid: ReadonlyMap<string, CompiledPolicy>;
}

export interface ConfigShardWriterOptions {
  readonly objects: KubernetesObjectApi;
  readonly log: Logger;
  /** The operator's namespace: the shards live here. */
  readonly namespace: string;
  /** `--config-name`: shard 0's name and the others' prefix. */
  readonly configName: string;
  /** Queues the status reconcile of a policy (`namespace/name`). */
  readonly enqueuePolicy: (key: string) => void;
  /** Queues the config reconcile. */
  readonly enqueueConfig: () => void;
}

/** The text of a failed write: the API server's Status message, or the error's own; 512 characters at most. */
function errorText(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === 'string' && body.length > 0) {
    try {
      const message = (JSON.parse(body) as { message?: unknown }).message;
      if (typeof message === 'string') return message.slice(0, 512);
    } catch {
      // not a Status: the error's own message below
    }
  }
  return (err instanceof Error ? err.message : String(err)).slice(0, 512);
}

export class ConfigShardWriter {
  readonly #o: ConfigShardWriterOptions;
  /** The config shards in the cache, parsed, by name. */
  readonly #shards = new Map<string, ReadShard>();
  /** The shard the last config reconcile placed each domain in. */
  #placement: ReadonlyMap<string, string> = new Map();
  /** The error of the last failed write of a shard, by name. */
  readonly #writeErrors = new Map<string, string>();

  constructor(options: ConfigShardWriterOptions) {
    this.#o = options;
  }

  /** Whether `name` is the name of a config shard (`portico-ratelimit-config`, `...-1`, ...). */
  isShardName(name: string): boolean {
    return configShardIndex(this.#o.configName, name) !== undefined;
  }

  /** Whether the cache holds the shard `name`. */
  has(name: string): boolean {
    return this.#shards.has(name);
  }

  /**
   * A ConfigMap of the watch changed; nothing unless it is a config shard. Keeps the parsed shard;
   * queues the policies whose entry in it changed (their Accepted message names the shard), and the
   * config reconcile when the shard was deleted (a shard deleted by hand is re-created at once).
   */
  onConfigMap(cm: V1ConfigMap, verb: 'add' | 'update' | 'delete'): void {
    const name = cm.metadata?.name ?? '';
    const index = configShardIndex(this.#o.configName, name);
    if (index !== undefined) this.#onShard(name, index, cm, verb);
  }

  #onShard(name: string, index: number, cm: V1ConfigMap, verb: 'add' | 'update' | 'delete'): void {
    const before = this.#shards.get(name);
    let after: ReadShard | undefined;
    if (verb === 'delete') {
      this.#shards.delete(name);
      this.#o.enqueueConfig();
    } else {
      const resourceVersion = cm.metadata?.resourceVersion ?? '';
      if (before?.resourceVersion === resourceVersion) return;
      const read = readShard(name, cm.data?.[RATELIMIT_CONFIG_KEY]);
      after = {
        resourceVersion,
        index,
        shard: read.shard,
        valid: new Map(read.valid.map((p) => [p.domain, p])),
      };
      this.#shards.set(name, after);
    }
    const old = before?.shard.entries ?? new Map<string, string>();
    const now = after?.shard.entries ?? new Map<string, string>();
    for (const domain of new Set([...old.keys(), ...now.keys()])) {
      if (old.get(domain) !== now.get(domain)) this.#o.enqueuePolicy(domain);
    }
  }

  /**
   * The config reconcile: compiles `policies` and applies each config shard whose text changes,
   * first those that gain a policy, then those that only lose some. A shard is not written while a
   * policy it would lose has not reached its new shard (that write failed or comes later), so no
   * server sees a policy vanish from every shard; one shard's failure does not stop the others.
   * `required`: names of shards that must exist (those a live server retains). Throws the first
   * failure (retry with backoff); returns 100 ms when writes were deferred.
   */
  async reconcile(
    policies: readonly RateLimitPolicy[],
    required: readonly string[],
  ): Promise<number | undefined> {
    const shards = this.#shardList();
    const enforced = new Map<string, CompiledPolicy>();
    for (const p of shards.flatMap((s) => [...s.valid.values()]))
      if (!enforced.has(p.domain)) enforced.set(p.domain, p);
    const plan = planShards({
      configName: this.#o.configName,
      desired: desiredEntries(policies, enforced),
      current: shards.map((s) => s.shard),
      required,
      budgetBytes: CONFIG_SHARD_BUDGET_BYTES,
    });
    this.#placement = plan.placement;
    return this.#write(plan);
  }

  /** What the status says about where the policy is: the shard that holds it, or why none does yet. */
  whereabouts(policy: RateLimitPolicy): Pick<StatusInput, 'configConfigMap' | 'shard' | 'configWriteError'> {
    const ns = this.#o.namespace;
    const holder = this.#holder(policy);
    if (holder !== undefined) return { configConfigMap: `${ns}/${holder}`, shard: holder };
    const planned = this.#placement.get(objectKey(policy));
    if (planned === undefined) return {};
    const error = this.#writeErrors.get(planned);
    return error === undefined
      ? { shard: planned }
      : { shard: planned, configWriteError: `ConfigMap ${ns}/${planned}: ${error}` };
  }

  /** Applies the writes of `plan` in order (see `reconcile`). */
  async #write(plan: ShardPlan): Promise<number | undefined> {
    const pending = new Set(plan.writes.map((w) => w.name));
    const movesTo = (write: ShardWrite, domain: string): boolean => {
      const to = plan.placement.get(domain);
      return to !== undefined && to !== write.name && pending.has(to);
    };
    let failure: Error | undefined;
    let deferred = false;
    for (const write of plan.writes) {
      if (write.removes.some((d) => movesTo(write, d))) {
        deferred = true;
        continue;
      }
      try {
        await this.#applyShard(write);
        pending.delete(write.name);
        this.#writeErrors.delete(write.name);
      } catch (err: unknown) {
        failure ??= err instanceof Error ? err : new Error(errorText(err));
        this.#writeErrors.set(write.name, errorText(err));
        this.#enqueuePlacedIn(plan, write.name);
        this.#o.log.error(
          { err, configMap: `${this.#o.namespace}/${write.name}` },
          'rate-limit config not applied',
        );
      }
    }
    if (failure !== undefined) throw failure;
    return deferred ? 100 : undefined;
  }

  /** Queues the policies `plan` places in shard `name` (their status tells a failed write). */
  #enqueuePlacedIn(plan: ShardPlan, name: string): void {
    for (const [domain, shard] of plan.placement) if (shard === name) this.#o.enqueuePolicy(domain);
  }

  async #applyShard(write: ShardWrite): Promise<void> {
    await serverSideApply(
      this.#o.objects,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: write.name,
          namespace: this.#o.namespace,
          labels: {
            [MANAGED_BY_LABEL]: MANAGED_BY_VALUE,
            [RATELIMIT_COMPONENT_LABEL]: RATELIMIT_COMPONENT_VALUE,
          },
        },
        data: { [RATELIMIT_CONFIG_KEY]: write.text },
      },
      { fieldManager: FIELD_MANAGER, force: true },
    );
    this.#o.log.info(
      { configMap: `${this.#o.namespace}/${write.name}`, bytes: Buffer.byteLength(write.text, 'utf8') },
      'rate-limit config applied',
    );
  }

  /** The shard that holds this generation of the policy (same uid), if any. */
  #holder(policy: RateLimitPolicy): string | undefined {
    const domain = objectKey(policy);
    const generation = policy.metadata.generation ?? 1;
    const uid = policy.metadata.uid ?? '';
    return this.#shardList().find((s) => {
      const entry = s.valid.get(domain);
      return entry?.uid === uid && entry.generation === generation;
    })?.shard.name;
  }

  /** The shards in the cache, by index. */
  #shardList(): ReadShard[] {
    return [...this.#shards.values()].sort((a, b) => a.index - b.index);
  }
}
