/**
 * The config a server enforces, and what it reports about it: turns each new `config.json` of a
 * config shard (`config-schema.ts`) into the next policy snapshot (`policy-set.ts`, the merge of every
 * shard) and the load report (`load-report.ts`). A document refused whole leaves that shard's policies
 * as they were and reports the error; a deleted shard's policies stay in force until it exists again.
 * No I/O besides the callbacks.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { parseCompiledConfig } from './config-schema.js';
import { ConfigRejectedError } from './errors.js';
import type { LoadReport } from './load-report.js';
import type { ConfigMetrics } from './metrics.js';
import {
  EMPTY_SNAPSHOT,
  loadPolicies,
  mergeShards,
  reportPolicies,
  type PolicySnapshot,
  type ShardState,
} from './policy-set.js';

export type ReportBody = Omit<LoadReport, 'heartbeatTime' | 'instance'>;

const EMPTY_DOCUMENT = '{"schemaVersion":1,"policies":[]}';

/**
 * `portico_ratelimit_config_hash` of a config document: the first 48 bits of the SHA-256 of its
 * text, as a number (exact in a float64, which holds integers up to 2^53).
 */
export function configHash(text: string): number {
  return createHash('sha256').update(text).digest().readUIntBE(0, 6);
}

export class ConfigState {
  #snapshot: PolicySnapshot = EMPTY_SNAPSHOT;
  readonly #shards = new Map<string, ShardState>();
  #lastResourceVersion: string | undefined;
  #report: ReportBody = { policies: {} };
  readonly #metrics: ConfigMetrics;
  readonly #log: Logger;

  constructor(metrics: ConfigMetrics, log: Logger) {
    this.#metrics = metrics;
    this.#log = log;
  }

  /** The policies in force. Swapped whole on each load; read once per check. */
  get snapshot(): PolicySnapshot {
    return this.#snapshot;
  }

  /** The report body of the last load. */
  get report(): ReportBody {
    return this.#report;
  }

  /**
   * Loads `text` (the content of config.json; undefined when the key is missing) of the config shard
   * `name` (index `index`) at `resourceVersion`. Returns the report body to publish.
   */
  load(name: string, index: number, text: string | undefined, resourceVersion: string): ReportBody {
    const before = this.#shards.get(name);
    try {
      const document = text ?? EMPTY_DOCUMENT;
      const parsed = parseCompiledConfig(document);
      const result = loadPolicies(this.#snapshot, parsed);
      this.#shards.set(name, {
        name,
        index,
        resourceVersion,
        snapshot: result.snapshot,
        rejected: result.rejected,
        deleted: false,
      });
      this.#metrics.configLoadsTotal.inc({ result: 'loaded' });
      this.#metrics.policiesRejectedTotal.inc(result.rejected.length);
      this.#metrics.configHash.set({ shard: name }, configHash(document));
      this.#metrics.configLastLoadSuccessful.set({ shard: name }, 1);
      this.#metrics.configLastLoadSuccessTimestamp.set({ shard: name }, Date.now() / 1000);
      for (const r of result.rejected) {
        this.#log.warn(
          { configMap: name, domain: r.domain, generation: r.generation, reason: r.reason },
          r.message,
        );
      }
      this.#log.info(
        {
          configMap: name,
          resourceVersion,
          policies: result.snapshot.byDomain.size,
          rejected: result.rejected.length,
        },
        'config loaded',
      );
    } catch (err: unknown) {
      if (!(err instanceof ConfigRejectedError)) throw err;
      this.#metrics.configLoadsTotal.inc({ result: 'rejected' });
      this.#metrics.configLastLoadSuccessful.set({ shard: name }, 0);
      this.#log.error(
        { configMap: name, resourceVersion, reason: err.reason },
        `config rejected: ${err.message}`,
      );
      this.#shards.set(name, {
        name,
        index,
        resourceVersion,
        snapshot: before?.snapshot ?? EMPTY_SNAPSHOT,
        rejected: [],
        deleted: false,
        error: { reason: err.reason, message: `ConfigMap ${name}: ${err.message}` },
      });
    }
    this.#lastResourceVersion = resourceVersion;
    return this.#update();
  }

  /**
   * The config shard `name` was deleted: its policies stay in force (removing limits because an
   * object vanished would fail open without anyone deciding to) until it is loaded again. Returns the
   * report body to publish.
   */
  remove(name: string): ReportBody {
    const shard = this.#shards.get(name);
    if (shard === undefined) return this.#report;
    if (shard.snapshot.byDomain.size === 0) {
      // Nothing of it stays in force: its config series go with it.
      this.#shards.delete(name);
      for (const gauge of [
        this.#metrics.configHash,
        this.#metrics.configLastLoadSuccessful,
        this.#metrics.configLastLoadSuccessTimestamp,
      ])
        gauge.remove({ shard: name });
    } else this.#shards.set(name, { ...shard, deleted: true, rejected: [] });
    this.#log.warn(
      { configMap: name, policies: shard.snapshot.byDomain.size },
      'config ConfigMap deleted; keeping its policies in force until it exists again',
    );
    return this.#update();
  }

  #update(): ReportBody {
    const shards = [...this.#shards.values()].sort((a, b) => a.index - b.index);
    this.#snapshot = mergeShards(shards);
    this.#metrics.policiesLoaded.set(this.#snapshot.byDomain.size);
    const live = shards.filter((s) => !s.deleted);
    const failed = live.find((s) => s.error !== undefined);
    const retained = shards.filter((s) => s.deleted).map((s) => s.name);
    this.#report = {
      ...(this.#lastResourceVersion === undefined
        ? {}
        : { configResourceVersion: this.#lastResourceVersion }),
      configShards: Object.fromEntries(live.map((s) => [s.name, s.resourceVersion])),
      ...(retained.length === 0 ? {} : { retainedShards: retained }),
      ...(failed?.error === undefined ? {} : { configError: { ...failed.error, shard: failed.name } }),
      ...reportPolicies(
        this.#snapshot,
        live.flatMap((s) => s.rejected),
      ),
    };
    return this.#report;
  }
}
