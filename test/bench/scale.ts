/**
 * Benchmark: N CustomDomains applied at once on the sandbox stack, in its own directory
 * (`.sandbox-bench/`). Prints time to each condition (p50/p99/max), domains per minute, the
 * operator's memory and CPU, the API requests it makes while busy and while idle, and what a
 * restart costs (exit time, resync, orders placed, API writes). Not part of `npm test`.
 *
 *   npm run bench:scale -- --domains 100
 *   npm run bench:scale -- --domains 1000 --namespaces 20 --json scale-1000.json
 *   npm run bench:scale -- --domains 100 --keep        # leave .sandbox-bench up afterwards
 *   npm run bench:scale -- --domains 10000 --resync-seconds 300 --steady-seconds 330 \
 *     --restart-stalled-ca-seconds 120                  # a periodic resync inside the steady window;
 *                                                       # Pebble restarted if it stops answering
 *   npm run bench:scale -- --domains 2000 --stop-ca-at-ready 800 --restart-stalled-ca-seconds 60
 *                                                       # a CA outage at 800 Ready, then its restart
 *
 * Steps: namespaces labelled `portico.dev/plan=pro`, each with a Service `web` and an EndpointSlice
 * with one ready endpoint (nothing else writes EndpointSlices in the sandbox); hostnames
 * `d<i>.r<j>-<run>.example`, --per-registered-domain (1) of them per registered domain, each one's
 * CNAME set to the platform target; a --baseline-seconds window with no CustomDomain of the run;
 * N CustomDomains created with --concurrency creates in flight; a watch on them until every one is
 * Ready; --settle-seconds idle; a --steady-seconds window; then SIGTERM to the operator, a start
 * with the sandbox's own `startController` (which truncates the operator's log: the first
 * process's log is kept as `portico-controller.before-restart.log`), and its resync.
 *
 * The operator's ACME order budget defaults to Let's Encrypt's 300 new orders per 3 hours, which
 * would hold a run of more than 300 domains for hours against Pebble (which has no such limit): the
 * benchmark sets PORTICO_ACME_ORDERS_PER_WINDOW (the operator's --acme-orders-per-window) to
 * --acme-orders-per-window, default N, in the environment the sandbox hands its processes. The
 * in-flight cap (--acme-max-orders-in-flight, 50) and the per-registered-domain budget stay as they
 * are. A reused sandbox keeps the operator it has; the report prints its PORTICO_* environment.
 *
 * Sources of each figure: condition times are the operator's `lastTransitionTime`s minus the moment
 * the benchmark sent the create; the order split comes from the operator's log lines; RSS and CPU
 * from /proc/<pid>; the JS heap from the operator's /metrics; API requests from kube-apiserver's
 * `apiserver_request_total`, which counts every client: the benchmark's own requests are
 * subtracted, the rate-limit service's and the API server's own loops are not.
 */
import { execFile } from 'node:child_process';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import {
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  VERSION,
  type Condition,
  type CustomDomain,
} from '../../src/api/customdomain.js';
import { CONTROLLER, startController } from '../../src/sandbox/controller.js';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import { clusterAccess, type ClusterAccess } from '../../src/sandbox/kubeconfig.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { PEBBLE, PEBBLE_ENV } from '../../src/sandbox/pebble.js';
import { isAlive, readPid, startDetached, stopProcess } from '../../src/sandbox/processes.js';
import { httpGet, httpProbe } from '../../src/sandbox/readiness.js';
import {
  ACME_EMAIL,
  OPERATOR_NAMESPACE,
  PACKAGE_ROOT,
  readSandboxEnv,
  sandboxDown,
  sandboxStatus,
  sandboxUp,
  type SandboxEnv,
} from '../../src/sandbox/stack.js';
import {
  clockTicks,
  cpuSeconds,
  parsePrometheus,
  residentBytes,
  rssBytes,
  sumOf,
  type Sample,
} from './process-figures.js';
import { createProject } from './projects.js';
import {
  machineBusySince,
  machineCpuTimes,
  pool,
  positive,
  secs,
  stats,
  type CpuTimes,
  type Stats,
} from './run-helpers.js';

const run = promisify(execFile);

const CONDITIONS = ['Accepted', 'DNSVerified', 'CertificateReady', 'Routed', 'Ready'] as const;
const RUN_LABEL = 'portico.dev/bench-run';
const WRITE_VERBS = new Set([
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'DELETECOLLECTION',
  'APPLY',
  'CREATE',
  'UPDATE',
]);
/** The operator's log messages that mark the steps of one certificate order, in order. */
const ORDER_STEPS = [
  ['certificate order started', 'started'],
  ['ACME order created', 'created'],
  ['http-01 challenge valid', 'challengeValid'],
  ['ACME order valid; certificate downloaded', 'downloaded'],
  ['certificate stored', 'stored'],
] as const;
/** After a restart, the resync is over once the reconcile counter has not moved for this long. */
const RESYNC_QUIET_MS = 5000;
/**
 * How often the benchmark reads the operator's /metrics: the chart's ServiceMonitor interval. The
 * answer grows with the domains (a certificate-expiry series each: 1.5 MB at 10,000), so reading
 * it every second, as the first versions did, cost the operator CPU and garbage no cluster sees.
 * RSS and CPU come from /proc every second.
 */
const SCRAPE_INTERVAL_MS = 30_000;
/** How often the restart step reads the reconcile counter (from /metrics) while the resync runs. */
const RESYNC_POLL_MS = 1_000;

// ---------------------------------------------------------------------------------------------
// Options, machine

interface Options {
  domains: number;
  namespaces: number;
  concurrency: number;
  timeoutSeconds: number;
  settleSeconds: number;
  steadySeconds: number;
  baselineSeconds: number;
  /** Hostnames per registered domain (eTLD+1): the CA's certificate budget is per registered domain. */
  perRegisteredDomain: number;
  /** The operator's --acme-orders-per-window, passed through PORTICO_ACME_ORDERS_PER_WINDOW. */
  ordersPerWindow: number;
  /**
   * The operator's --resync-seconds (PORTICO_RESYNC_SECONDS), when set: with --steady-seconds
   * longer than it, the steady window holds a periodic resync, and its CPU is the resync's.
   */
  resyncSeconds: number | undefined;
  /**
   * When set: a ramp during which no domain became Ready for this many seconds restarts Pebble (same
   * command line; a fresh CA with no account, which the operator registers again on its next order).
   * Pebble stops answering new orders at some point past ~8,000 orders (docs/performance.md).
   */
  restartStalledCaSeconds: number | undefined;
  /**
   * When set: Pebble is stopped (SIGSTOP: it keeps its connections and answers nothing, as a CA that
   * hangs) once this many domains are Ready, and --restart-stalled-ca-seconds restarts it. Makes the
   * CA outage, and the burst of orders when the CA is back, happen at a chosen point of any run.
   */
  stopCaAtReady: number | undefined;
  keep: boolean;
  json: string | undefined;
  dir: string;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      domains: { type: 'string', default: '100' },
      namespaces: { type: 'string', default: '10' },
      concurrency: { type: 'string', default: '32' },
      'timeout-seconds': { type: 'string', default: '1800' },
      'settle-seconds': { type: 'string', default: '30' },
      'steady-seconds': { type: 'string', default: '60' },
      'baseline-seconds': { type: 'string', default: '20' },
      'per-registered-domain': { type: 'string', default: '1' },
      'acme-orders-per-window': { type: 'string' },
      'resync-seconds': { type: 'string' },
      'restart-stalled-ca-seconds': { type: 'string' },
      'stop-ca-at-ready': { type: 'string' },
      keep: { type: 'boolean', default: false },
      json: { type: 'string' },
      dir: { type: 'string', default: '.sandbox-bench' },
    },
  });
  if (values['stop-ca-at-ready'] !== undefined && values['restart-stalled-ca-seconds'] === undefined) {
    throw new Error('--stop-ca-at-ready needs --restart-stalled-ca-seconds, which restarts the stopped CA');
  }
  return {
    domains: positive('domains', values.domains),
    namespaces: positive('namespaces', values.namespaces),
    concurrency: positive('concurrency', values.concurrency),
    timeoutSeconds: positive('timeout-seconds', values['timeout-seconds']),
    settleSeconds: positive('settle-seconds', values['settle-seconds']),
    steadySeconds: positive('steady-seconds', values['steady-seconds']),
    baselineSeconds: positive('baseline-seconds', values['baseline-seconds']),
    perRegisteredDomain: positive('per-registered-domain', values['per-registered-domain']),
    ordersPerWindow: positive('acme-orders-per-window', values['acme-orders-per-window'] ?? values.domains),
    resyncSeconds:
      values['resync-seconds'] === undefined
        ? undefined
        : positive('resync-seconds', values['resync-seconds']),
    restartStalledCaSeconds:
      values['restart-stalled-ca-seconds'] === undefined
        ? undefined
        : positive('restart-stalled-ca-seconds', values['restart-stalled-ca-seconds']),
    stopCaAtReady:
      values['stop-ca-at-ready'] === undefined
        ? undefined
        : positive('stop-ca-at-ready', values['stop-ca-at-ready']),
    keep: values.keep,
    json: values.json === undefined ? undefined : resolve(values.json),
    dir: resolve(values.dir),
  };
}

interface Machine {
  cpus: number;
  model: string;
  memoryBytes: number;
  loadAverage1m: number;
  node: string;
  commit: string;
  /** Files under src/ changed or added since the commit (dist/ is built from the working tree). */
  uncommittedFiles: number;
}

async function gitOutput(args: string[]): Promise<string> {
  try {
    return (await run('git', args, { cwd: PACKAGE_ROOT })).stdout.trim();
  } catch {
    return 'unknown';
  }
}

async function machine(): Promise<Machine> {
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  const status = await gitOutput(['status', '--porcelain', '--', 'src']);
  return {
    cpus: cpus().length,
    model: model.trim(),
    memoryBytes: totalmem(),
    loadAverage1m: loadavg()[0] ?? 0,
    node: process.version,
    commit: await gitOutput(['rev-parse', 'HEAD']),
    uncommittedFiles: status === '' || status === 'unknown' ? 0 : status.split('\n').length,
  };
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function progress(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function mib(bytes: number | undefined): string {
  return bytes === undefined ? 'n/a' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** The peak's anonymous and file-backed RSS, then the nearest scrape's V8 heap and external memory. */
function compositionLine(c: PeakComposition | undefined): string {
  if (c === undefined) return 'n/a';
  const heap =
    c.scrapeSecondsAway === undefined
      ? 'no scrape'
      : `heap used ${mib(c.heapUsedBytes)} of ${mib(c.heapTotalBytes)} committed, external ${mib(c.externalBytes)} (scrape ${secs(c.scrapeSecondsAway, 0)} away)`;
  return `anon ${mib(c.rssAnonBytes)}, file ${mib(c.rssFileBytes)}; ${heap}`;
}

// ---------------------------------------------------------------------------------------------
// Prometheus text

// ---------------------------------------------------------------------------------------------
// The operator: /metrics and /proc

const OPERATOR_METRICS = new Set([
  'portico_nodejs_heap_size_used_bytes',
  'nodejs_heap_size_used_bytes',
  'portico_nodejs_heap_size_total_bytes',
  'nodejs_heap_size_total_bytes',
  'portico_nodejs_external_memory_bytes',
  'nodejs_external_memory_bytes',
  'portico_reconcile_total',
  'portico_reconcile_duration_seconds_bucket',
  'portico_reconcile_duration_seconds_sum',
  'portico_reconcile_duration_seconds_count',
  'portico_workqueue_depth',
  'portico_acme_orders_total',
]);

async function operatorMetrics(url: string): Promise<Sample[] | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    return res.ok ? parsePrometheus(await res.text(), OPERATOR_METRICS) : undefined;
  } catch {
    return undefined;
  }
}

function heapUsed(samples: readonly Sample[]): number | undefined {
  return nodejsGauge(samples, 'heap_size_used_bytes');
}

/** A prom-client default gauge, `nodejs_<name>` with or without the operator's `portico_` prefix. */
function nodejsGauge(samples: readonly Sample[], name: string): number | undefined {
  return samples.find((s) => s.name === `portico_nodejs_${name}` || s.name === `nodejs_${name}`)?.value;
}

function reconciles(samples: readonly Sample[]): number {
  return sumOf(samples, 'portico_reconcile_total', { controller: 'customdomain' });
}

const CUSTOMDOMAIN = { controller: 'customdomain' };

interface ReconcileSummary {
  byResult: Record<string, number>;
  count: number;
  meanSeconds: number | undefined;
  /** The upper bound of the histogram bucket holding the 50th / 99th percentile. */
  p50AtMostSeconds: number | undefined;
  p99AtMostSeconds: number | undefined;
}

/** The `le` bound of the first bucket whose count delta reaches `p` of all. */
function bucketBound(
  deltas: readonly (readonly [number, number])[],
  total: number,
  p: number,
): number | undefined {
  return deltas.find(([, count]) => count >= p * total)?.[0];
}

/** CustomDomain reconciles between two scrapes of the operator's /metrics. */
function reconcileSummary(before: readonly Sample[], after: readonly Sample[]): ReconcileSummary {
  const byResult: Record<string, number> = {};
  for (const s of after.filter(
    (x) => x.name === 'portico_reconcile_total' && x.labels['controller'] === 'customdomain',
  )) {
    const result = s.labels['result'] ?? '';
    byResult[result] = s.value - sumOf(before, 'portico_reconcile_total', { ...CUSTOMDOMAIN, result });
  }
  const delta = (name: string, labels: Record<string, string> = {}): number =>
    sumOf(after, name, { ...CUSTOMDOMAIN, ...labels }) - sumOf(before, name, { ...CUSTOMDOMAIN, ...labels });
  const count = delta('portico_reconcile_duration_seconds_count');
  const bounds = after
    .filter(
      (x) =>
        x.name === 'portico_reconcile_duration_seconds_bucket' && x.labels['controller'] === 'customdomain',
    )
    .map((x) => x.labels['le'] ?? '')
    .filter((le) => le !== '+Inf');
  const deltas = bounds
    .map((le) => [Number(le), delta('portico_reconcile_duration_seconds_bucket', { le })] as const)
    .sort((a, b) => a[0] - b[0]);
  return {
    byResult,
    count,
    meanSeconds: count > 0 ? delta('portico_reconcile_duration_seconds_sum') / count : undefined,
    p50AtMostSeconds: count > 0 ? bucketBound(deltas, count, 0.5) : undefined,
    p99AtMostSeconds: count > 0 ? bucketBound(deltas, count, 0.99) : undefined,
  };
}

function ordersByResult(samples: readonly Sample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples.filter((x) => x.name === 'portico_acme_orders_total'))
    out[s.labels['result'] ?? ''] = s.value;
  return out;
}

interface ProcSample {
  /** Milliseconds since the benchmark started. */
  t: number;
  phase: string;
  pid: number;
  rssBytes?: number;
  /** RssAnon and RssFile (the Node binary's pages) of /proc/PID/status. */
  rssAnonBytes?: number;
  rssFileBytes?: number;
  heapUsedBytes?: number;
  /** V8's heap as committed (nodejs_heap_size_total_bytes) and memory outside it (nodejs_external_memory_bytes), at scrapes. */
  heapTotalBytes?: number;
  externalBytes?: number;
  cpuSeconds?: number;
  /** portico_workqueue_depth of the CustomDomain controller. */
  queueDepth?: number;
}

/** The operator's memory at its RSS peak (`Sampler.peakComposition`), bytes. */
interface PeakComposition {
  /** Since the benchmark started. */
  atSeconds: number;
  rssBytes: number;
  rssAnonBytes?: number;
  rssFileBytes?: number;
  /** How far the scrape the heap figures come from was from the peak sample. */
  scrapeSecondsAway?: number;
  heapUsedBytes?: number | undefined;
  heapTotalBytes?: number | undefined;
  externalBytes?: number | undefined;
}

/** Samples the operator every second: RSS and CPU from /proc, heap from /metrics. */
class Sampler {
  readonly samples: ProcSample[] = [];
  pid: number | undefined;
  phase = 'setup';
  readonly #metricsUrl: string;
  readonly #ticks: number;
  readonly #t0: number;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #lastScrape = -Infinity;

  constructor(metricsUrl: string, ticks: number, t0: number) {
    this.#metricsUrl = metricsUrl;
    this.#ticks = ticks;
    this.#t0 = t0;
  }

  start(): void {
    this.#timer = setInterval(() => {
      void this.#tick();
    }, 1000);
  }

  /** Whether this tick also scrapes /metrics: every SCRAPE_INTERVAL_MS, as Prometheus would. */
  #scrapeDue(t: number): boolean {
    if (t - this.#lastScrape < SCRAPE_INTERVAL_MS) return false;
    this.#lastScrape = t;
    return true;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #tick(): Promise<void> {
    const pid = this.pid;
    if (this.#busy || pid === undefined) return;
    this.#busy = true;
    try {
      const t = Date.now() - this.#t0;
      const [resident, cpu, metrics] = await Promise.all([
        residentBytes(pid),
        cpuSeconds(pid, this.#ticks),
        this.#scrapeDue(t) ? operatorMetrics(this.#metricsUrl) : undefined,
      ]);
      const heap = metrics ? heapUsed(metrics) : undefined;
      const heapTotal = metrics ? nodejsGauge(metrics, 'heap_size_total_bytes') : undefined;
      const external = metrics ? nodejsGauge(metrics, 'external_memory_bytes') : undefined;
      const depth = metrics?.find(
        (m) => m.name === 'portico_workqueue_depth' && m.labels['controller'] === 'customdomain',
      );
      this.samples.push({
        t,
        phase: this.phase,
        pid,
        ...(resident === undefined ? {} : { rssBytes: resident.rss }),
        ...(resident?.anon === undefined ? {} : { rssAnonBytes: resident.anon }),
        ...(resident?.file === undefined ? {} : { rssFileBytes: resident.file }),
        ...(heap === undefined ? {} : { heapUsedBytes: heap }),
        ...(heapTotal === undefined ? {} : { heapTotalBytes: heapTotal }),
        ...(external === undefined ? {} : { externalBytes: external }),
        ...(cpu === undefined ? {} : { cpuSeconds: cpu }),
        ...(depth === undefined ? {} : { queueDepth: depth.value }),
      });
    } finally {
      this.#busy = false;
    }
  }

  /**
   * What the RSS was made of at its peak over `phases`: the peak sample's anonymous and file-backed
   * RSS, and the V8 heap (used, committed) and external memory of the scrape nearest to it (every
   * SCRAPE_INTERVAL_MS, so up to half of that apart).
   */
  peakComposition(phases: readonly string[]): PeakComposition | undefined {
    const inPhases = this.samples.filter((s) => phases.includes(s.phase));
    const peak = inPhases.reduce<ProcSample | undefined>(
      (best, s) => (s.rssBytes !== undefined && s.rssBytes > (best?.rssBytes ?? -1) ? s : best),
      undefined,
    );
    if (peak?.rssBytes === undefined) return undefined;
    const scraped = inPhases.filter((s) => s.heapTotalBytes !== undefined);
    const near = scraped.reduce<ProcSample | undefined>(
      (best, s) => (Math.abs(s.t - peak.t) < Math.abs((best?.t ?? Infinity) - peak.t) ? s : best),
      undefined,
    );
    return {
      atSeconds: peak.t / 1000,
      rssBytes: peak.rssBytes,
      ...(peak.rssAnonBytes === undefined ? {} : { rssAnonBytes: peak.rssAnonBytes }),
      ...(peak.rssFileBytes === undefined ? {} : { rssFileBytes: peak.rssFileBytes }),
      ...(near === undefined
        ? {}
        : {
            scrapeSecondsAway: Math.abs(near.t - peak.t) / 1000,
            heapUsedBytes: near.heapUsedBytes,
            heapTotalBytes: near.heapTotalBytes,
            externalBytes: near.externalBytes,
          }),
    };
  }

  /** Max and mean of a field over the samples of `phases` (and of `pid` when given). */
  over(
    phases: readonly string[],
    field: 'rssBytes' | 'heapUsedBytes' | 'queueDepth',
    pid?: number,
  ): { max?: number; mean?: number } {
    const values = this.samples
      .filter((s) => phases.includes(s.phase) && (pid === undefined || s.pid === pid))
      .map((s) => s[field])
      .filter((v): v is number => v !== undefined);
    if (values.length === 0) return {};
    return { max: Math.max(...values), mean: values.reduce((a, b) => a + b, 0) / values.length };
  }
}

// ---------------------------------------------------------------------------------------------
// kube-apiserver's apiserver_request_total

/** Request counts by "VERB resource[/subresource]". */
type RequestCounts = Map<string, number>;

interface RequestRow {
  verb: string;
  resource: string;
  count: number;
  perSecond?: number;
  perDomain?: number;
}

/** The requests counted in `own` since it held `before`. */
function ownSince(own: RequestCounts, before: RequestCounts): RequestCounts {
  return new Map([...own].map(([k, v]) => [k, v - (before.get(k) ?? 0)]));
}

function countOwn(own: RequestCounts, verb: string, resource: string, n = 1): void {
  const key = `${verb} ${resource}`;
  own.set(key, (own.get(key) ?? 0) + n);
}

/** All requests, and those answered with a code of 400 or more (keyed "VERB resource(code)"). */
interface ApiCounts {
  all: RequestCounts;
  failed: RequestCounts;
}

function add(counts: RequestCounts, key: string, n: number): void {
  counts.set(key, (counts.get(key) ?? 0) + n);
}

async function apiRequestCounts(access: ClusterAccess): Promise<ApiCounts> {
  const answer = await httpGet(`${access.server}/metrics`, access.requestOptions, 30_000);
  if (answer.status !== 200) throw new Error(`kube-apiserver /metrics answered ${answer.status}`);
  const counts: RequestCounts = new Map();
  const failed: RequestCounts = new Map();
  for (const s of parsePrometheus(answer.body, new Set(['apiserver_request_total']))) {
    const { verb = '', resource = '', subresource = '' } = s.labels;
    const what =
      resource === '' ? '(non-resource)' : subresource === '' ? resource : `${resource}/${subresource}`;
    add(counts, `${verb.toUpperCase()} ${what}`, s.value);
    const code = Number(s.labels['code']);
    if (code >= 400) add(failed, `${verb.toUpperCase()} ${what}(${code})`, s.value);
  }
  return { all: counts, failed };
}

interface ApiDelta {
  rows: RequestRow[];
  failed: RequestRow[];
}

function apiDelta(before: ApiCounts, after: ApiCounts, own: RequestCounts): ApiDelta {
  return {
    rows: requestDelta(before.all, after.all, own),
    failed: requestDelta(before.failed, after.failed, new Map()),
  };
}

/** `after - before - own`, non-zero rows only, largest first. */
function requestDelta(before: RequestCounts, after: RequestCounts, own: RequestCounts): RequestRow[] {
  const rows: RequestRow[] = [];
  for (const [key, value] of after) {
    const count = value - (before.get(key) ?? 0) - (own.get(key) ?? 0);
    if (count <= 0) continue;
    const [verb = '', resource = ''] = key.split(' ');
    rows.push({ verb, resource, count });
  }
  return rows.sort((a, b) => b.count - a.count || a.resource.localeCompare(b.resource));
}

/** Write requests by resource, with their count per domain. */
function writesByResource(rows: readonly RequestRow[], domains: number): RequestRow[] {
  const byResource = new Map<string, number>();
  for (const r of rows.filter((x) => WRITE_VERBS.has(x.verb)))
    byResource.set(`${r.verb} ${r.resource}`, (byResource.get(`${r.verb} ${r.resource}`) ?? 0) + r.count);
  return [...byResource]
    .map(([key, count]) => {
      const [verb = '', resource = ''] = key.split(' ');
      return { verb, resource, count, perDomain: count / domains };
    })
    .sort((a, b) => b.count - a.count);
}

// ---------------------------------------------------------------------------------------------
// Cluster objects

interface Cluster {
  kc: KubeConfig;
  core: CoreV1Api;
  discovery: DiscoveryV1Api;
  custom: CustomObjectsApi;
  access: ClusterAccess;
}

async function connect(env: SandboxEnv): Promise<Cluster> {
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    discovery: kc.makeApiClient(DiscoveryV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    access: await clusterAccess(env.kubeconfig),
  };
}

interface DomainPlan {
  namespace: string;
  name: string;
  hostname: string;
  /** Date.now() when the create was sent. */
  sentAt?: number;
}

function planDomains(runId: string, options: Options): { namespaces: string[]; domains: DomainPlan[] } {
  const namespaces = Array.from({ length: options.namespaces }, (_, j) => `scale-${runId}-${j}`);
  const domains = Array.from({ length: options.domains }, (_, i) => {
    const namespace = namespaces[i % namespaces.length] ?? '';
    const registered = `r${Math.floor(i / options.perRegisteredDomain)}-${runId}.example`;
    return { namespace, name: `d${i}`, hostname: `d${i}.${registered}` };
  });
  return { namespaces, domains };
}

async function createDomain(cluster: Cluster, d: DomainPlan, runId: string): Promise<void> {
  d.sentAt = Date.now();
  await cluster.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: d.namespace,
    plural: CUSTOM_DOMAIN_PLURAL,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'CustomDomain',
      metadata: { name: d.name, namespace: d.namespace, labels: { [RUN_LABEL]: runId } },
      spec: { hostname: d.hostname, service: { name: 'web', port: 80 } },
    },
  });
}

/**
 * Keeps the conditions of the CustomDomains of this run, from a list and then a watch. A watch that
 * ends (client-node closes one after 30 s without data) is opened again from the last
 * resourceVersion; a new list only follows an expired resourceVersion or a failure. Every request
 * it makes is counted in `own`.
 */
class DomainTracker {
  readonly conditions = new Map<string, Condition[]>();
  readonly #cluster: Cluster;
  readonly #selector: string;
  readonly #own: RequestCounts;
  #abort: AbortController | undefined;
  #stopped = false;
  #resourceVersion = '';
  #expired = false;

  constructor(cluster: Cluster, runId: string, own: RequestCounts) {
    this.#cluster = cluster;
    this.#selector = `${RUN_LABEL}=${runId}`;
    this.#own = own;
  }

  async start(): Promise<void> {
    await this.#list();
    await this.#watch();
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
  }

  count(type: string): number {
    let n = 0;
    for (const list of this.conditions.values())
      if (list.some((c) => c.type === type && c.status === 'True')) n++;
    return n;
  }

  #record(cd: CustomDomain): void {
    this.conditions.set(`${cd.metadata.namespace}/${cd.metadata.name}`, cd.status?.conditions ?? []);
  }

  async #list(): Promise<void> {
    countOwn(this.#own, 'LIST', CUSTOM_DOMAIN_PLURAL);
    const list = (await this.#cluster.custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: CUSTOM_DOMAIN_PLURAL,
      labelSelector: this.#selector,
    })) as { items: CustomDomain[]; metadata: { resourceVersion: string } };
    for (const cd of list.items) this.#record(cd);
    this.#resourceVersion = list.metadata.resourceVersion;
    this.#expired = false;
  }

  #event(phase: string, obj: unknown): void {
    if (phase === 'ERROR') {
      this.#expired = true; // 410 Gone: the resourceVersion is too old
      return;
    }
    const rv = (obj as CustomDomain).metadata.resourceVersion;
    if (rv !== undefined) this.#resourceVersion = rv;
    if (phase === 'ADDED' || phase === 'MODIFIED') this.#record(obj as CustomDomain);
  }

  async #watch(): Promise<void> {
    countOwn(this.#own, 'WATCH', CUSTOM_DOMAIN_PLURAL);
    this.#abort = await new Watch(this.#cluster.kc).watch(
      `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
      { labelSelector: this.#selector, resourceVersion: this.#resourceVersion, allowWatchBookmarks: true },
      (phase: string, obj: unknown) => {
        this.#event(phase, obj);
      },
      (err: unknown) => {
        // client-node's inactivity timeout ends a quiet watch: open it again; anything else lists again.
        if (err !== null && err !== undefined && (err as { name?: string }).name !== 'TimeoutError')
          this.#expired = true;
        void this.#restart();
      },
    );
  }

  async #restart(): Promise<void> {
    if (this.#stopped) return;
    await sleep(this.#expired ? 500 : 0);
    try {
      if (this.#expired) await this.#list();
      await this.#watch();
    } catch (err: unknown) {
      progress(`watch of CustomDomains failed (${errorText(err)}); listing again`);
      this.#expired = true;
      void this.#restart();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Timings

interface DomainTiming {
  key: string;
  sentAt: number;
  /** Seconds from the create to each condition's lastTransitionTime, when it is True. */
  seconds: Partial<Record<(typeof CONDITIONS)[number], number>>;
}

function domainTimings(plans: readonly DomainPlan[], tracker: DomainTracker): DomainTiming[] {
  return plans.map((d) => {
    const key = `${d.namespace}/${d.name}`;
    const sentAt = d.sentAt ?? 0;
    const seconds: DomainTiming['seconds'] = {};
    for (const c of tracker.conditions.get(key) ?? []) {
      if (c.status !== 'True' || !(CONDITIONS as readonly string[]).includes(c.type)) continue;
      seconds[c.type as (typeof CONDITIONS)[number]] = (Date.parse(c.lastTransitionTime) - sentAt) / 1000;
    }
    return { key, sentAt, seconds };
  });
}

function conditionStats(timings: readonly DomainTiming[]): Record<string, Stats | undefined> {
  const out: Record<string, Stats | undefined> = {};
  for (const type of CONDITIONS)
    out[type] = stats(timings.map((t) => t.seconds[type]).filter((v): v is number => v !== undefined));
  return out;
}

interface LogLine {
  level: number;
  time: number;
  msg: string;
  hostname?: string;
  err?: { message?: string };
  /** `status updated`: what the write changed (src/controllers/customdomain/reconciler.ts). */
  changed?: string[];
}

async function readLog(file: string): Promise<LogLine[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(raw) as LogLine & { time: string | number };
      lines.push({
        ...parsed,
        time: typeof parsed.time === 'number' ? parsed.time : Date.parse(parsed.time),
      });
    } catch {
      // a line cut short by a kill: skip it
    }
  }
  return lines;
}

type StepName = (typeof ORDER_STEPS)[number][1];

interface OrderSplit {
  /** Domains whose log holds a complete order (started ... stored). */
  domains: number;
  /** Domains that needed more than one order. */
  retried: number;
  /** Seconds, by step: create → order started, started → created, ... */
  steps: Record<string, Stats | undefined>;
}

/** Per hostname, the times of the steps of its last order, from the operator's log. */
function orderSteps(
  lines: readonly LogLine[],
): Map<string, { attempts: number; at: Partial<Record<StepName, number>> }> {
  const byHost = new Map<string, { attempts: number; at: Partial<Record<StepName, number>> }>();
  const stepOf = new Map<string, StepName>(ORDER_STEPS.map(([msg, step]) => [msg, step]));
  for (const line of lines) {
    const step = stepOf.get(line.msg);
    if (step === undefined || line.hostname === undefined) continue;
    const entry = byHost.get(line.hostname) ?? { attempts: 0, at: {} };
    if (step === 'started') {
      entry.attempts++;
      entry.at = {};
    }
    entry.at[step] = line.time;
    byHost.set(line.hostname, entry);
  }
  return byHost;
}

function orderSplit(
  lines: readonly LogLine[],
  plans: readonly DomainPlan[],
  timings: readonly DomainTiming[],
): OrderSplit {
  const certificateReady = new Map(timings.map((t) => [t.key, t.seconds.CertificateReady]));
  const byHost = orderSteps(lines);
  const spans: Record<string, number[]> = {};
  const add = (name: string, from: number | undefined, to: number | undefined): void => {
    if (from !== undefined && to !== undefined) (spans[name] ??= []).push((to - from) / 1000);
  };
  let domains = 0;
  let retried = 0;
  for (const d of plans) {
    const entry = byHost.get(d.hostname);
    if (entry?.at.stored === undefined) continue;
    domains++;
    if (entry.attempts > 1) retried++;
    const { started, created, challengeValid, downloaded, stored } = entry.at;
    add('create → order started', d.sentAt, started);
    add('started → ACME order created', started, created);
    add('order created → http-01 valid', created, challengeValid);
    add('http-01 valid → certificate downloaded', challengeValid, downloaded);
    add('downloaded → Secret stored', downloaded, stored);
    add('order started → Secret stored', started, stored);
    const ready = certificateReady.get(`${d.namespace}/${d.name}`);
    add(
      'Secret stored → CertificateReady written',
      stored,
      ready === undefined ? undefined : (d.sentAt ?? 0) + ready * 1000,
    );
  }
  const steps: Record<string, Stats | undefined> = {};
  for (const [name, values] of Object.entries(spans)) steps[name] = stats(values);
  return { domains, retried, steps };
}

/**
 * How many of the run's domains had their status written n times, by n: the operator logs
 * `status updated` with the hostname at each status write.
 */
function statusWritesByCount(
  lines: readonly LogLine[],
  plans: readonly DomainPlan[],
): Record<number, number> {
  const writes = new Map<string, number>(plans.map((d) => [d.hostname, 0]));
  for (const line of lines) {
    if (line.msg !== 'status updated' || line.hostname === undefined) continue;
    const count = writes.get(line.hostname);
    if (count !== undefined) writes.set(line.hostname, count + 1);
  }
  const byCount: Record<number, number> = {};
  for (const count of writes.values()) byCount[count] = (byCount[count] ?? 0) + 1;
  return byCount;
}

/**
 * The run's status writes by what each changed (the `changed` of the operator's `status updated`
 * line, joined with `, `), most frequent first: which transitions and which retold messages the
 * writes per domain are made of.
 */
function statusWritesByChange(
  lines: readonly LogLine[],
  plans: readonly DomainPlan[],
): { change: string; writes: number }[] {
  const hostnames = new Set(plans.map((d) => d.hostname));
  const counts = new Map<string, number>();
  for (const line of lines) {
    if (line.msg !== 'status updated' || line.hostname === undefined || !hostnames.has(line.hostname))
      continue;
    // Empty: the write changed no condition's status, reason or message and no other field, so only
    // the conditions' times, generations or order.
    const change =
      line.changed === undefined
        ? '(not logged)'
        : line.changed.join(', ') || '(conditions: times, generations or order only)';
    counts.set(change, (counts.get(change) ?? 0) + 1);
  }
  return [...counts].map(([change, writes]) => ({ change, writes })).sort((a, b) => b.writes - a.writes);
}

interface LogProblem {
  level: string;
  msg: string;
  count: number;
  example?: string;
}

/** Warnings and errors of a log from `since` (ms since the epoch) on, by message, most frequent first. */
function logProblems(lines: readonly LogLine[], since: number): LogProblem[] {
  const byMsg = new Map<string, LogProblem>();
  for (const line of lines.filter((l) => l.level >= 40 && l.time >= since)) {
    const level = line.level >= 50 ? 'error' : 'warn';
    const key = `${level} ${line.msg}`;
    const found = byMsg.get(key) ?? { level, msg: line.msg, count: 0 };
    found.count++;
    if (found.example === undefined && line.err?.message !== undefined)
      found.example = line.err.message.replace(/\s+/g, ' ');
    byMsg.set(key, found);
  }
  return [...byMsg.values()].sort((a, b) => b.count - a.count);
}

function countMessages(lines: readonly LogLine[], msg: string): number {
  return lines.filter((l) => l.msg === msg).length;
}

// ---------------------------------------------------------------------------------------------
// Phases

interface Context {
  options: Options;
  env: SandboxEnv;
  cluster: Cluster;
  sampler: Sampler;
  ticks: number;
  own: RequestCounts;
  logFile: string;
  /** The first operator's PORTICO_* variables. */
  operatorEnvironment: string[];
  /** Pebble restarts of --restart-stalled-ca-seconds: when, and how many domains were Ready. */
  caRestarts: { at: string; ready: number }[];
  /** The stop of --stop-ca-at-ready, once made: when, and how many domains were Ready. */
  caStop: { at: string; ready: number } | undefined;
}

/** What the counters said at the start of a measured stretch. */
interface MeterStart {
  t: number;
  api: ApiCounts;
  own: RequestCounts;
  operatorCpu: number | undefined;
  machine: CpuTimes | undefined;
  metrics: Sample[];
}

/** What changed over a measured stretch. */
interface Measured {
  seconds: number;
  api: ApiDelta;
  /** Seconds of CPU the operator used (the new process's whole life after a restart). */
  operatorCpuSeconds: number | undefined;
  /** The share of the whole machine's CPU that was busy (0..1). */
  machineBusy: number | undefined;
  reconciles: ReconcileSummary;
  acmeOrders: Record<string, number>;
}

async function meterStart(ctx: Context): Promise<MeterStart> {
  return {
    t: Date.now(),
    api: await apiRequestCounts(ctx.cluster.access),
    own: new Map(ctx.own),
    operatorCpu: await cpuSeconds(ctx.sampler.pid ?? 0, ctx.ticks),
    machine: await machineCpuTimes(),
    metrics: (await operatorMetrics(ctx.env.controllerMetricsUrl)) ?? [],
  };
}

/** @param newProcess the operator was restarted since `start`: its counters began at zero */
async function meterEnd(ctx: Context, start: MeterStart, newProcess = false): Promise<Measured> {
  const api = await apiRequestCounts(ctx.cluster.access);
  const cpu = await cpuSeconds(ctx.sampler.pid ?? 0, ctx.ticks);
  const metrics = (await operatorMetrics(ctx.env.controllerMetricsUrl)) ?? [];
  const before = newProcess ? [] : start.metrics;
  const ordersBefore = ordersByResult(before);
  const cpuBefore = newProcess ? 0 : start.operatorCpu;
  return {
    seconds: (Date.now() - start.t) / 1000,
    api: apiDelta(start.api, api, ownSince(ctx.own, start.own)),
    operatorCpuSeconds: cpu === undefined || cpuBefore === undefined ? undefined : cpu - cpuBefore,
    machineBusy: await machineBusySince(start.machine),
    reconciles: reconcileSummary(before, metrics),
    acmeOrders: Object.fromEntries(
      Object.entries(ordersByResult(metrics)).map(([k, v]) => [k, v - (ordersBefore[k] ?? 0)]),
    ),
  };
}

interface RampResult extends Measured {
  startedAt: string;
  createSeconds: number;
  durationSeconds: number;
  domainsPerMinute: number;
  ready: number;
  timedOut: boolean;
  timeTo: Record<string, Stats | undefined>;
  orders: OrderSplit;
  peakRssBytes: number | undefined;
  peakHeapUsedBytes: number | undefined;
  /** What the RSS was made of at its peak. */
  peakComposition: PeakComposition | undefined;
  peakQueueDepth: number | undefined;
  writesPerDomain: RequestRow[];
  /** How many domains had their status written n times in the ramp, by n (the operator's log). */
  statusWritesByCount: Record<number, number>;
  /** The ramp's status writes by what they changed, most frequent first (the operator's log). */
  statusWritesByChange: { change: string; writes: number }[];
  timings: DomainTiming[];
}

/**
 * Stops the sandbox's Pebble and starts it again with the same command line and environment (its
 * state is in memory: a fresh CA), then waits until its directory answers.
 */
async function restartPebble(ctx: Context): Promise<void> {
  const paths = sandboxPaths(ctx.env.sandboxDir);
  const pid = await readPid(paths, PEBBLE);
  if (pid === undefined) throw new Error(`no pid file for ${PEBBLE} in ${paths.pidsDir}`);
  const [command, ...args] = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
  if (!command) throw new Error(`cannot read the command line of ${PEBBLE} (pid ${pid})`);
  await stopProcess(paths, PEBBLE, 3_000);
  await startDetached(paths, { name: PEBBLE, command, args, env: PEBBLE_ENV, appendToLog: true });
  const ca = await readFile(ctx.env.acmeCaBundle, 'utf8');
  const deadline = Date.now() + 30_000;
  while ((await httpProbe(ctx.env.acmeDirectoryUrl, { ca })()) !== true) {
    if (Date.now() > deadline) throw new Error(`${PEBBLE} did not answer within 30 s of its restart`);
    await sleep(200);
  }
}

async function waitForReady(tracker: DomainTracker, ctx: Context): Promise<boolean> {
  const deadline = Date.now() + ctx.options.timeoutSeconds * 1000;
  let lastReport = 0;
  let ready = -1;
  let readyChangedAt = Date.now();
  while (tracker.count('Ready') < ctx.options.domains) {
    if (Date.now() > deadline) return false;
    if (tracker.count('Ready') !== ready) {
      ready = tracker.count('Ready');
      readyChangedAt = Date.now();
    }
    const stopAt = ctx.options.stopCaAtReady;
    if (stopAt !== undefined && ctx.caStop === undefined && ready >= stopAt) {
      const pid = await readPid(sandboxPaths(ctx.env.sandboxDir), PEBBLE);
      if (pid === undefined) throw new Error(`no pid file for ${PEBBLE}: cannot stop the CA`);
      process.kill(pid, 'SIGSTOP');
      ctx.caStop = { at: new Date().toISOString(), ready };
      progress(`${ready} Ready: stopped Pebble (SIGSTOP) for --stop-ca-at-ready`);
    }
    const stall = ctx.options.restartStalledCaSeconds;
    if (stall !== undefined && Date.now() - readyChangedAt > stall * 1000) {
      progress(`no domain became Ready for ${stall} s (${ready} Ready): restarting Pebble`);
      ctx.caRestarts.push({ at: new Date().toISOString(), ready });
      await restartPebble(ctx);
      readyChangedAt = Date.now();
    }
    if (Date.now() - lastReport >= 10_000) {
      lastReport = Date.now();
      const counts = CONDITIONS.map((c) => `${c} ${tracker.count(c)}`).join(', ');
      const last = ctx.sampler.samples.at(-1);
      progress(
        `of ${ctx.options.domains}: ${counts}; operator RSS ${mib(last?.rssBytes)}, queue ${ctx.sampler.samples.findLast((x) => x.queueDepth !== undefined)?.queueDepth ?? 'n/a'}`,
      );
    }
    await sleep(500);
  }
  return true;
}

async function ramp(
  ctx: Context,
  tracker: DomainTracker,
  plans: DomainPlan[],
  runId: string,
): Promise<RampResult> {
  const { options, cluster, sampler } = ctx;
  const start = await meterStart(ctx);
  sampler.phase = 'ramp';
  progress(`creating ${options.domains} CustomDomains, ${options.concurrency} in flight`);
  await pool(plans, options.concurrency, (d) => createDomain(cluster, d, runId));
  countOwn(ctx.own, 'POST', CUSTOM_DOMAIN_PLURAL, plans.length);
  const createSeconds = (Date.now() - start.t) / 1000;
  progress(`created in ${createSeconds.toFixed(1)} s; waiting for Ready`);
  const allReady = await waitForReady(tracker, ctx);
  const measured = await meterEnd(ctx, start);
  sampler.phase = 'settle';
  const timings = domainTimings(plans, tracker);
  const lastReady = Math.max(...timings.map((t) => t.sentAt + (t.seconds.Ready ?? 0) * 1000));
  const durationSeconds = (lastReady - start.t) / 1000;
  const log = await readLog(ctx.logFile);
  return {
    ...measured,
    startedAt: new Date(start.t).toISOString(),
    createSeconds,
    durationSeconds,
    domainsPerMinute: (tracker.count('Ready') / durationSeconds) * 60,
    ready: tracker.count('Ready'),
    timedOut: !allReady,
    timeTo: conditionStats(timings),
    orders: orderSplit(log, plans, timings),
    statusWritesByCount: statusWritesByCount(log, plans),
    statusWritesByChange: statusWritesByChange(log, plans),
    peakRssBytes: sampler.over(['ramp'], 'rssBytes').max,
    peakHeapUsedBytes: sampler.over(['ramp'], 'heapUsedBytes').max,
    peakComposition: sampler.peakComposition(['ramp']),
    peakQueueDepth: sampler.over(['ramp'], 'queueDepth').max,
    writesPerDomain: writesByResource(measured.api.rows, options.domains),
    timings,
  };
}

/** What one quiet window measured. */
interface WindowResult extends Measured {
  meanRssBytes: number | undefined;
  meanHeapUsedBytes: number | undefined;
  requestsPerSecond: RequestRow[];
}

/** `seconds` of doing nothing but sampling; the API requests of every other client meanwhile. */
async function quietWindow(ctx: Context, phase: string, seconds: number): Promise<WindowResult> {
  const { sampler } = ctx;
  const start = await meterStart(ctx);
  sampler.phase = phase;
  await sleep(seconds * 1000);
  const measured = await meterEnd(ctx, start);
  sampler.phase = 'idle';
  return {
    ...measured,
    meanRssBytes: sampler.over([phase], 'rssBytes').mean,
    meanHeapUsedBytes: sampler.over([phase], 'heapUsedBytes').mean,
    requestsPerSecond: measured.api.rows.map((r) => ({ ...r, perSecond: r.count / measured.seconds })),
  };
}

interface SteadyResult extends WindowResult {
  settledRssBytes: number | undefined;
  settledHeapUsedBytes: number | undefined;
}

async function steady(ctx: Context): Promise<SteadyResult> {
  const { options, sampler } = ctx;
  progress(`every domain Ready; settling ${options.settleSeconds} s`);
  sampler.phase = 'settle';
  await sleep(options.settleSeconds * 1000);
  const settledRss = await rssBytes(sampler.pid ?? 0);
  const settledHeap = heapUsed((await operatorMetrics(ctx.env.controllerMetricsUrl)) ?? []);
  progress(`steady window of ${options.steadySeconds} s`);
  const window = await quietWindow(ctx, 'steady', options.steadySeconds);
  return { settledRssBytes: settledRss, settledHeapUsedBytes: settledHeap, ...window };
}

interface RestartResult extends Measured {
  exitSeconds: number;
  killed: boolean;
  sameCommandLine: boolean;
  readySeconds: number;
  resyncSeconds: number | undefined;
  domainsInCluster: number;
  ordersStartedInLog: number;
  peakRssBytes: number | undefined;
  readyAfter: number;
  writes: RequestRow[];
  problems: LogProblem[];
}

/** SIGTERM, then the seconds until the process is gone; SIGKILL after 30 s. */
async function terminate(pid: number): Promise<{ seconds: number; killed: boolean }> {
  const t0 = performance.now();
  process.kill(pid, 'SIGTERM');
  while (isAlive(pid)) {
    if (performance.now() - t0 > 30_000) {
      process.kill(pid, 'SIGKILL');
      while (isAlive(pid)) await sleep(10);
      return { seconds: (performance.now() - t0) / 1000, killed: true };
    }
    await sleep(10);
  }
  return { seconds: (performance.now() - t0) / 1000, killed: false };
}

/** The PORTICO_* variables in the environment of `pid`, sorted ("NAME=value"). */
async function porticoEnvironment(pid: number): Promise<string[]> {
  const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  return environ
    .split('\0')
    .filter((kv) => kv.startsWith('PORTICO_') && !kv.startsWith('PORTICO_SANDBOX_OWNER='))
    .sort();
}

async function commandLine(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim();
}

/** Polls the reconcile counter until it has reached `target` and stood still for RESYNC_QUIET_MS. */
async function waitForResync(ctx: Context, startedAt: number, target: number): Promise<number | undefined> {
  const deadline = Date.now() + ctx.options.timeoutSeconds * 1000;
  let last = -1;
  let changedAt = Date.now();
  while (Date.now() < deadline) {
    // Only the counter (the name[] filter): a full answer renders every domain's series.
    const url = `${ctx.env.controllerMetricsUrl}?name[]=portico_reconcile_total`;
    const value = reconciles((await operatorMetrics(url)) ?? []);
    if (value !== last) {
      last = value;
      changedAt = Date.now();
    } else if (value >= target && Date.now() - changedAt >= RESYNC_QUIET_MS) {
      return (changedAt - startedAt) / 1000;
    }
    await sleep(RESYNC_POLL_MS);
  }
  return undefined;
}

async function domainsInCluster(ctx: Context): Promise<number> {
  countOwn(ctx.own, 'LIST', CUSTOM_DOMAIN_PLURAL);
  const list = (await ctx.cluster.custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: CUSTOM_DOMAIN_PLURAL,
  })) as { items: unknown[] };
  return list.items.length;
}

async function startOperatorAgain(ctx: Context): Promise<number> {
  const { env } = ctx;
  const started = await startController(sandboxPaths(env.sandboxDir), PACKAGE_ROOT, {
    kubeconfig: env.kubeconfig,
    platformCnameTarget: env.platformCnameTarget,
    dnsServer: env.dnsServer,
    acmeDirectoryUrl: env.acmeDirectoryUrl,
    acmeEmail: ACME_EMAIL,
    acmeCaBundle: env.acmeCaBundle,
    http01Port: env.http01Port,
    metricsPort: Number(new URL(env.controllerMetricsUrl).port),
    namespace: OPERATOR_NAMESPACE,
    dataPlaneAcknowledgement: env.dataPlane !== 'none',
    ...(env.dataPlane === 'contour' ? { dataPlaneName: 'Contour' } : {}),
    rateLimitAttachments: env.dataPlane === 'contour' ? ['contour'] : [],
  });
  return started.process.pid;
}

async function restart(ctx: Context, tracker: DomainTracker): Promise<RestartResult> {
  const { sampler } = ctx;
  const oldPid = sampler.pid ?? 0;
  const target = await domainsInCluster(ctx);
  const oldCommand = `${await commandLine(oldPid)} ${(await porticoEnvironment(oldPid)).join(' ')}`;
  // startController truncates the log; keep what the first process wrote.
  await copyFile(ctx.logFile, ctx.logFile.replace(/\.log$/, '.before-restart.log'));
  const start = await meterStart(ctx);
  progress(`SIGTERM to the operator (pid ${oldPid})`);
  sampler.phase = 'restart';
  const exit = await terminate(oldPid);
  sampler.pid = undefined;
  const t0 = Date.now();
  const pid = await startOperatorAgain(ctx);
  sampler.pid = pid;
  const readySeconds = (Date.now() - t0) / 1000;
  progress(
    `operator started again (pid ${pid}), ready in ${readySeconds.toFixed(2)} s; waiting for its resync`,
  );
  const resyncSeconds = await waitForResync(ctx, t0, target);
  const measured = await meterEnd(ctx, start, true);
  sampler.phase = 'after-restart';
  const lines = await readLog(ctx.logFile);
  return {
    ...measured,
    exitSeconds: exit.seconds,
    killed: exit.killed,
    sameCommandLine: oldCommand === `${await commandLine(pid)} ${(await porticoEnvironment(pid)).join(' ')}`,
    readySeconds,
    resyncSeconds,
    domainsInCluster: target,
    ordersStartedInLog: countMessages(lines, 'certificate order started'),
    peakRssBytes: sampler.over(['restart'], 'rssBytes', pid).max,
    readyAfter: tracker.count('Ready'),
    writes: writesByResource(measured.api.rows, ctx.options.domains),
    problems: logProblems(lines, 0),
  };
}

// ---------------------------------------------------------------------------------------------
// Report

interface Report {
  machine: Machine;
  options: Options;
  sandbox: { dir: string; reused: boolean; operatorPid: number; operatorEnvironment: string[] };
  /** Before any CustomDomain of the run exists. */
  baseline: WindowResult;
  ramp: Omit<RampResult, 'timings'>;
  /** Warnings and errors of the first operator process from the start of the run to the restart. */
  rampLogProblems: LogProblem[];
  /** Warnings and errors it logged before the run (the stack's start). */
  logProblemsBeforeRun: LogProblem[];
  steady: SteadyResult | undefined;
  restart: RestartResult | undefined;
  /** Pebble restarted by --restart-stalled-ca-seconds during the ramp. */
  caRestarts: { at: string; ready: number }[];
  /** Pebble stopped by --stop-ca-at-ready, if it was. */
  caStop: { at: string; ready: number } | undefined;
  samples: ProcSample[];
  domains: DomainTiming[];
}

function statsLine(label: string, s: Stats | undefined): string {
  if (s === undefined) return `  ${label.padEnd(42)} n/a`;
  const fmt = (v: number): string => v.toFixed(2).padStart(8);
  return `  ${label.padEnd(42)} p50 ${fmt(s.p50)} s  p99 ${fmt(s.p99)} s  max ${fmt(s.max)} s  (n=${s.count})`;
}

function requestLines(rows: readonly RequestRow[], indent = '  '): string[] {
  if (rows.length === 0) return [`${indent}(none)`];
  return rows.map((r) => {
    const extra =
      r.perSecond !== undefined
        ? `${r.perSecond.toFixed(3).padStart(9)} /s`
        : r.perDomain !== undefined
          ? `${r.perDomain.toFixed(2).padStart(9)} per domain`
          : '';
    return `${indent}${r.verb.padEnd(8)} ${r.resource.padEnd(36)} ${String(r.count).padStart(7)} ${extra}`;
  });
}

function failedLines(rows: readonly RequestRow[], indent: string): string[] {
  if (rows.length === 0) return [];
  return [`${indent}answered with an error (code):`, ...requestLines(rows, `${indent}  `)];
}

function problemLines(problems: readonly LogProblem[], indent = '  '): string[] {
  if (problems.length === 0) return [`${indent}(no warn or error lines)`];
  return problems.slice(0, 15).map((p) => {
    const example = p.example === undefined ? '' : `: ${p.example.slice(0, 200)}`;
    return `${indent}${String(p.count).padStart(6)} ${p.level.padEnd(5)} ${p.msg}${example}`;
  });
}

function counts(record: Record<string, number>, none: string): string {
  const parts = Object.entries(record)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k} ${v}`);
  return parts.length === 0 ? none : parts.join(', ');
}

function percent(share: number | undefined): string {
  return share === undefined ? 'n/a' : `${(share * 100).toFixed(0)} %`;
}

function reconcileLine(r: ReconcileSummary): string {
  const mean = r.meanSeconds === undefined ? 'n/a' : `${(r.meanSeconds * 1000).toFixed(0)} ms`;
  const bound = (v: number | undefined): string => (v === undefined ? 'n/a' : `≤ ${v} s`);
  return `${r.count} (${counts(r.byResult, 'none')}); mean ${mean}, p50 ${bound(r.p50AtMostSeconds)}, p99 ${bound(r.p99AtMostSeconds)} (histogram buckets)`;
}

function machineLines(r: Report): string[] {
  const m = r.machine;
  const dirty =
    m.uncommittedFiles > 0
      ? ` (+${m.uncommittedFiles} changed files under src/ at the end of the run; dist/ is built from the working tree)`
      : '';
  return [
    `machine: ${m.cpus} CPUs (${m.model}), ${mib(m.memoryBytes)} memory, load average ${m.loadAverage1m.toFixed(2)} at the end; node ${m.node}`,
    `commit:  ${m.commit}${dirty}`,
    `sandbox: ${r.sandbox.dir} (${r.sandbox.reused ? 'reused' : 'started by this run'}), operator pid ${r.sandbox.operatorPid}`,
    `operator environment: ${r.sandbox.operatorEnvironment.join(' ') || '(no PORTICO_* variables)'}`,
    `run:     ${r.options.domains} domains over ${r.options.namespaces} namespaces, ${r.options.perRegisteredDomain} per registered domain, ${r.options.concurrency} creates in flight`,
  ];
}

function rampSummaryLines(r: Report): string[] {
  const ramp = r.ramp;
  const timedOut = ramp.timedOut ? ` (timed out after ${r.options.timeoutSeconds} s)` : '';
  return [
    '',
    `ramp (from the first create sent to the last Ready):`,
    `  Ready                                    ${ramp.ready} of ${r.options.domains}${timedOut}`,
    `  creates sent and answered in             ${secs(ramp.createSeconds, 1)}`,
    `  all Ready after                          ${secs(ramp.durationSeconds, 1)}`,
    `  domains per minute                       ${ramp.domainsPerMinute.toFixed(1)}`,
    `  ACME orders (portico_acme_orders_total)  ${counts(ramp.acmeOrders, 'none')}`,
    `  reconciles                               ${reconcileLine(ramp.reconciles)}`,
    `  peak work queue depth (1 s samples)      ${ramp.peakQueueDepth ?? 'n/a'}`,
    `  operator CPU / machine CPU busy          ${secs(ramp.operatorCpuSeconds)} / ${percent(ramp.machineBusy)} of ${r.machine.cpus} CPUs`,
    `  peak RSS / peak JS heap used             ${mib(ramp.peakRssBytes)} / ${mib(ramp.peakHeapUsedBytes)}`,
    `  at the RSS peak                          ${compositionLine(ramp.peakComposition)}`,
    ...(r.caStop
      ? [`  Pebble stopped (--stop-ca-at-ready)      ${r.caStop.at} with ${r.caStop.ready} Ready`]
      : []),
    `  Pebble restarted (stalled CA)            ${r.caRestarts.length === 0 ? 'never' : r.caRestarts.map((c) => `${c.at} with ${c.ready} Ready`).join('; ')}`,
  ];
}

function rampLines(r: Report): string[] {
  const ramp = r.ramp;
  const writes = ramp.writesPerDomain.reduce((s, w) => s + w.count, 0);
  return [
    ...rampSummaryLines(r),
    '',
    'time from create sent to condition True (lastTransitionTime):',
    ...CONDITIONS.map((c) => statsLine(c, ramp.timeTo[c])),
    '',
    `certificate orders, from the operator's log (${ramp.orders.domains} domains with a complete order; ${ramp.orders.retried} needed more than one):`,
    ...Object.entries(ramp.orders.steps).map(([name, s]) => statsLine(name, s)),
    '',
    "API requests during the ramp (apiserver_request_total delta, the benchmark's own requests subtracted):",
    ...requestLines(ramp.api.rows),
    ...failedLines(ramp.api.failed, '  '),
    '',
    'API writes during the ramp, per domain:',
    ...requestLines(ramp.writesPerDomain),
    `  total ${writes} writes, ${(writes / r.options.domains).toFixed(2)} per domain`,
    `  status writes of one domain (operator log): ${Object.entries(ramp.statusWritesByCount)
      .map(([n, domains]) => `${n} for ${domains}`)
      .join(', ')}`,
    '  status writes by what they changed (operator log; the 12 most frequent):',
    ...ramp.statusWritesByChange.slice(0, 12).map((c) => `    ${String(c.writes).padStart(7)}  ${c.change}`),
    '',
    `operator log warnings and errors from the start of the run to the restart (${r.rampLogProblems.reduce((s, p) => s + p.count, 0)} lines):`,
    ...problemLines(r.rampLogProblems),
    `  before the run (the stack's start): ${r.logProblemsBeforeRun.reduce((s, p) => s + p.count, 0)} lines`,
    ...problemLines(r.logProblemsBeforeRun, '    '),
  ];
}

function windowLines(w: WindowResult): string[] {
  return [
    `  ${w.seconds.toFixed(1)} s: mean RSS ${mib(w.meanRssBytes)}, mean JS heap used ${mib(w.meanHeapUsedBytes)}`,
    `  operator CPU ${secs(w.operatorCpuSeconds, 3)}; machine CPU busy ${percent(w.machineBusy)}; reconciles ${reconcileLine(w.reconciles)}`,
    '  API requests per second (every client but the benchmark):',
    ...requestLines(w.requestsPerSecond, '    '),
    ...failedLines(w.api.failed, '    '),
  ];
}

function perDomain(after: number | undefined, before: number | undefined, domains: number): string {
  if (after === undefined || before === undefined) return 'n/a';
  return `${((after - before) / domains / 1024).toFixed(1)} KiB`;
}

function baselineLines(r: Report): string[] {
  return [
    '',
    'baseline, before any CustomDomain of the run (namespaces, Services, EndpointSlices made):',
    ...windowLines(r.baseline),
  ];
}

function steadyLines(r: Report): string[] {
  const s = r.steady;
  if (s === undefined) return [];
  const n = r.options.domains;
  return [
    '',
    `${r.options.settleSeconds} s after the last Ready: RSS ${mib(s.settledRssBytes)}, JS heap used ${mib(s.settledHeapUsedBytes)}`,
    `  growth over the baseline per domain: RSS ${perDomain(s.meanRssBytes, r.baseline.meanRssBytes, n)}, heap ${perDomain(s.meanHeapUsedBytes, r.baseline.meanHeapUsedBytes, n)} (steady means minus baseline means, / N)`,
    'steady window, every domain Ready:',
    ...windowLines(s),
  ];
}

function restartLines(x: RestartResult | undefined): string[] {
  if (x === undefined) return [];
  const killed = x.killed ? ' (did not exit in 30 s: SIGKILL)' : '';
  const differs = x.sameCommandLine
    ? ''
    : ' (command line or PORTICO_* environment differs from the first process!)';
  return [
    '',
    'restart:',
    `  SIGTERM → exit                           ${secs(x.exitSeconds)}${killed} (target ≤ 5 s)`,
    `  start → /readyz 200                      ${secs(x.readySeconds)}${differs}`,
    `  start → last reconcile of the resync     ${secs(x.resyncSeconds)} (${x.domainsInCluster} CustomDomains in the cluster)`,
    `  reconciles                               ${reconcileLine(x.reconciles)}`,
    `  ACME orders after the restart            ${counts(x.acmeOrders, '0')} (metric); ${x.ordersStartedInLog} 'certificate order started' log lines`,
    `  operator CPU from start to resync end    ${secs(x.operatorCpuSeconds)}; machine CPU busy ${percent(x.machineBusy)}`,
    `  peak RSS during the resync               ${mib(x.peakRssBytes)}`,
    `  domains Ready after the resync           ${x.readyAfter}`,
    `  API requests from SIGTERM to the end of the resync (${x.seconds.toFixed(1)} s):`,
    ...requestLines(x.api.rows, '    '),
    ...failedLines(x.api.failed, '    '),
    '  of which writes:',
    ...requestLines(x.writes, '    '),
    '  operator log warnings and errors since the restart:',
    ...problemLines(x.problems, '    '),
  ];
}

function printReport(r: Report): void {
  const lines = [
    '',
    '== bench:scale ==',
    ...machineLines(r),
    ...baselineLines(r),
    ...rampLines(r),
    ...steadyLines(r),
    ...restartLines(r.restart),
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

// ---------------------------------------------------------------------------------------------
// Main

async function startSandbox(dir: string): Promise<{ env: SandboxEnv; reused: boolean }> {
  const status = await sandboxStatus(dir).catch(() => undefined);
  if (status?.up) return { env: await readSandboxEnv(dir), reused: true };
  return { env: await sandboxUp({ dir, applyExamples: false }), reused: false };
}

async function setup(ctx: Context, runId: string, plans: ReturnType<typeof planDomains>): Promise<void> {
  progress(`creating ${plans.namespaces.length} namespaces with Service web and a ready EndpointSlice`);
  await pool(plans.namespaces, ctx.options.concurrency, (ns) =>
    createProject(ctx.cluster, ns, { [RUN_LABEL]: runId }),
  );
  progress(`setting ${plans.domains.length} CNAMEs to ${ctx.env.platformCnameTarget}`);
  const dns = new DnsManagementClient(ctx.env.dnsMgmtUrl);
  await pool(plans.domains, ctx.options.concurrency, (d) =>
    dns.setCname(d.hostname, ctx.env.platformCnameTarget),
  );
}

async function measure(ctx: Context, reused: boolean, operatorPid: number): Promise<Report> {
  const runId = Date.now().toString(36);
  const plans = planDomains(runId, ctx.options);
  await setup(ctx, runId, plans);
  const tracker = new DomainTracker(ctx.cluster, runId, ctx.own);
  await tracker.start();
  const runStart = Date.now();
  try {
    progress(`baseline window of ${ctx.options.baselineSeconds} s before any CustomDomain of this run`);
    const baseline = await quietWindow(ctx, 'baseline', ctx.options.baselineSeconds);
    const { timings, ...ramped } = await ramp(ctx, tracker, plans.domains, runId);
    const steadyResult = ramped.timedOut ? undefined : await steady(ctx);
    const lines = await readLog(ctx.logFile);
    const rampLogProblems = logProblems(lines, runStart);
    const logProblemsBeforeRun = logProblems(
      lines.filter((l) => l.time < runStart),
      0,
    );
    const restartResult = ramped.timedOut ? undefined : await restart(ctx, tracker);
    return {
      machine: await machine(),
      options: ctx.options,
      sandbox: {
        dir: ctx.env.sandboxDir,
        reused,
        operatorPid,
        operatorEnvironment: ctx.operatorEnvironment,
      },
      baseline,
      ramp: ramped,
      rampLogProblems,
      logProblemsBeforeRun,
      steady: steadyResult,
      restart: restartResult,
      caRestarts: ctx.caRestarts,
      caStop: ctx.caStop,
      samples: ctx.sampler.samples,
      domains: timings,
    };
  } finally {
    tracker.stop();
  }
}

/** Ctrl-C or SIGTERM: the sandbox goes down as at the end of a run (unless --keep). */
function stopOnSignals(dir: string, keep: boolean): void {
  const stop = (signal: NodeJS.Signals): void => {
    progress(`${signal}: ${keep ? `leaving the sandbox up in ${dir} (--keep)` : 'stopping the sandbox'}`);
    const down = keep ? Promise.resolve() : sandboxDown(dir).then(() => undefined);
    void down.finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function main(): Promise<void> {
  const options = parseOptions();
  const t0 = Date.now();
  // The operator takes its flags from the environment too; the sandbox passes its own to it.
  process.env['PORTICO_ACME_ORDERS_PER_WINDOW'] = String(options.ordersPerWindow);
  if (options.resyncSeconds !== undefined)
    process.env['PORTICO_RESYNC_SECONDS'] = String(options.resyncSeconds);
  const { env, reused } = await startSandbox(options.dir);
  stopOnSignals(env.sandboxDir, options.keep);
  const paths = sandboxPaths(env.sandboxDir);
  const operatorPid = await readPid(paths, CONTROLLER);
  if (operatorPid === undefined) throw new Error(`no pid file for ${CONTROLLER} in ${paths.pidsDir}`);
  const ticks = await clockTicks();
  const sampler = new Sampler(env.controllerMetricsUrl, ticks, t0);
  sampler.pid = operatorPid;
  sampler.start();
  const ctx: Context = {
    options,
    env,
    cluster: await connect(env),
    sampler,
    ticks,
    own: new Map(),
    logFile: paths.log(CONTROLLER),
    operatorEnvironment: await porticoEnvironment(operatorPid),
    caRestarts: [],
    caStop: undefined,
  };
  try {
    const report = await measure(ctx, reused, operatorPid);
    printReport(report);
    if (options.json !== undefined) {
      await writeFile(options.json, `${JSON.stringify(report, null, 2)}\n`);
      progress(`wrote ${options.json}`);
    }
  } finally {
    sampler.stop();
    if (options.keep) progress(`left the sandbox up in ${env.sandboxDir} (--keep)`);
    else await sandboxDown(env.sandboxDir);
  }
}

await main();
