/**
 * Writes this instance's load report into the status ConfigMap (`portico-ratelimit-status`), under
 * its own data key, by server-side apply with a field manager of its own
 * (`portico-ratelimit-server.<instance>`): replicas never overwrite each other's keys, and no
 * read-modify-write is needed. The report is rewritten after every load and every heartbeat interval;
 * on shutdown the instance applies an empty data map, which removes its key (server-side apply drops
 * fields a manager no longer sets). See docs/adr/2026-11-22-ratelimit-enforced-reporting.md.
 */
import type { KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../api/customdomain.js';
import { RATELIMIT_COMPONENT_LABEL, RATELIMIT_COMPONENT_VALUE } from '../api/ratelimitpolicy.js';
import { serverSideApply } from '../kube/server-side-apply.js';
import { HEARTBEAT_INTERVAL_MS, reportKey, type LoadReport } from './load-report.js';
import type { LoadReportWriteResult } from './metrics.js';

export interface StatusReporterOptions {
  readonly objects: KubernetesObjectApi;
  readonly namespace: string;
  readonly name: string;
  readonly instance: string;
  readonly log: Logger;
  /** Milliseconds between heartbeats (default HEARTBEAT_INTERVAL_MS). */
  readonly heartbeatMs?: number;
  /**
   * Called after each write of the report: its result, and the report's size in bytes (UTF-8 of the
   * ConfigMap value). Not called for the removal at `stop`.
   */
  readonly onWrite?: (result: LoadReportWriteResult, bytes: number) => void;
}

export class StatusReporter {
  readonly #o: StatusReporterOptions;
  /** Milliseconds between heartbeats. */
  readonly #heartbeatMs: number;
  #report: Omit<LoadReport, 'heartbeatTime' | 'instance'> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: StatusReporterOptions) {
    this.#o = options;
    this.#heartbeatMs = options.heartbeatMs ?? HEARTBEAT_INTERVAL_MS;
  }

  /** Sets the report and writes it now (writes are serialized; a failure is retried by the heartbeat). */
  publish(report: Omit<LoadReport, 'heartbeatTime' | 'instance'>): void {
    this.#report = report;
    this.#enqueueWrite();
  }

  /** Starts the heartbeat. */
  start(): void {
    this.#timer = setInterval(() => {
      this.#enqueueWrite();
    }, this.#heartbeatMs);
    this.#timer.unref();
  }

  /** Stops the heartbeat and removes this instance's key. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#writing;
    try {
      await this.#apply({});
    } catch (err: unknown) {
      this.#o.log.warn({ err }, 'could not remove this instance from the status ConfigMap');
    }
  }

  #enqueueWrite(): void {
    if (this.#stopped || this.#report === undefined) return;
    const report: LoadReport = {
      instance: this.#o.instance,
      heartbeatTime: new Date().toISOString(),
      heartbeatIntervalSeconds: this.#heartbeatMs / 1000,
      ...this.#report,
    };
    this.#writing = this.#writing.then(async () => {
      const text = `${JSON.stringify(report)}\n`;
      const bytes = Buffer.byteLength(text);
      try {
        await this.#apply({ [reportKey(this.#o.instance)]: text });
        this.#o.onWrite?.('written', bytes);
      } catch (err: unknown) {
        this.#o.onWrite?.('failed', bytes);
        this.#o.log.warn({ err, bytes }, 'could not write the load report; retrying at the next heartbeat');
      }
    });
  }

  async #apply(data: Record<string, string>): Promise<void> {
    await serverSideApply(
      this.#o.objects,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: this.#o.name,
          namespace: this.#o.namespace,
          labels: {
            [MANAGED_BY_LABEL]: MANAGED_BY_VALUE,
            [RATELIMIT_COMPONENT_LABEL]: RATELIMIT_COMPONENT_VALUE,
          },
        },
        data,
      },
      { fieldManager: `portico-ratelimit-server.${this.#o.instance}`.slice(0, 128), force: true },
    );
  }
}
