/**
 * Benchmark: N CustomDomains applied at once on a sandbox whose data plane is a real Traefik
 * (`--data-plane traefik`), timed until an HTTPS client sees each one served, then deleted at once
 * and timed until a request for each is refused. Not part of `npm test` (docs/benchmarks.md,
 * "Apply → first HTTPS answer through Traefik").
 *
 *   npm run bench:traffic -- --domains 100
 *   npm run bench:traffic -- --domains 1000 --namespaces 20
 *   npm run bench:traffic -- --domains 100 --keep     # leave .sandbox-traffic up afterwards
 *
 * Prints the figures on stdout (progress on stderr) and writes them, with each domain's times, to
 * --json (default docs/bench-data/traefik-traffic-<N>-<UTC date and minute>.json).
 *
 * Steps: a sandbox in its own directory (`.sandbox-traffic/`, started with `dataPlane: 'traefik'`
 * unless one is up there); --namespaces namespaces on the Pro plan, each with a Service `web` whose
 * EndpointSlice points at the sandbox's project backend (so Traefik proxies to a real HTTP server);
 * every hostname's CNAME set to the platform target; N CustomDomains created with --concurrency
 * creates in flight.
 *
 * "Served" is what a browser that resolved the hostname to the platform would see: one HTTPS request
 * (node:https, a new connection each time) to Traefik's `websecure` entrypoint on loopback, SNI and
 * Host the hostname, trusting only Pebble's issuing root (its management API `/roots/0`), whose
 * handshake presents the certificate with the serial the domain's `status.certificate.serialNumber`
 * names, answered 200 with the backend's page for that hostname. A domain is probed from the moment
 * a watch on the CustomDomains sees a serial in its status (no answer can pass before: the serial
 * to compare with is not known) and every --interval-ms after, with at most --probe-concurrency
 * probes in flight over all domains: the interval bounds the resolution of each figure, and when the
 * probes cannot keep up the real gaps grow, which the report prints. A domain whose first probe
 * already passes is counted: its figure is the moment its serial reached the status, and the
 * certificate may have been served a little earlier.
 *
 * The watch also records when it first sees CertificateReady, Routed and Ready True (Ready, with the
 * operator's serving check on as the sandbox runs it, follows the operator's own request to Traefik),
 * and, after the delete, the CustomDomain gone: the report sets the client's view beside the status.
 *
 * Delete: once every domain is served (or --timeout-seconds passed) and Ready (or 60 s more passed),
 * every CustomDomain is deleted
 * with --concurrency deletes in flight, and each hostname is probed from its delete on, every
 * --interval-ms, until a request is refused: anything but a 200 with the backend's page (a TLS
 * failure, as when Traefik presents its default certificate, which Pebble's root does not sign, a
 * 404, a reset connection).
 *
 * Every --metrics-interval-ms (2000) it reads the operator's CustomDomain work queue depth and
 * reconcile counters from its /metrics (only those families, `?name[]=`): the report gives each
 * phase's deepest queue, when it was last seen non-empty and the mean reconcile, so that the time a
 * domain waited for the operator can be told from the time Traefik took.
 *
 * The operator's ACME order budget is set to N (PORTICO_ACME_ORDERS_PER_WINDOW, as bench:scale
 * does); Pebble has no such limit.
 */
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  makeInformer,
  type KubernetesListObject,
  type V1EndpointSlice,
} from '@kubernetes/client-node';
import {
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  PLAN_LABEL,
  VERSION,
  type CustomDomain,
} from '../../src/api/customdomain.js';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import {
  PACKAGE_ROOT,
  readSandboxEnv,
  sandboxDown,
  sandboxStatus,
  sandboxUp,
  type SandboxEnv,
} from '../../src/sandbox/stack.js';
import { backendEndpointSlice } from '../../src/data-planes/traefik/sandbox-process.js';
import { parsePrometheus, sumOf } from './process-figures.js';
import { machineBusySince, machineCpuTimes, pool, positive, stats, type Stats } from './run-helpers.js';

const run = promisify(execFile);
const RUN_LABEL = 'portico.dev/bench-run';
/** The conditions whose first True the watch records (their lastTransitionTime has 1 s steps). */
const SEEN_CONDITIONS = ['CertificateReady', 'Routed', 'Ready'] as const;
type SeenCondition = (typeof SEEN_CONDITIONS)[number];
/** How long after the last domain is served the benchmark waits for every Ready before deleting. */
const READY_WAIT_MS = 60_000;
/** The operator's metric families the benchmark reads (`/metrics?name[]=…` answers only these). */
const OPERATOR_FAMILIES = [
  'portico_workqueue_depth_by_priority',
  'portico_reconcile_total',
  'portico_reconcile_duration_seconds',
];
/** The samples of those families it uses. */
const OPERATOR_SAMPLES = new Set([
  'portico_workqueue_depth_by_priority',
  'portico_reconcile_total',
  'portico_reconcile_duration_seconds_sum',
]);
/** Each probe's connection and answer must come within this many milliseconds. */
const PROBE_TIMEOUT_MS = 5_000;

interface Options {
  domains: number;
  namespaces: number;
  concurrency: number;
  intervalMs: number;
  probeConcurrency: number;
  metricsIntervalMs: number;
  timeoutSeconds: number;
  keep: boolean;
  json: string;
  dir: string;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      domains: { type: 'string', default: '100' },
      namespaces: { type: 'string', default: '10' },
      concurrency: { type: 'string', default: '32' },
      'interval-ms': { type: 'string', default: '500' },
      'probe-concurrency': { type: 'string', default: '8' },
      'metrics-interval-ms': { type: 'string', default: '2000' },
      'timeout-seconds': { type: 'string', default: '1800' },
      keep: { type: 'boolean', default: false },
      json: { type: 'string' },
      dir: { type: 'string', default: '.sandbox-traffic' },
    },
  });
  const domains = positive('domains', values.domains);
  return {
    domains,
    namespaces: positive('namespaces', values.namespaces),
    concurrency: positive('concurrency', values.concurrency),
    intervalMs: positive('interval-ms', values['interval-ms']),
    probeConcurrency: positive('probe-concurrency', values['probe-concurrency']),
    metricsIntervalMs: positive('metrics-interval-ms', values['metrics-interval-ms']),
    timeoutSeconds: positive('timeout-seconds', values['timeout-seconds']),
    keep: values.keep,
    json: resolve(
      values.json ??
        `docs/bench-data/traefik-traffic-${domains}-${new Date().toISOString().slice(0, 16).replace(/[-:]/g, '')}.json`,
    ),
    dir: resolve(values.dir),
  };
}

function progress(line: string): void {
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ---------------------------------------------------------------------------------------------
// Machine

async function machine(): Promise<Record<string, unknown>> {
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? 'unknown';
  const git = async (args: string[]): Promise<string> =>
    run('git', args, { cwd: PACKAGE_ROOT }).then(
      (r) => r.stdout.trim(),
      () => 'unknown',
    );
  const status = await git(['status', '--porcelain', '--', 'src']);
  return {
    cpus: cpus().length,
    model: model.trim(),
    memoryBytes: totalmem(),
    node: process.version,
    commit: await git(['rev-parse', 'HEAD']),
    uncommittedSrcFiles: status === '' || status === 'unknown' ? 0 : status.split('\n').length,
  };
}

// ---------------------------------------------------------------------------------------------
// Figures (nearest-rank percentiles: run-helpers.ts `stats`)

function figuresLine(label: string, f: Stats | undefined): string {
  if (f === undefined) return `  ${label.padEnd(46)} n/a`;
  const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
  return `  ${label.padEnd(46)} n=${f.count}  p50 ${s(f.p50)}  p90 ${s(f.p90)}  p99 ${s(f.p99)}  max ${s(f.max)}`;
}

// ---------------------------------------------------------------------------------------------
// Probes

/** What one HTTPS request for a hostname through Traefik saw. */
interface ProbeOutcome {
  /** HTTP status, when an answer came. */
  status?: number;
  /** The presented leaf certificate's serial, uppercase without leading zeros. */
  serial?: string | undefined;
  /** The body is the backend's page for this hostname. */
  backendPage?: boolean;
  /** Error code or message when no answer came (TLS verification, reset, timeout). */
  error?: string;
}

/** A serial as hex, uppercase, without leading zeros (Node's and the status's forms differ there). */
function normalSerial(serial: string): string {
  return serial.toUpperCase().replace(/^0+(?=.)/, '');
}

/**
 * `GET https://<hostname>/` on a new connection to `host:port`, SNI and Host `hostname`, trusting
 * only `ca`. Never throws: a failure is an outcome.
 */
function probe(host: string, port: number, hostname: string, ca: string): Promise<ProbeOutcome> {
  return new Promise((resolvePromise) => {
    const req = httpsRequest(
      {
        host,
        port,
        method: 'GET',
        path: '/',
        servername: hostname,
        headers: { host: hostname, 'user-agent': 'portico-bench-traffic' },
        ca,
        agent: false,
        timeout: PROBE_TIMEOUT_MS,
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          resolvePromise({
            status: res.statusCode ?? 0,
            serial: peer.serialNumber ? normalSerial(peer.serialNumber) : undefined,
            backendPage: body.includes(`answered ${hostname} /`),
          });
        });
        res.on('error', (err) => {
          resolvePromise({ error: errorText(err) });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)));
    req.on('error', (err: Error & { code?: string }) => {
      resolvePromise({ error: err.code ?? err.message });
    });
    req.end();
  });
}

function outcomeText(o: ProbeOutcome | undefined): string {
  if (o === undefined) return 'not probed';
  if (o.error !== undefined) return o.error;
  return `HTTP ${o.status}${o.backendPage ? ' (backend page)' : ''}, serial ${o.serial ?? 'none'}`;
}

/** What refused a request for a deleted domain, grouped: the error, or the status and which certificate. */
function refusalText(o: ProbeOutcome, issuedSerial: string | undefined): string {
  if (o.error !== undefined) return o.error;
  const certificate =
    o.serial === issuedSerial ? 'the issued certificate' : `certificate ${o.serial ?? 'none'}`;
  return `HTTP ${o.status} with ${certificate}${o.backendPage ? ' (backend page)' : ''}`;
}

/** One domain as the benchmark follows it. Times are Date.now() milliseconds. */
interface Domain {
  namespace: string;
  name: string;
  hostname: string;
  createSentAt?: number;
  /** When the watch first saw a serial in the status, and that serial. */
  serialSeenAt?: number;
  serial?: string;
  /** When the watch first saw each condition of {@link SEEN_CONDITIONS} True. */
  seenTrueAt: Partial<Record<SeenCondition, number>>;
  /** When the watch saw the CustomDomain deleted (its finalizer removed). */
  goneAt?: number;
  servedAt?: number;
  servedOnFirstProbe?: boolean;
  deleteSentAt?: number;
  refusedAt?: number;
  refusal?: string;
  /** The probe phase's state: when the next probe is due, the last one's start and outcome. */
  nextDueAt?: number | undefined;
  lastProbeAt?: number | undefined;
  lastOutcome?: ProbeOutcome;
  probes: number;
}

/**
 * Probes the domains `isActive` holds, each every `intervalMs` at most, with `concurrency` probes in
 * flight over all of them, until `done()`; calls `check` with each outcome (returning true ends the
 * domain's probing). Records the gap between consecutive probes of one domain in `gaps`.
 *
 * @returns the number of probes made
 */
async function probeLoop(
  domains: readonly Domain[],
  options: {
    intervalMs: number;
    concurrency: number;
    isActive: (d: Domain) => boolean;
    check: (d: Domain, outcome: ProbeOutcome, startedAt: number) => boolean;
    done: () => boolean;
    deadline: number;
    target: { host: string; port: number; ca: string };
    gaps: number[];
  },
): Promise<number> {
  const busy = new Set<Domain>();
  let made = 0;
  const pick = (): Domain | undefined => {
    let best: Domain | undefined;
    for (const d of domains) {
      if (busy.has(d) || !options.isActive(d)) continue;
      if (best === undefined || (d.nextDueAt ?? 0) < (best.nextDueAt ?? 0)) best = d;
    }
    return best;
  };
  const worker = async (): Promise<void> => {
    while (!options.done() && Date.now() < options.deadline) {
      const d = pick();
      const wait = d === undefined ? 50 : (d.nextDueAt ?? 0) - Date.now();
      if (d === undefined || wait > 0) {
        await sleep(Math.min(Math.max(wait, 1), 50));
        continue;
      }
      busy.add(d);
      const startedAt = Date.now();
      if (d.lastProbeAt !== undefined) options.gaps.push(startedAt - d.lastProbeAt);
      d.lastProbeAt = startedAt;
      d.nextDueAt = startedAt + options.intervalMs;
      d.probes++;
      made++;
      const outcome = await probe(options.target.host, options.target.port, d.hostname, options.target.ca);
      d.lastOutcome = outcome;
      if (options.check(d, outcome, startedAt)) d.nextDueAt = undefined;
      busy.delete(d);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return made;
}

// ---------------------------------------------------------------------------------------------
// The operator's work queue

/** One read of the operator's /metrics for the CustomDomain controller. */
interface OperatorSample {
  /** Date.now() of the read. */
  at: number;
  phase: 'apply' | 'ready-wait' | 'delete';
  /** Keys waiting in its work queue, every priority. */
  queueDepth: number;
  reconciles: number;
  /** Sum of the reconciles' durations, seconds. */
  reconcileSeconds: number;
}

/**
 * Reads the operator's CustomDomain work queue depth and reconcile counters from `url` every
 * `intervalMs` into `samples`, tagged with `phase()`, until the returned function is called. Only the
 * four families are asked for, so a read costs the operator little at any number of domains.
 */
function sampleOperator(
  url: string,
  intervalMs: number,
  phase: () => OperatorSample['phase'],
  samples: OperatorSample[],
): () => void {
  const query = OPERATOR_FAMILIES.map((n) => `name[]=${n}`).join('&');
  const controller = { controller: 'customdomain' };
  const read = async (): Promise<void> => {
    try {
      const res = await fetch(`${url}?${query}`, { signal: AbortSignal.timeout(intervalMs) });
      if (!res.ok) return;
      const m = parsePrometheus(await res.text(), OPERATOR_SAMPLES);
      samples.push({
        at: Date.now(),
        phase: phase(),
        queueDepth: sumOf(m, 'portico_workqueue_depth_by_priority', controller),
        reconciles: sumOf(m, 'portico_reconcile_total', controller),
        reconcileSeconds: sumOf(m, 'portico_reconcile_duration_seconds_sum', controller),
      });
    } catch {
      // A read that fails or times out is a gap in the samples, not an error of the run.
    }
  };
  const timer = setInterval(() => void read(), intervalMs);
  void read();
  return () => {
    clearInterval(timer);
  };
}

/** Of one phase's samples: the deepest queue, the last moment it was not empty, the mean reconcile. */
interface QueueSummary {
  samples: number;
  peakDepth: number;
  /** Milliseconds from the phase's start to the last sample with a non-empty queue. */
  lastNonEmptyMs?: number | undefined;
  reconciles: number;
  meanReconcileMs?: number | undefined;
}

function queueSummary(
  samples: readonly OperatorSample[],
  phase: OperatorSample['phase'],
  start: number,
): QueueSummary {
  const own = samples.filter((x) => x.phase === phase);
  const first = own[0];
  const last = own.at(-1);
  const reconciles = first && last ? last.reconciles - first.reconciles : 0;
  const seconds = first && last ? last.reconcileSeconds - first.reconcileSeconds : 0;
  const nonEmpty = own.filter((x) => x.queueDepth > 0).at(-1);
  return {
    samples: own.length,
    peakDepth: Math.max(0, ...own.map((x) => x.queueDepth)),
    lastNonEmptyMs: nonEmpty === undefined ? undefined : nonEmpty.at - start,
    reconciles,
    meanReconcileMs: reconciles > 0 ? (seconds / reconciles) * 1000 : undefined,
  };
}

function queueLine(label: string, q: QueueSummary): string {
  const last =
    q.lastNonEmptyMs === undefined
      ? 'never seen non-empty'
      : `last seen non-empty ${(q.lastNonEmptyMs / 1000).toFixed(1)} s into it`;
  const mean = q.meanReconcileMs === undefined ? 'n/a' : `${q.meanReconcileMs.toFixed(0)} ms`;
  return `  ${label.padEnd(12)} peak depth ${q.peakDepth}, ${last}; ${q.reconciles} reconciles, mean ${mean} (${q.samples} reads)`;
}

// ---------------------------------------------------------------------------------------------
// Cluster

interface Cluster {
  kc: KubeConfig;
  core: CoreV1Api;
  discovery: DiscoveryV1Api;
  custom: CustomObjectsApi;
}

function connect(env: SandboxEnv): Cluster {
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    discovery: kc.makeApiClient(DiscoveryV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
}

/** A Pro namespace with Service `web` (port `http` 80) whose EndpointSlice is the sandbox's backend. */
async function createProject(
  cluster: Cluster,
  ns: string,
  runId: string,
  backendPort: number,
): Promise<void> {
  await cluster.core.createNamespace({
    body: { metadata: { name: ns, labels: { [PLAN_LABEL]: 'pro', [RUN_LABEL]: runId } } },
  });
  await cluster.core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: 'web' }, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } },
  });
  await cluster.discovery.createNamespacedEndpointSlice({
    namespace: ns,
    body: backendEndpointSlice(ns, 'web', 'web-1', backendPort) as unknown as V1EndpointSlice,
  });
}

/** Pebble's issuing root, PEM, from its management API (served with the sandbox's own CA). */
async function pebbleRoot(env: SandboxEnv): Promise<string> {
  const ca = await readFile(env.acmeCaBundle);
  const response = await new Promise<{ status: number; body: string }>((resolvePromise, reject) => {
    httpsRequest(`${env.acmeMgmtUrl}/roots/0`, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolvePromise({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
  if (response.status !== 200) throw new Error(`GET ${env.acmeMgmtUrl}/roots/0: HTTP ${response.status}`);
  return response.body;
}

/**
 * Keeps, for each domain of the run, the first moment the watch saw a serial in its status, each of
 * SEEN_CONDITIONS True, and the CustomDomain deleted (client-node's informer: a list, then a watch;
 * started again after an error). These are the moments the operator's status writes reached the
 * watch, not the moments the operator decided.
 */
function watchDomains(cluster: Cluster, runId: string, byKey: Map<string, Domain>): () => Promise<void> {
  const informer = makeInformer<CustomDomain>(
    cluster.kc,
    `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
    () =>
      cluster.custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: CUSTOM_DOMAIN_PLURAL,
        labelSelector: `${RUN_LABEL}=${runId}`,
      }) as Promise<KubernetesListObject<CustomDomain>>,
    `${RUN_LABEL}=${runId}`,
  );
  const record = (cd: CustomDomain): void => {
    const d = byKey.get(`${cd.metadata.namespace}/${cd.metadata.name}`);
    if (d === undefined) return;
    const serial = cd.status?.certificate?.serialNumber;
    if (serial && d.serial !== normalSerial(serial)) {
      d.serial = normalSerial(serial);
      d.serialSeenAt ??= Date.now();
    }
    for (const type of SEEN_CONDITIONS) {
      if (cd.status?.conditions?.some((c) => c.type === type && c.status === 'True'))
        d.seenTrueAt[type] ??= Date.now();
    }
  };
  let stopped = false;
  informer.on('add', record);
  informer.on('update', record);
  informer.on('delete', (cd) => {
    const d = byKey.get(`${cd.metadata.namespace}/${cd.metadata.name}`);
    if (d !== undefined) d.goneAt ??= Date.now();
  });
  informer.on('error', (err: unknown) => {
    if (stopped) return;
    progress(`watch of CustomDomains ended (${errorText(err)}); starting it again`);
    setTimeout(() => void informer.start().catch(() => undefined), 1000);
  });
  void informer.start();
  return async () => {
    stopped = true;
    await informer.stop();
  };
}

// ---------------------------------------------------------------------------------------------
// Main

async function startSandbox(dir: string): Promise<{ env: SandboxEnv; reused: boolean }> {
  const status = await sandboxStatus(dir).catch(() => undefined);
  if (status?.up) {
    const env = await readSandboxEnv(dir);
    if (env.dataPlane !== 'traefik')
      throw new Error(`the sandbox in ${dir} runs data plane ${env.dataPlane}, not traefik: stop it first`);
    return { env, reused: true };
  }
  return { env: await sandboxUp({ dir, applyExamples: false, dataPlane: 'traefik' }), reused: false };
}

function hostPort(addr: string): { host: string; port: number } {
  const at = addr.lastIndexOf(':');
  return { host: addr.slice(0, at), port: Number(addr.slice(at + 1)) };
}

async function main(): Promise<void> {
  const options = parseOptions();
  process.env['PORTICO_ACME_ORDERS_PER_WINDOW'] = String(options.domains);
  const loadAtStart = loadavg();
  const { env, reused } = await startSandbox(options.dir);
  const stopSandbox = async (): Promise<void> => {
    if (options.keep) progress(`left the sandbox up in ${env.sandboxDir} (--keep)`);
    else await sandboxDown(env.sandboxDir);
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping`);
      void stopSandbox().finally(() => process.exit(130));
    });
  }
  if (env.ingressHttpsAddr === undefined || env.projectBackendUrl === undefined)
    throw new Error(`the sandbox in ${env.sandboxDir} has no Traefik entrypoint or project backend`);
  const cluster = connect(env);
  const target = { ...hostPort(env.ingressHttpsAddr), ca: await pebbleRoot(env) };
  const backendPort = Number(new URL(env.projectBackendUrl).port);

  const runId = Date.now().toString(36);
  const namespaces = Array.from({ length: options.namespaces }, (_, j) => `traffic-${runId}-${j}`);
  const domains: Domain[] = Array.from({ length: options.domains }, (_, i) => ({
    namespace: namespaces[i % namespaces.length] ?? '',
    name: `d${i}`,
    hostname: `d${i}.r${i}-${runId}.example`,
    probes: 0,
    seenTrueAt: {},
  }));
  const byKey = new Map(domains.map((d) => [`${d.namespace}/${d.name}`, d]));
  try {
    progress(`creating ${namespaces.length} namespaces, Service web backed by ${env.projectBackendUrl}`);
    await pool(namespaces, options.concurrency, (ns) => createProject(cluster, ns, runId, backendPort));
    progress(`setting ${domains.length} CNAMEs to ${env.platformCnameTarget}`);
    const dns = new DnsManagementClient(env.dnsMgmtUrl);
    await pool(domains, options.concurrency, (d) => dns.setCname(d.hostname, env.platformCnameTarget));
    const stopWatch = watchDomains(cluster, runId, byKey);
    let phase: OperatorSample['phase'] = 'apply';
    const operatorSamples: OperatorSample[] = [];
    const stopSampling = sampleOperator(
      env.controllerMetricsUrl,
      options.metricsIntervalMs,
      () => phase,
      operatorSamples,
    );

    // Apply → served.
    const applyCpu = await machineCpuTimes();
    const applyStart = Date.now();
    const applyGaps: number[] = [];
    let served = 0;
    const creating = pool(domains, options.concurrency, async (d) => {
      d.createSentAt = Date.now();
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
    });
    const reporter = setInterval(() => {
      const withSerial = domains.filter((d) => d.serial !== undefined).length;
      progress(`apply: ${withSerial} with a serial in status, ${served} served, of ${domains.length}`);
    }, 10_000);
    const applyDeadline = applyStart + options.timeoutSeconds * 1000;
    const [, applyProbes] = await Promise.all([
      creating.then(() => {
        progress(`all ${domains.length} creates answered`);
      }),
      probeLoop(domains, {
        intervalMs: options.intervalMs,
        concurrency: options.probeConcurrency,
        isActive: (d) => d.serial !== undefined && d.servedAt === undefined,
        check: (d, o, startedAt) => {
          const ok = o.status === 200 && o.backendPage === true && o.serial === d.serial;
          if (ok) {
            d.servedAt = startedAt;
            d.servedOnFirstProbe = d.probes === 1;
            served++;
          }
          return ok;
        },
        done: () => served === domains.length,
        deadline: applyDeadline,
        target,
        gaps: applyGaps,
      }),
    ]);
    clearInterval(reporter);
    const applyBusy = await machineBusySince(applyCpu);
    const applyLoadEnd = loadavg();
    progress(
      `apply: ${served} of ${domains.length} served after ${((Date.now() - applyStart) / 1000).toFixed(1)} s`,
    );
    // The operator's serving check may say Ready after this client saw the domain served.
    phase = 'ready-wait';
    const readyWaitStart = Date.now();
    const readyWaitEnd = Date.now() + READY_WAIT_MS;
    while (Date.now() < readyWaitEnd && domains.some((d) => d.seenTrueAt.Ready === undefined))
      await sleep(250);

    // Delete → refused.
    phase = 'delete';
    const deleteCpu = await machineCpuTimes();
    const deleteStart = Date.now();
    const deleteGaps: number[] = [];
    let refused = 0;
    const deleting = pool(domains, options.concurrency, async (d) => {
      d.deleteSentAt = Date.now();
      d.nextDueAt = d.deleteSentAt;
      d.lastProbeAt = undefined;
      await cluster.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: d.namespace,
        plural: CUSTOM_DOMAIN_PLURAL,
        name: d.name,
      });
    });
    const deleteReporter = setInterval(() => {
      progress(`delete: ${refused} refused of ${domains.length}`);
    }, 10_000);
    const [, deleteProbes] = await Promise.all([
      deleting.then(() => {
        progress(`all ${domains.length} deletes answered`);
      }),
      probeLoop(domains, {
        intervalMs: options.intervalMs,
        concurrency: options.probeConcurrency,
        isActive: (d) => d.deleteSentAt !== undefined && d.refusedAt === undefined,
        check: (d, o, startedAt) => {
          const stillServed = o.status === 200 && o.backendPage === true;
          if (!stillServed) {
            d.refusedAt = startedAt;
            d.refusal = refusalText(o, d.serial);
            refused++;
          }
          return !stillServed;
        },
        done: () => refused === domains.length,
        deadline: deleteStart + options.timeoutSeconds * 1000,
        target,
        gaps: deleteGaps,
      }),
    ]);
    clearInterval(deleteReporter);
    const deleteBusy = await machineBusySince(deleteCpu);
    const goneWaitEnd = Date.now() + 30_000;
    while (Date.now() < goneWaitEnd && domains.some((d) => d.goneAt === undefined)) await sleep(250);
    await stopWatch();
    stopSampling();

    const since = (from: number | undefined, to: number | undefined): number | undefined =>
      from === undefined || to === undefined ? undefined : to - from;
    const defined = (values: (number | undefined)[]): number[] =>
      values.filter((v): v is number => v !== undefined);
    const refusals = new Map<string, number>();
    for (const d of domains)
      if (d.refusal !== undefined) refusals.set(d.refusal, (refusals.get(d.refusal) ?? 0) + 1);
    const report = {
      date: new Date().toISOString(),
      machine: {
        ...(await machine()),
        loadAverageAtStart: loadAtStart,
        loadAverageAfterApply: applyLoadEnd,
        loadAverageAtEnd: loadavg(),
        cpuBusyDuringApply: applyBusy,
        cpuBusyDuringDelete: deleteBusy,
      },
      options,
      sandbox: { dir: env.sandboxDir, reused, traefik: env.ingressHttpsAddr },
      apply: {
        served,
        servedOnFirstProbe: domains.filter((d) => d.servedOnFirstProbe).length,
        createToServedMs: stats(defined(domains.map((d) => since(d.createSentAt, d.servedAt)))),
        createToSerialInStatusMs: stats(defined(domains.map((d) => since(d.createSentAt, d.serialSeenAt)))),
        serialInStatusToServedMs: stats(defined(domains.map((d) => since(d.serialSeenAt, d.servedAt)))),
        createToRoutedSeenMs: stats(defined(domains.map((d) => since(d.createSentAt, d.seenTrueAt.Routed)))),
        createToReadySeenMs: stats(defined(domains.map((d) => since(d.createSentAt, d.seenTrueAt.Ready)))),
        servedToReadySeenMs: stats(defined(domains.map((d) => since(d.servedAt, d.seenTrueAt.Ready)))),
        probeGapMs: stats(applyGaps),
        probes: applyProbes,
        notServed: domains
          .filter((d) => d.servedAt === undefined)
          .slice(0, 20)
          .map(
            (d) =>
              `${d.hostname}: ${d.serial === undefined ? 'no serial in status' : outcomeText(d.lastOutcome)}`,
          ),
      },
      operatorQueue: {
        intervalMs: options.metricsIntervalMs,
        apply: queueSummary(operatorSamples, 'apply', applyStart),
        readyWait: queueSummary(operatorSamples, 'ready-wait', readyWaitStart),
        delete: queueSummary(operatorSamples, 'delete', deleteStart),
        samples: operatorSamples,
      },
      delete: {
        refused,
        deleteToRefusedMs: stats(defined(domains.map((d) => since(d.deleteSentAt, d.refusedAt)))),
        deleteToGoneMs: stats(defined(domains.map((d) => since(d.deleteSentAt, d.goneAt)))),
        probeGapMs: stats(deleteGaps),
        probes: deleteProbes,
        refusals: Object.fromEntries(refusals),
      },
      domains: domains.map((d) => ({
        hostname: d.hostname,
        createSentAt: d.createSentAt,
        serialSeenAt: d.serialSeenAt,
        seenTrueAt: d.seenTrueAt,
        goneAt: d.goneAt,
        servedAt: d.servedAt,
        deleteSentAt: d.deleteSentAt,
        refusedAt: d.refusedAt,
        refusal: d.refusal,
      })),
    };
    printReport(report, options);
    await mkdir(dirname(options.json), { recursive: true });
    await writeFile(options.json, `${JSON.stringify(report, null, 2)}\n`);
    progress(`wrote ${options.json}`);
    await pool(namespaces, options.concurrency, (ns) =>
      cluster.core.deleteNamespace({ name: ns }).then(() => undefined),
    ).catch((err: unknown) => {
      progress(`deleting the namespaces: ${errorText(err)}`);
    });
  } finally {
    await stopSandbox();
  }
}

type Report = {
  machine: Record<string, unknown>;
  apply: {
    served: number;
    servedOnFirstProbe: number;
    createToServedMs?: Stats | undefined;
    createToSerialInStatusMs?: Stats | undefined;
    serialInStatusToServedMs?: Stats | undefined;
    createToRoutedSeenMs?: Stats | undefined;
    createToReadySeenMs?: Stats | undefined;
    servedToReadySeenMs?: Stats | undefined;
    probeGapMs?: Stats | undefined;
    probes: number;
    notServed: string[];
  };
  delete: {
    refused: number;
    deleteToRefusedMs?: Stats | undefined;
    deleteToGoneMs?: Stats | undefined;
    probeGapMs?: Stats | undefined;
    probes: number;
    refusals: Record<string, number>;
  };
  sandbox: { reused: boolean; traefik: string };
  operatorQueue: { intervalMs: number; apply: QueueSummary; readyWait: QueueSummary; delete: QueueSummary };
};

function printReport(r: Report, o: Options): void {
  const m = r.machine;
  const load = (l: unknown): string =>
    Array.isArray(l) ? l.map((x: number) => x.toFixed(2)).join(' ') : 'n/a';
  const pct = (x: unknown): string => (typeof x === 'number' ? `${(x * 100).toFixed(0)} %` : 'n/a');
  const lines = [
    `machine: ${String(m['cpus'])} CPUs (${String(m['model'])}), node ${String(m['node'])}, commit ${String(m['commit'])}` +
      ` (+${String(m['uncommittedSrcFiles'])} files under src/)`,
    `load average (1/5/15 min): ${load(m['loadAverageAtStart'])} at the start, ${load(m['loadAverageAfterApply'])} after the apply, ${load(m['loadAverageAtEnd'])} at the end;` +
      ` machine CPU busy ${pct(m['cpuBusyDuringApply'])} during the apply, ${pct(m['cpuBusyDuringDelete'])} during the delete`,
    `Traefik at ${r.sandbox.traefik} (sandbox ${r.sandbox.reused ? 'reused' : 'started for this run'});` +
      ` ${o.domains} CustomDomains in ${o.namespaces} namespaces, ${o.concurrency} creates/deletes in flight`,
    `probes: one HTTPS request on a new connection each, every ${o.intervalMs} ms per domain at most, ${o.probeConcurrency} in flight over all domains:` +
      ` each figure is late by up to one probe gap`,
    '',
    `apply → first HTTPS answer with the issued certificate (serial of the status, trusted by Pebble's root, 200 from the backend):`,
    `  served ${r.apply.served} of ${o.domains}; ${r.apply.servedOnFirstProbe} on their first probe (for those, the figure is when the watch saw the serial: Traefik may have served it a little earlier)`,
    figuresLine('create → served', r.apply.createToServedMs),
    figuresLine('create → serial in status (seen by a watch)', r.apply.createToSerialInStatusMs),
    figuresLine('serial in status → served', r.apply.serialInStatusToServedMs),
    figuresLine('create → Routed=True seen', r.apply.createToRoutedSeenMs),
    figuresLine('create → Ready=True seen', r.apply.createToReadySeenMs),
    figuresLine('served → Ready=True seen', r.apply.servedToReadySeenMs),
    figuresLine('gap between probes of one domain', r.apply.probeGapMs),
    `  ${r.apply.probes} probes`,
    ...r.apply.notServed.map((line) => `  not served: ${line}`),
    '',
    'delete → first refused request (anything but 200 with the backend page):',
    `  refused ${r.delete.refused} of ${o.domains}`,
    figuresLine('delete sent → refused', r.delete.deleteToRefusedMs),
    figuresLine('delete sent → CustomDomain gone (watch)', r.delete.deleteToGoneMs),
    figuresLine('gap between probes of one domain', r.delete.probeGapMs),
    `  ${r.delete.probes} probes`,
    ...Object.entries(r.delete.refusals).map(([what, n]) => `  ${n} × ${what}`),
    '',
    `the operator's CustomDomain work queue, read from its /metrics every ${r.operatorQueue.intervalMs} ms:`,
    queueLine('apply', r.operatorQueue.apply),
    queueLine('Ready wait', r.operatorQueue.readyWait),
    queueLine('delete', r.operatorQueue.delete),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
