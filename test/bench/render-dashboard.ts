/**
 * Draws the chart's Grafana dashboard (charts/portico/dashboards/portico.json) as one PNG, from the
 * metrics of a real sandbox run scraped by a real Prometheus, for docs/dashboard.png. Grafana itself
 * is not used (it cannot be built here): each panel's queries go to Prometheus's HTTP API
 * (query_range, or query for instant targets) exactly as the dashboard has them, and the answers are
 * drawn in the dashboard's grid layout: time series as lines (Vega-Lite → SVG), stat panels as a big
 * number, tables as text; the page is rasterised by resvg. Not part of `npm test`.
 *
 *   npm run dashboard:render                          # run the scenario, write docs/dashboard.png
 *   npm run dashboard:render -- --out /tmp/d.png --keep   # leave the sandbox up afterwards
 *   npm run dashboard:render -- --render-only         # draw again from the last run's Prometheus data
 *
 * The run, in its own sandbox directory (--dir, default .sandbox-dashboard): the stack's Pebble is
 * restarted offering two profiles, `default` (90 days) and `shortlived` (160 hours, as Let's
 * Encrypt's), so that Pebble picks one at random for each order and some certificates expire within
 * 30 days; Prometheus (built by `scripts/install-tools.sh --prometheus`) scrapes the operator's and
 * the rate-limit service's /metrics every 5 s; three namespaces on the Pro plan get --domains
 * CustomDomains in three waves, each with its CNAME to the platform target, except one whose CNAME
 * arrives late and one whose registered domain has a CAA record naming another CA (it stays blocked,
 * CAAForbidsIssuance); a RateLimitPolicy takes gRPC checks from well-behaved keys and from one key
 * that keeps sending after its 429s until it is banned. The run ends when every domain but the
 * blocked one is Live and the traffic has run its course, then the sandbox is torn down. Prometheus's
 * data stays in <dir>/prometheus-data with <dir>/dashboard-run.json (the time range), so
 * --render-only can draw a changed dashboard again without a new run.
 *
 * Dashboard variables: ${datasource} is the one Prometheus; $__rate_interval is Grafana's
 * max(4 × scrape interval, step + scrape interval); $__interval is the step; $__range the range.
 */
import { execFile } from 'node:child_process';
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, KubeConfig } from '@kubernetes/client-node';
import { Resvg } from '@resvg/resvg-js';
import { parse as parseVega, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { CUSTOM_DOMAIN_PLURAL, GROUP, VERSION, type CustomDomain } from '../../src/api/customdomain.js';
import type { RateLimitPolicy, RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import { createRateLimitClient, type RateLimitClient } from '../../src/ratelimit/grpc.js';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import { sandboxPaths, type SandboxPaths } from '../../src/sandbox/paths.js';
import { CERTIFICATE_VALIDITY_SECONDS, PEBBLE, PEBBLE_ENV } from '../../src/sandbox/pebble.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { readPid, startDetached, stopProcess } from '../../src/sandbox/processes.js';
import { httpProbe } from '../../src/sandbox/readiness.js';
import { PACKAGE_ROOT, sandboxDown, sandboxUp, type SandboxEnv } from '../../src/sandbox/stack.js';
import { createProject } from './projects.js';

const run = promisify(execFile);

const DASHBOARD = path.join(PACKAGE_ROOT, 'charts', 'portico', 'dashboards', 'portico.json');
const PROMETHEUS = 'prometheus';
/** Prometheus's scrape interval, seconds: the chart's ServiceMonitor has 30 s; 5 s shows a short run. */
const SCRAPE_SECONDS = 5;
const RUN_FILE = 'dashboard-run.json';
const DATA_DIR = 'prometheus-data';

const FONT = 'DejaVu Sans';
/** Pixels per SVG unit in the PNG. */
const ZOOM = 1.25;
/** Grafana's grid: 24 columns; one height unit is a 30 px cell plus its 8 px margin. */
const PAGE_WIDTH = 1500;
const UNIT_HEIGHT = 38;
const GAP = 8;
const HEADER_HEIGHT = 76;
const COLORS = [
  '#7EB26D',
  '#EAB839',
  '#6ED0E0',
  '#EF843C',
  '#E24D42',
  '#1F78C1',
  '#BA43A9',
  '#705DA0',
  '#508642',
  '#CCA300',
];

function progress(line: string): void {
  process.stderr.write(`dashboard: ${line}\n`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  dir: string;
  out: string;
  domains: number;
  keep: boolean;
  renderOnly: boolean;
  /** Hard cap on the scenario (after the sandbox is up), seconds. */
  maxSeconds: number;
  /** Also write the page's SVG here (to inspect what was drawn). */
  svg: string | undefined;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: '.sandbox-dashboard' },
      out: { type: 'string', default: 'docs/dashboard.png' },
      domains: { type: 'string', default: '36' },
      keep: { type: 'boolean', default: false },
      'render-only': { type: 'boolean', default: false },
      'max-seconds': { type: 'string', default: '480' },
      svg: { type: 'string' },
    },
  });
  const domains = Number(values.domains);
  const maxSeconds = Number(values['max-seconds']);
  if (!Number.isInteger(domains) || domains < 6) throw new Error('--domains must be an integer ≥ 6');
  if (!Number.isFinite(maxSeconds) || maxSeconds < 120) throw new Error('--max-seconds must be ≥ 120');
  return {
    dir: path.resolve(values.dir),
    out: path.resolve(values.out),
    domains,
    keep: values.keep,
    renderOnly: values['render-only'],
    maxSeconds,
    svg: values.svg === undefined ? undefined : path.resolve(values.svg),
  };
}

// ---------------------------------------------------------------------------------------------
// Prometheus: the binary, the process, the HTTP API

/** Runs scripts/install-tools.sh --prometheus (cached after the first build) and returns the binary. */
async function prometheusBinary(): Promise<string> {
  progress('scripts/install-tools.sh --prometheus (builds Prometheus the first time: many minutes)');
  const { stdout } = await run(
    'bash',
    [path.join(PACKAGE_ROOT, 'scripts', 'install-tools.sh'), '--prometheus'],
    {
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const binDir = stdout.trim().split('\n').at(-1)?.trim() ?? '';
  const binary = path.join(binDir, PROMETHEUS);
  await access(binary);
  return binary;
}

async function prometheusVersion(binary: string): Promise<string> {
  const { stdout } = await run(binary, ['--version']);
  return /version (\S+)/.exec(stdout)?.[1] ?? 'unknown';
}

function hostPort(url: string): string {
  return new URL(url).host;
}

/** Prometheus's configuration: the operator and the rate-limit service, or nothing (--render-only). */
function prometheusConfig(env: SandboxEnv | undefined): string {
  const job = (name: string, url: string): string =>
    `  - job_name: ${name}\n    metrics_path: ${new URL(url).pathname}\n` +
    `    static_configs:\n      - targets: ['${hostPort(url)}']\n`;
  const jobs =
    env === undefined
      ? '[]\n'
      : `\n${job('portico-controller', env.controllerMetricsUrl)}${job('portico-ratelimit', env.ratelimitMetricsUrl)}`;
  return (
    `global:\n  scrape_interval: ${SCRAPE_SECONDS}s\n  evaluation_interval: ${SCRAPE_SECONDS}s\n` +
    `scrape_configs: ${jobs}`
  );
}

/**
 * Starts Prometheus as a process of the sandbox (so `sandboxDown` stops it too) on a free port, with
 * its TSDB in <dir>/prometheus-data, and waits until /-/ready answers.
 *
 * @returns the base URL of its HTTP API
 */
async function startPrometheus(
  paths: SandboxPaths,
  binary: string,
  env: SandboxEnv | undefined,
): Promise<string> {
  const config = path.join(paths.dir, 'prometheus.yml');
  await writeFile(config, prometheusConfig(env));
  const { port } = await pickFreePorts({ port: 'tcp' });
  await startDetached(paths, {
    name: PROMETHEUS,
    command: binary,
    args: [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(paths.dir, DATA_DIR)}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=30d',
    ],
  });
  const base = `http://127.0.0.1:${port}`;
  const probe = httpProbe(`${base}/-/ready`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const answer = await probe();
    if (answer === true) return base;
    if (Date.now() > deadline)
      throw new Error(`Prometheus did not get ready in 60 s (${answer}); see its log`);
    await sleep(250);
  }
}

interface PromSeries {
  metric: Record<string, string>;
  /** [unix seconds, value as text] */
  values?: [number, string][];
  value?: [number, string];
}

async function promQuery(
  base: string,
  apiPath: string,
  params: Record<string, string>,
): Promise<PromSeries[]> {
  const url = `${base}${apiPath}?${new URLSearchParams(params).toString()}`;
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  const body = (await res.json()) as {
    status: string;
    error?: string;
    data?: { resultType: string; result: PromSeries[] | [number, string] };
  };
  if (body.status !== 'success' || body.data === undefined)
    throw new Error(`${apiPath} ${params['query'] ?? ''}: ${body.error ?? res.status}`);
  if (body.data.resultType === 'scalar') return [{ metric: {}, value: body.data.result as [number, string] }];
  return body.data.result as PromSeries[];
}

// ---------------------------------------------------------------------------------------------
// The scenario

const PROJECTS = ['dash-shop', 'dash-blog', 'dash-docs'] as const;
const COMPANIES = [
  'acme-bakery',
  'northwind',
  'globex',
  'initech',
  'umbrella-labs',
  'hooli',
  'vandelay',
  'stark-supply',
  'wayne-foods',
  'soylent',
  'tyrell',
  'cyberdyne',
  'monarch-travel',
  'oceanic-air',
  'gringotts',
  'duff-brewing',
];
const PREFIXES = ['www', 'shop', 'app'];
const BLOCKED_REGISTERED = 'blocked-by-caa.example';
const RUN_LABEL = 'portico.dev/dashboard-run';

interface PlannedDomain {
  namespace: string;
  name: string;
  hostname: string;
  /** Seconds after the scenario starts when the CustomDomain is created. */
  createAt: number;
  /** Seconds after the scenario starts when its CNAME is set; undefined: never (the CAA case sets it at once). */
  cnameAt: number;
  blocked: boolean;
}

function planDomains(count: number): PlannedDomain[] {
  const plans: PlannedDomain[] = [];
  const wave = Math.ceil(count / 3);
  for (let i = 0; i < count - 1; i++) {
    const company = COMPANIES[i % COMPANIES.length] ?? 'example';
    const prefix = PREFIXES[Math.floor(i / COMPANIES.length) % PREFIXES.length] ?? 'www';
    const createAt = 15 + Math.floor(i / wave) * 60;
    // One domain's CNAME arrives two minutes after its CustomDomain: AwaitingDNS until then.
    const late = i === 1;
    plans.push({
      namespace: PROJECTS[i % PROJECTS.length] ?? 'dash-shop',
      name: `${prefix}-${company}`,
      hostname: `${prefix}.${company}.example`,
      createAt,
      cnameAt: late ? createAt + 120 : createAt - 5,
      blocked: false,
    });
  }
  plans.push({
    namespace: 'dash-shop',
    name: 'www-blocked-by-caa',
    hostname: `www.${BLOCKED_REGISTERED}`,
    createAt: 60,
    cnameAt: 55,
    blocked: true,
  });
  return plans;
}

interface Cluster {
  core: CoreV1Api;
  discovery: DiscoveryV1Api;
  custom: CustomObjectsApi;
}

function connect(env: SandboxEnv): Cluster {
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  return {
    core: kc.makeApiClient(CoreV1Api),
    discovery: kc.makeApiClient(DiscoveryV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
}

async function createDomain(cluster: Cluster, d: PlannedDomain): Promise<void> {
  await cluster.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: d.namespace,
    plural: CUSTOM_DOMAIN_PLURAL,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'CustomDomain',
      metadata: { name: d.name, namespace: d.namespace, labels: { [RUN_LABEL]: 'true' } },
      spec: { hostname: d.hostname, service: { name: 'web', port: 80 } },
    },
  });
}

/** Phase counts of this run's CustomDomains. */
async function phases(cluster: Cluster): Promise<Map<string, number>> {
  const list = (await cluster.custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: CUSTOM_DOMAIN_PLURAL,
    labelSelector: RUN_LABEL,
  })) as { items: CustomDomain[] };
  const counts = new Map<string, number>();
  for (const cd of list.items) {
    const phase = cd.status?.phase ?? 'none';
    counts.set(phase, (counts.get(phase) ?? 0) + 1);
  }
  return counts;
}

/**
 * The stack's Pebble again, offering `default` (90 days) and `shortlived` (160 hours): an order
 * that names no profile gets one at random, so the fleet has certificates expiring within 30 days.
 * A restarted Pebble is a fresh CA; the operator registers its account again on its next order.
 */
async function restartPebbleWithProfiles(env: SandboxEnv, paths: SandboxPaths): Promise<void> {
  const config = JSON.parse(await readFile(paths.pebbleConfig, 'utf8')) as {
    pebble: { profiles: Record<string, unknown> };
  };
  config.pebble.profiles = {
    default: { description: '90-day certificates', validityPeriod: CERTIFICATE_VALIDITY_SECONDS },
    shortlived: { description: '160-hour certificates', validityPeriod: 160 * 60 * 60 },
  };
  await writeFile(paths.pebbleConfig, `${JSON.stringify(config, null, 2)}\n`);
  const pid = await readPid(paths, PEBBLE);
  if (pid === undefined) throw new Error(`no pid file for ${PEBBLE} in ${paths.pidsDir}`);
  const [command, ...args] = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
  if (command === undefined) throw new Error(`cannot read the command line of ${PEBBLE} (pid ${pid})`);
  await stopProcess(paths, PEBBLE, 3_000);
  await startDetached(paths, { name: PEBBLE, command, args, env: PEBBLE_ENV, appendToLog: true });
  const ca = await readFile(env.acmeCaBundle, 'utf8');
  const probe = httpProbe(env.acmeDirectoryUrl, { ca });
  const deadline = Date.now() + 30_000;
  while ((await probe()) !== true) {
    if (Date.now() > deadline) throw new Error(`${PEBBLE} did not answer within 30 s of its restart`);
    await sleep(200);
  }
}

const API_POLICY: RateLimitPolicySpec = {
  plans: [
    { name: 'free', requestsPerMinute: 60, requestsPerDay: 10000 },
    { name: 'pro', requestsPerMinute: 300, requestsPerDay: 100000 },
  ],
  defaultPlan: 'free',
  ban: { afterRejectedRequests: 30, duration: '2m' },
};

async function createPolicy(cluster: Cluster): Promise<string> {
  const namespace = 'dash-shop';
  const name = 'public-api';
  await cluster.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: 'ratelimitpolicies',
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'RateLimitPolicy',
      metadata: { name, namespace },
      spec: API_POLICY,
    },
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const p = (await cluster.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: 'ratelimitpolicies',
      name,
    })) as RateLimitPolicy;
    const enforced = p.status?.conditions?.find((c) => c.type === 'Enforced');
    if (enforced?.status === 'True' && enforced.observedGeneration === p.metadata.generation) break;
    if (Date.now() > deadline) throw new Error(`RateLimitPolicy ${namespace}/${name} not Enforced in 60 s`);
    await sleep(500);
  }
  return `${namespace}/${name}`;
}

/** One API key sending checks every `intervalMs` between `from` and `until` (ms since t0). */
interface KeyTraffic {
  keyId: string;
  plan: string;
  intervalMs: number;
  fromMs: number;
  untilMs: number;
}

const TRAFFIC: KeyTraffic[] = [
  ...Array.from({ length: 8 }, (_, i) => ({
    keyId: `free-key-${i}`,
    plan: 'free',
    intervalMs: 2500 + i * 150,
    fromMs: 0,
    untilMs: Infinity,
  })),
  { keyId: 'pro-key-0', plan: 'pro', intervalMs: 400, fromMs: 0, untilMs: Infinity },
  { keyId: 'pro-key-1', plan: 'pro', intervalMs: 600, fromMs: 0, untilMs: Infinity },
  // Keeps going after its 429s: limited after 60 in a minute, banned after 30 refusals, for 2 minutes.
  { keyId: 'scraper-7f3a', plan: 'free', intervalMs: 250, fromMs: 90_000, untilMs: 240_000 },
];

class TrafficDriver {
  readonly answers = new Map<string, number>();
  errors = 0;
  #stopped = false;
  readonly #loops: Promise<void>[] = [];

  constructor(
    readonly client: RateLimitClient,
    readonly domain: string,
    readonly t0: number,
  ) {}

  start(): void {
    for (const key of TRAFFIC) this.#loops.push(this.#loop(key));
  }

  async #loop(key: KeyTraffic): Promise<void> {
    while (!this.#stopped) {
      const t = Date.now() - this.t0;
      if (t >= key.untilMs) return;
      if (t >= key.fromMs) {
        try {
          const r = await this.client.shouldRateLimit({
            domain: this.domain,
            descriptors: [
              {
                entries: [
                  { key: 'key_id', value: key.keyId },
                  { key: 'plan', value: key.plan },
                ],
              },
            ],
          });
          this.answers.set(r.overall_code, (this.answers.get(r.overall_code) ?? 0) + 1);
        } catch {
          this.errors++;
        }
      }
      await sleep(key.intervalMs);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }
}

async function scenario(env: SandboxEnv, options: Options): Promise<void> {
  const cluster = connect(env);
  const dns = new DnsManagementClient(env.dnsMgmtUrl);
  const plans = planDomains(options.domains);
  for (const ns of PROJECTS) await createProject(cluster, ns);
  await dns.post('/add-caa', {
    host: BLOCKED_REGISTERED,
    policies: [{ tag: 'issue', value: 'digicert.com' }],
  });
  const policyDomain = await createPolicy(cluster);
  const client = createRateLimitClient(env.ratelimitGrpcAddr);
  const t0 = Date.now();
  const traffic = new TrafficDriver(client, policyDomain, t0);
  traffic.start();
  progress(
    `scenario: ${plans.length} CustomDomains in waves (one CNAME late, one blocked by CAA), ` +
      `checks on ${policyDomain}`,
  );
  const cnamesDone = new Set<PlannedDomain>();
  const created = new Set<PlannedDomain>();
  const expectedLive = plans.filter((d) => !d.blocked).length;
  const trafficEnd = Math.max(...TRAFFIC.filter((k) => Number.isFinite(k.untilMs)).map((k) => k.untilMs));
  let lastReport = 0;
  try {
    for (;;) {
      const t = (Date.now() - t0) / 1000;
      const cnamesDue = plans.filter((d) => !cnamesDone.has(d) && t >= d.cnameAt);
      await Promise.all(
        cnamesDue.map((d) => dns.setCname(d.hostname, env.platformCnameTarget).then(() => cnamesDone.add(d))),
      );
      const due = plans.filter((d) => !created.has(d) && t >= d.createAt);
      await Promise.all(due.map((d) => createDomain(cluster, d).then(() => created.add(d))));
      const counts = await phases(cluster);
      const live = counts.get('Live') ?? 0;
      if (Date.now() - lastReport > 15_000) {
        lastReport = Date.now();
        const summary = [...counts].map(([p, n]) => `${p} ${n}`).join(', ');
        const answers = [...traffic.answers].map(([c, n]) => `${c} ${n}`).join(', ');
        progress(
          `t=${t.toFixed(0)}s domains: ${summary || 'none yet'}; checks: ${answers} (${traffic.errors} errors)`,
        );
      }
      const allCreated = created.size === plans.length;
      if (allCreated && live >= expectedLive && Date.now() - t0 > trafficEnd + 15_000) break;
      if (t > options.maxSeconds) {
        progress(`stopping at the --max-seconds cap: ${live} of ${expectedLive} Live`);
        break;
      }
      await sleep(1000);
    }
    // Two more scrapes after the last change.
    await sleep(2 * SCRAPE_SECONDS * 1000 + 1000);
  } finally {
    await traffic.stop();
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The dashboard model (the parts drawn)

interface Target {
  refId?: string;
  expr?: string;
  legendFormat?: string;
  instant?: boolean;
  hide?: boolean;
}

interface Panel {
  id?: number;
  type: string;
  title?: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  fieldConfig?: { defaults?: { unit?: string; decimals?: number } };
  panels?: Panel[];
  collapsed?: boolean;
}

interface Dashboard {
  title?: string;
  panels: Panel[];
}

/** The panels, with those inside collapsed rows laid out below their row as Grafana does when opened. */
function flatPanels(dashboard: Dashboard): Panel[] {
  const out: Panel[] = [];
  for (const p of dashboard.panels) {
    out.push(p);
    if (p.type === 'row' && p.panels !== undefined) out.push(...p.panels);
  }
  return out;
}

interface TimeRange {
  /** Unix seconds. */
  start: number;
  end: number;
  step: number;
}

/** Grafana's variables, as Grafana would set them for this range and a 5 s scrape interval. */
function substitute(expr: string, range: TimeRange): string {
  const rateInterval = Math.max(4 * SCRAPE_SECONDS, range.step + SCRAPE_SECONDS);
  return expr
    .replaceAll('$__rate_interval', `${rateInterval}s`)
    .replaceAll('${__rate_interval}', `${rateInterval}s`)
    .replaceAll('$__interval', `${range.step}s`)
    .replaceAll('${__interval}', `${range.step}s`)
    .replaceAll('$__range', `${Math.round(range.end - range.start)}s`)
    .replaceAll('${__range}', `${Math.round(range.end - range.start)}s`);
}

/** Grafana's legendFormat: `{{label}}` replaced by the series' label value. */
function legendName(format: string | undefined, metric: Record<string, string>): string {
  if (format === undefined || format === '' || format === '__auto') {
    const labels = Object.entries(metric).filter(([k]) => k !== '__name__');
    const name = metric['__name__'] ?? '';
    return labels.length === 0
      ? name || 'value'
      : `${name}{${labels.map(([k, v]) => `${k}="${v}"`).join(', ')}}`;
  }
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, label: string) => metric[label] ?? '');
}

interface Point {
  /** Milliseconds since the epoch. */
  t: number;
  v: number | null;
  series: string;
  /** A value whose neighbours are gaps: drawn as a dot. */
  isolated: boolean;
}

interface PanelData {
  panel: Panel;
  points: Point[];
  series: string[];
  /** Instant values (stat, table): one per series. */
  instant: { name: string; metric: Record<string, string>; value: number }[];
  errors: string[];
}

function numeric(text: string): number | null {
  const v = Number(text);
  return Number.isFinite(v) ? v : null;
}

/** Adds the answer of one range query to `data`: a series each, with a null point at each gap. */
function addRange(data: PanelData, target: Target, result: readonly PromSeries[], range: TimeRange): void {
  const wantsInstant = INSTANT_PANELS.has(data.panel.type);
  for (const s of result) {
    const name = legendName(target.legendFormat, s.metric);
    data.series.push(name);
    const points: Point[] = [];
    let previous: number | undefined;
    for (const [t, text] of s.values ?? []) {
      // A gap in the series (no sample for more than a step): a break in the line, as Grafana draws it.
      if (previous !== undefined && t - previous > range.step * 1.5)
        points.push({ t: (previous + range.step) * 1000, v: null, series: name, isolated: false });
      points.push({ t: t * 1000, v: numeric(text), series: name, isolated: false });
      previous = t;
    }
    points.forEach((p, i) => {
      p.isolated = p.v !== null && (points[i - 1]?.v ?? null) === null && (points[i + 1]?.v ?? null) === null;
    });
    data.points.push(...points);
    // Stat and table panels fed by a range query show the last value.
    const last = (s.values ?? [])
      .map(([, v]) => numeric(v))
      .filter((v): v is number => v !== null)
      .at(-1);
    if (wantsInstant && last !== undefined) data.instant.push({ name, metric: s.metric, value: last });
  }
}

const INSTANT_PANELS = new Set(['stat', 'gauge', 'table']);

/** Adds the answer of one instant query to `data`: a value per series (NaN and ±Inf left out). */
function addInstant(data: PanelData, target: Target, result: readonly PromSeries[]): void {
  for (const s of result) {
    const value = s.value === undefined ? null : numeric(s.value[1]);
    if (value !== null)
      data.instant.push({ name: legendName(target.legendFormat, s.metric), metric: s.metric, value });
  }
}

async function queryPanel(base: string, panel: Panel, range: TimeRange): Promise<PanelData> {
  const data: PanelData = { panel, points: [], series: [], instant: [], errors: [] };
  for (const target of panel.targets ?? []) {
    if (target.expr === undefined || target.hide === true) continue;
    const query = substitute(target.expr, range);
    const instant = target.instant === true || (INSTANT_PANELS.has(panel.type) && target.instant !== false);
    try {
      if (instant) {
        addInstant(data, target, await promQuery(base, '/api/v1/query', { query, time: String(range.end) }));
      } else {
        const params = {
          query,
          start: String(range.start),
          end: String(range.end),
          step: String(range.step),
        };
        addRange(data, target, await promQuery(base, '/api/v1/query_range', params), range);
      }
    } catch (err: unknown) {
      data.errors.push(errorText(err));
    }
  }
  return data;
}

// ---------------------------------------------------------------------------------------------
// Drawing

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A value in the panel's unit, as Grafana prints it (approximately). */
function formatValue(value: number, unit: string | undefined): string {
  const round = (v: number): string =>
    Math.abs(v) >= 100 || Number.isInteger(v)
      ? v.toFixed(0)
      : Math.abs(v) >= 10
        ? v.toFixed(1)
        : v.toFixed(2);
  switch (unit) {
    case 's':
      return value < 1 ? `${round(value * 1000)} ms` : `${round(value)} s`;
    case 'd':
      return `${round(value)} day${value === 1 ? '' : 's'}`;
    case 'ops':
      return `${round(value)} ops/s`;
    case 'percentunit':
      return `${round(value * 100)}%`;
    default:
      return round(value);
  }
}

/** Vega expression for the y axis labels in the panel's unit. */
function axisLabelExpr(unit: string | undefined): string {
  switch (unit) {
    case 's':
      return "datum.value == 0 ? '0' : datum.value < 1 ? format(datum.value * 1000, '~r') + ' ms' : format(datum.value, '~r') + ' s'";
    case 'ops':
      return "(abs(datum.value) >= 1000 ? format(datum.value, '~s') : format(datum.value, '~r')) + '/s'";
    case 'd':
      return "format(datum.value, '~r') + ' d'";
    case 'percentunit':
      return "format(datum.value, '.0%')";
    default:
      return "abs(datum.value) >= 1000 ? format(datum.value, '~s') : format(datum.value, '~r')";
  }
}

interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

function boxOf(panel: Panel): Box {
  const col = PAGE_WIDTH / 24;
  return {
    x: panel.gridPos.x * col + GAP / 2,
    y: HEADER_HEIGHT + panel.gridPos.y * UNIT_HEIGHT + GAP / 2,
    w: panel.gridPos.w * col - GAP,
    h: panel.gridPos.h * UNIT_HEIGHT - GAP,
  };
}

const TITLE_HEIGHT = 30;

function panelFrame(box: Box, title: string): string {
  return (
    `<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${box.h}" rx="3" fill="#ffffff" stroke="#dcdee0"/>` +
    `<text x="${box.x + 10}" y="${box.y + 20}" font-family="${FONT}" font-size="13" font-weight="bold" fill="#24292e">${escapeXml(title)}</text>`
  );
}

function centeredText(box: Box, text: string, size: number, color: string, dy = 0): string {
  return `<text x="${box.x + box.w / 2}" y="${box.y + (box.h + TITLE_HEIGHT) / 2 + size / 3 + dy}" text-anchor="middle" font-family="${FONT}" font-size="${size}" fill="${color}">${escapeXml(text)}</text>`;
}

function noData(box: Box, data: PanelData): string {
  const why = data.errors.length > 0 ? `query failed: ${data.errors[0] ?? ''}` : 'No data';
  return centeredText(box, why.length > 90 ? `${why.slice(0, 87)}…` : why, 14, '#8e8e8e');
}

function drawStat(box: Box, data: PanelData): string {
  const unit = data.panel.fieldConfig?.defaults?.unit;
  if (data.instant.length === 0) return noData(box, data);
  if (data.instant.length === 1) {
    const v = data.instant[0]?.value ?? 0;
    return centeredText(box, formatValue(v, unit), Math.min(56, box.h / 3), '#56A64B');
  }
  // Several values: one line each, name and value.
  const lines = data.instant.slice(0, 6);
  const size = Math.min(28, (box.h - TITLE_HEIGHT) / (lines.length * 1.6));
  return lines
    .map((s, i) =>
      centeredText(
        box,
        `${s.name}: ${formatValue(s.value, unit)}`,
        size,
        '#56A64B',
        (i - (lines.length - 1) / 2) * size * 1.5,
      ),
    )
    .join('');
}

/** The first column's header: the label the legendFormat names (`{{hostname}}`), else "Series". */
function tableKeyHeader(panel: Panel): string {
  const format = panel.targets?.find((t) => t.expr !== undefined)?.legendFormat ?? '';
  return /^\{\{\s*(\w+)\s*\}\}$/.exec(format.trim())?.[1] ?? 'Series';
}

function drawTable(box: Box, data: PanelData): string {
  const unit = data.panel.fieldConfig?.defaults?.unit;
  if (data.instant.length === 0) return noData(box, data);
  const rowHeight = 20;
  const top = box.y + TITLE_HEIGHT + 4;
  const capacity = Math.floor((box.h - TITLE_HEIGHT - 8) / rowHeight) - 1;
  const rows = data.instant.length > capacity ? data.instant.slice(0, capacity - 1) : data.instant;
  const valueX = box.x + box.w - 12;
  const text = (x: number, y: number, s: string, extra = '', color = '#24292e'): string =>
    `<text x="${x}" y="${y}" font-family="${FONT}" font-size="12" fill="${color}" ${extra}>${escapeXml(s)}</text>`;
  const out = [
    `<rect x="${box.x + 1}" y="${top}" width="${box.w - 2}" height="${rowHeight}" fill="#f4f5f5"/>`,
    text(box.x + 10, top + 14, tableKeyHeader(data.panel), 'font-weight="bold"'),
    text(valueX, top + 14, 'Value', 'font-weight="bold" text-anchor="end"'),
  ];
  rows.forEach((r, i) => {
    const y = top + (i + 1) * rowHeight;
    out.push(`<line x1="${box.x + 1}" x2="${box.x + box.w - 1}" y1="${y}" y2="${y}" stroke="#e9eaec"/>`);
    out.push(text(box.x + 10, y + 14, r.name));
    out.push(text(valueX, y + 14, formatValue(r.value, unit), 'text-anchor="end"'));
  });
  if (rows.length < data.instant.length) {
    const y = top + (rows.length + 1) * rowHeight;
    out.push(text(box.x + 10, y + 14, `… and ${data.instant.length - rows.length} more rows`, '', '#6e6e6e'));
  }
  return out.join('');
}

/** Prefixes the ids of one embedded SVG, so that the clip paths of two panels never share an id. */
function prefixIds(svg: string, prefix: string): string {
  return svg
    .replace(/\bid="([^"]+)"/g, (_, id: string) => `id="${prefix}${id}"`)
    .replace(/url\(#([^)]+)\)/g, (_, id: string) => `url(#${prefix}${id})`)
    .replace(/href="#([^"]+)"/g, (_, id: string) => `href="#${prefix}${id}"`);
}

async function drawTimeSeries(box: Box, data: PanelData, range: TimeRange, index: number): Promise<string> {
  if (data.series.length === 0) return noData(box, data);
  const width = box.w - 16;
  const height = box.h - TITLE_HEIGHT - 8;
  const unit = data.panel.fieldConfig?.defaults?.unit;
  const names = [...new Set(data.series)];
  // Legend columns as wide as the longest name (Vega estimates 0.8 × the font size a character: 9 px at 11 px).
  const longest = Math.max(...names.map((n) => n.length));
  const columns = Math.max(1, Math.min(names.length, Math.floor(width / (longest * 9 + 40))));
  const minutes = (range.end - range.start) / 60;
  const everyMinutes = Math.max(1, Math.ceil(minutes / Math.max(2, Math.floor(width / 80))));
  // Ticks on whole UTC minutes, every `everyMinutes`.
  const ticks: number[] = [];
  for (let m = Math.ceil(range.start / 60); m * 60 <= range.end; m += everyMinutes) ticks.push(m * 60_000);
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    background: null,
    padding: 2,
    width,
    height,
    autosize: { type: 'fit', contains: 'padding' },
    data: { values: data.points },
    layer: [
      { mark: { type: 'line', strokeWidth: 1.5, interpolate: 'linear', clip: true } },
      // A value with no neighbour would draw no line: a dot, as Grafana's showPoints "auto" does.
      {
        transform: [{ filter: 'datum.isolated' }],
        mark: { type: 'point', filled: true, size: 14, opacity: 1, clip: true },
      },
    ],
    encoding: {
      x: {
        field: 't',
        type: 'temporal',
        title: null,
        scale: { domain: [range.start * 1000, range.end * 1000] },
        axis: {
          values: ticks,
          labelExpr: "utcFormat(datum.value, '%H:%M')",
          grid: true,
          labelFlush: true,
        },
      },
      y: {
        field: 'v',
        type: 'quantitative',
        title: null,
        scale: { zero: true, nice: true },
        axis: { labelExpr: axisLabelExpr(unit), tickCount: 4, grid: true },
      },
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        sort: names,
        scale: { domain: names, range: COLORS },
        legend: {
          orient: 'bottom',
          direction: 'horizontal',
          columns,
          labelLimit: Math.floor(width / columns) - 26,
          symbolType: 'stroke',
          symbolStrokeWidth: 3,
          symbolSize: 120,
          labelFontSize: 11,
          rowPadding: 2,
          padding: 0,
          offset: 6,
        },
      },
    },
    config: {
      font: FONT,
      view: { stroke: null },
      axis: {
        labelFontSize: 10,
        labelColor: '#464c54',
        gridColor: '#eeeeee',
        domainColor: '#cccccc',
        tickColor: '#cccccc',
      },
    },
  };
  const view = new View(parseVega(compile(spec as unknown as TopLevelSpec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  const placed = svg.replace('<svg ', `<svg x="${box.x + 8}" y="${box.y + TITLE_HEIGHT}" `);
  return prefixIds(placed, `p${index}-`);
}

async function drawPanel(data: PanelData, range: TimeRange, index: number): Promise<string> {
  const panel = data.panel;
  const box = boxOf(panel);
  if (panel.type === 'row') {
    const y = box.y + UNIT_HEIGHT / 2 + 2;
    return `<text x="${box.x + 2}" y="${y}" font-family="${FONT}" font-size="16" font-weight="bold" fill="#24292e">${escapeXml(panel.title ?? '')}</text>`;
  }
  const frame = panelFrame(box, panel.title ?? '');
  switch (panel.type) {
    case 'stat':
    case 'gauge':
      return frame + drawStat(box, data);
    case 'table':
      return frame + drawTable(box, data);
    case 'timeseries':
    case 'graph':
      return frame + (await drawTimeSeries(box, data, range, index));
    default:
      return frame + centeredText(box, `(${panel.type} panels are not drawn by this script)`, 13, '#8e8e8e');
  }
}

function utc(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 16).replace('T', ' ');
}

async function renderDashboard(base: string, meta: RunFile, out: string, svgOut?: string): Promise<void> {
  const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
  const range: TimeRange = {
    start: meta.start,
    end: meta.end,
    step: Math.max(
      SCRAPE_SECONDS,
      Math.ceil((meta.end - meta.start) / 240 / SCRAPE_SECONDS) * SCRAPE_SECONDS,
    ),
  };
  const panels = flatPanels(dashboard);
  const parts: string[] = [];
  let index = 0;
  for (const panel of panels) {
    const data = await queryPanel(base, panel, range);
    for (const e of data.errors) progress(`panel "${panel.title ?? panel.id}": ${e}`);
    parts.push(await drawPanel(data, range, index++));
  }
  const bottom = Math.max(...panels.map((p) => p.gridPos.y + p.gridPos.h));
  const height = HEADER_HEIGHT + bottom * UNIT_HEIGHT + 8;
  const minutes = ((meta.end - meta.start) / 60).toFixed(0);
  const caption = [
    `A real sandbox run (commit ${meta.commit.slice(0, 7)}), ${utc(meta.start)}–${utc(meta.end).slice(11)} UTC (${minutes} min): ` +
      `Prometheus ${meta.prometheusVersion} scraping the operator and the rate-limit service every ${SCRAPE_SECONDS} s.`,
    'Each panel queries Prometheus with its expressions from charts/portico/dashboards/portico.json; ' +
      'drawn by test/bench/render-dashboard.ts (npm run dashboard:render), not by Grafana.',
  ];
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${PAGE_WIDTH}" height="${height}" viewBox="0 0 ${PAGE_WIDTH} ${height}">` +
    `<rect width="100%" height="100%" fill="#f4f5f5"/>` +
    `<text x="6" y="26" font-family="${FONT}" font-size="20" font-weight="bold" fill="#24292e">${escapeXml(dashboard.title ?? 'Dashboard')}</text>` +
    caption
      .map(
        (line, i) =>
          `<text x="6" y="${46 + i * 15}" font-family="${FONT}" font-size="12" fill="#464c54">${escapeXml(line)}</text>`,
      )
      .join('') +
    parts.join('') +
    `</svg>`;
  if (svgOut !== undefined) await writeFile(svgOut, svg);
  const resvg = new Resvg(svg, {
    fitTo: { mode: 'zoom', value: ZOOM },
    background: '#f4f5f5',
    font: { loadSystemFonts: true, defaultFontFamily: FONT, sansSerifFamily: FONT },
  });
  const png = resvg.render().asPng();
  await mkdir(path.dirname(out), { recursive: true });
  await writeFile(out, png);
  progress(`wrote ${out} (${(png.length / 1024).toFixed(0)} KiB, ${panels.length} panels)`);
}

// ---------------------------------------------------------------------------------------------
// Main

interface RunFile {
  /** Unix seconds: the range drawn. */
  start: number;
  end: number;
  prometheusVersion: string;
  commit: string;
}

async function gitCommit(): Promise<string> {
  try {
    return (await run('git', ['rev-parse', 'HEAD'], { cwd: PACKAGE_ROOT })).stdout.trim();
  } catch {
    return 'unknown';
  }
}

async function renderOnly(options: Options): Promise<void> {
  const paths = sandboxPaths(options.dir);
  const meta = JSON.parse(await readFile(path.join(options.dir, RUN_FILE), 'utf8')) as RunFile;
  const binary = await prometheusBinary();
  await mkdir(paths.pidsDir, { recursive: true });
  await mkdir(paths.logsDir, { recursive: true });
  const base = await startPrometheus(paths, binary, undefined);
  try {
    await renderDashboard(base, meta, options.out, options.svg);
  } finally {
    await stopProcess(paths, PROMETHEUS);
  }
}

async function fullRun(options: Options): Promise<void> {
  const binary = await prometheusBinary();
  const version = await prometheusVersion(binary);
  await rm(path.join(options.dir, DATA_DIR), { recursive: true, force: true });
  // The operator's own default order budget (Let's Encrypt's 300 new orders per 3 hours), which the
  // sandbox widens for its tests: the "Order budget" panel then shows what a cluster would.
  process.env['PORTICO_ACME_ORDERS_PER_WINDOW'] = '300';
  const env = await sandboxUp({ dir: options.dir, applyExamples: false });
  const paths = sandboxPaths(env.sandboxDir);
  const stop = (signal: NodeJS.Signals): void => {
    progress(`${signal}: stopping the sandbox`);
    void sandboxDown(env.sandboxDir).finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    progress('restarting Pebble with a 90-day and a 160-hour profile');
    await restartPebbleWithProfiles(env, paths);
    const base = await startPrometheus(paths, binary, env);
    progress(`Prometheus ${version} at ${base}, scraping every ${SCRAPE_SECONDS} s`);
    const start = Math.floor(Date.now() / 1000);
    await scenario(env, options);
    const meta: RunFile = {
      start,
      end: Math.floor(Date.now() / 1000),
      prometheusVersion: version,
      commit: await gitCommit(),
    };
    await writeFile(path.join(env.sandboxDir, RUN_FILE), `${JSON.stringify(meta, null, 2)}\n`);
    await renderDashboard(base, meta, options.out, options.svg);
  } finally {
    if (options.keep) progress(`left the sandbox up in ${env.sandboxDir} (--keep)`);
    else await sandboxDown(env.sandboxDir);
  }
}

const options = parseOptions();
if (options.renderOnly) await renderOnly(options);
else await fullRun(options);
