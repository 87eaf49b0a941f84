/**
 * The config a server enforces, and what it reports about it: turns each new `config.json` into the
 * next policy snapshot (`policy-set.ts`) and the load report (`load-report.ts`). A document refused
 * whole leaves the snapshot as it was and reports the error. No I/O besides the callbacks.
 */
import type { Logger } from 'pino';
import { parseCompiledConfig } from './config-schema.js';
import { ConfigRejectedError } from './errors.js';
import type { LoadReport } from './load-report.js';
import type { ConfigMetrics } from './metrics.js';
import { EMPTY_SNAPSHOT, loadPolicies, reportPolicies, type PolicySnapshot } from './policy-set.js';

export type ReportBody = Omit<LoadReport, 'heartbeatTime' | 'instance'>;

export class ConfigState {
  #snapshot: PolicySnapshot = EMPTY_SNAPSHOT;
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
   * Loads `text` (the content of config.json; undefined when the key is missing) from the ConfigMap at
   * `resourceVersion`. Returns the report body to publish.
   */
  load(text: string | undefined, resourceVersion: string): ReportBody {
    try {
      const parsed = parseCompiledConfig(text ?? '{"schemaVersion":1,"policies":[]}');
      const result = loadPolicies(this.#snapshot, parsed);
      this.#snapshot = result.snapshot;
      this.#report = {
        configResourceVersion: resourceVersion,
        policies: reportPolicies(result.snapshot, result.rejected),
      };
      this.#metrics.configLoadsTotal.inc({ result: 'loaded' });
      this.#metrics.policiesLoaded.set(result.snapshot.byDomain.size);
      this.#metrics.policiesRejectedTotal.inc(result.rejected.length);
      for (const r of result.rejected) {
        this.#log.warn({ domain: r.domain, generation: r.generation, reason: r.reason }, r.message);
      }
      this.#log.info(
        { resourceVersion, policies: result.snapshot.byDomain.size, rejected: result.rejected.length },
        'config loaded',
      );
    } catch (err: unknown) {
      if (!(err instanceof ConfigRejectedError)) throw err;
      this.#metrics.configLoadsTotal.inc({ result: 'rejected' });
      this.#log.error({ resourceVersion, reason: err.reason }, `config rejected: ${err.message}`);
      this.#report = {
        configResourceVersion: resourceVersion,
        configError: { reason: err.reason, message: err.message },
        policies: reportPolicies(this.#snapshot, []),
      };
    }
    return this.#report;
  }
}
