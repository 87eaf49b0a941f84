/**
 * Benchmark: Portico's rate-limit server against envoyproxy/ratelimit's `src/service_cmd` (the commit
 * pinned in scripts/install-tools.sh), on the same Redis, the same machine, the same descriptors,
 * driven by ghz (built from the Go module proxy). Prints requests per second, p50/p99 latency, the
 * server's CPU time per call (user + system of all its threads, from /proc) and its peak resident
 * set size (VmHWM: the highest of the rounds) of each, and the ratios.
 * Not part of `npm test`.
 *
 *   npm run bench:ratelimit                                  # defaults below
 *   npm run bench:ratelimit -- --requests 200000 --concurrency 64 --rounds 3
 *   npm run bench:ratelimit -- --node-options=--max-semi-space-size=64   # V8 flags for Portico's node (note the =)
 *   npm run bench:ratelimit -- --pin      # ghz on CPU 0; each server and Redis on CPU 1 (taskset)
 *   npm run bench:ratelimit -- --rps 3000 # a fixed offered load (ghz --rps) instead of as fast as it goes
 *   npm run bench:ratelimit -- --verbose  # each round's whole latency distribution (p10 ... p99.9)
 *   npm run bench:ratelimit -- --portico-cli /tmp/build/cli.js  # Portico from another build than dist/
 *   npm run bench:ratelimit -- --portico-cli /tmp/a/cli.js --portico-cli /tmp/b/cli.js  # two builds, one run
 *   npm run bench:ratelimit -- --portico-flags= --portico-flags=--max-semi-space-size=4  # two servers of one
 *                                 build, each with its own node flags, in the same rounds
 *   npm run bench:ratelimit -- --portico-node=/opt/node22/bin/node --portico-node=node_modules/.bin/node
 *                                 # two servers of one build on two node binaries, in the same rounds
 *   npm run bench:ratelimit -- --portico-log /tmp/logs --node-options=--trace-gc  # each Portico server's stdout
 *                                 and stderr to /tmp/logs/portico-<n>.log (V8's GC trace, the server's log)
 *   npm run bench:ratelimit -- --bare  # Portico without the Node flags and malloc settings the chart gives it
 *   npm run bench:ratelimit -- --policies 10000  # 9,999 other tenants' policies in the config too (peak RSS)
 *   npm run bench:ratelimit -- --floor  # one more server in the rounds: @grpc/grpc-js with Portico's service
 *                                 answering at once (test/bench/grpc-floor-server.ts), the runtime's floor
 *   npm run bench:ratelimit -- --portico-node=node_modules/.bin/node --portico-node=/tmp/bun/node_modules/.bin/bun \
 *                                 --floor --floor-node=/tmp/bun/node_modules/.bin/bun
 *                                 # the whole server and the floor on Node and on Bun (npm package `bun`) in the
 *                                 same rounds; a runtime whose file name starts with `bun` gets no Node flags
 *   npm run bench:ratelimit -- --portico-node=<bun> --portico-cli dist/cli.js --portico-cli dist/cli.js \
 *                                 --portico-env PORTICO_RATELIMIT_CHECKS=thread --portico-env PORTICO_RATELIMIT_CHECKS=main
 *                                 # environment variables of each Portico server (space-separated NAME=value), by
 *                                 position: here the checks in a worker thread against the main thread, on Bun
 *   npm run bench:ratelimit -- --portico-node=<bun> --portico-cli test/bench/grpc-floor-server.ts \
 *                                 --portico-cli test/bench/grpc-floor-server.ts --portico-env= \
 *                                 --portico-env PORTICO_FLOOR=worker,redis
 *                                 # the floor with parts of Portico's server added (grpc-floor-server.ts)
 *
 * Each Portico server runs as the chart runs it (src/sandbox/ratelimit-server.ts: its Node flags
 * first, then --node-options, then its --portico-flags; the chart's malloc settings, processes.ts:
 * CHART_MALLOC_ENV), unless --bare.
 *
 * Without --rps, ghz keeps --concurrency calls in flight (closed loop): the figures are each server's
 * saturation throughput and the latency at saturation. With --rps, both servers get the same offered
 * load, so their latencies compare at equal throughput.
 *
 * All load goes to 127.0.0.1, bounded by --requests per run (and ghz's --timeout per call). Both
 * servers run side by side on one Redis but are loaded one at a time, in alternating rounds after a
 * warm-up of each, so a change in the machine's other load hits both; the figures are the medians.
 * With --portico-cli given more than once, each build runs as a server of its own in the same
 * rounds (before/after comparisons inside one run).
 * Each request carries one descriptor `key_id=<one of --keys keys>, plan=free` in domain
 * `bench/api`; limits are high, so every check is admitted and counted (the path a gateway takes for
 * almost every request).
 *
 * What each server does per check: Portico runs one Lua script (EVALSHA) that reads the ban flag and
 * both windows (minute and UTC day) and counts both; envoyproxy/ratelimit checks the one window its
 * config has for the descriptor (INCRBY + EXPIRE), with its default settings (a pool of 10 Redis
 * connections, no implicit pipelining).
 *
 * Needs a Kubernetes API for Portico's config: the sandbox in .sandbox (started if it is not up).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_RATELIMIT_CONFIG_NAME } from '../../src/api/ratelimitpolicy.js';
import { planShards } from '../../src/controllers/ratelimitpolicy/shards.js';
import {
  CONFIG_SHARD_BUDGET_BYTES,
  configShardIndex,
  renderCompiledEntry,
  type CompiledPolicy,
} from '../../src/ratelimit/config-schema.js';
import { protoIncludeDirs, RLS_PROTO } from '../../src/ratelimit/protocol.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { redisArgs, redisPingProbe } from '../../src/sandbox/redis.js';
import { CHART_MALLOC_ENV } from '../../src/sandbox/processes.js';
import { RATELIMIT_SERVER_NODE_FLAGS } from '../../src/sandbox/ratelimit-server.js';
import { readSandboxEnv, sandboxStatus, sandboxUp } from '../../src/sandbox/stack.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const DOMAIN = 'bench/api';
const NAMESPACE = 'ratelimit-bench';
const HIGH = 1_000_000_000;

interface Options {
  requests: number;
  concurrency: number;
  connections: number;
  keys: number;
  rounds: number;
  dir: string;
  /** V8/Node flags for Portico's server process, e.g. `--max-semi-space-size=32`. */
  nodeOptions: string[];
  /** Pin ghz to CPU 0 and the servers and Redis to CPU 1 (taskset), so both servers get one core. */
  pin: boolean;
  /** Offered load in requests per second (ghz --rps); 0: closed loop, as fast as the server answers. */
  rps: number;
  /** Print ghz's whole latency distribution of each round. */
  verbose: boolean;
  /**
   * Portico's CLI entry points (none given: dist/cli.js), e.g. builds of other revisions; by position
   * as `porticoFlags`.
   */
  porticoClis: string[];
  /**
   * Node flags of each Portico server after `nodeOptions`, by position: with one CLI and several
   * entries, one server of that CLI per entry.
   */
  porticoFlags: string[][];
  /** The node binary of each Portico server, by position as `porticoFlags` (default: the bench's own). */
  porticoNodes: string[];
  /** Environment variables of each Portico server, by position as `porticoFlags` (`--portico-env`). */
  porticoEnvs: Record<string, string>[];
  /** A directory for each Portico server's stdout and stderr (`portico-<n>.log`); unset: discarded. */
  porticoLog: string | undefined;
  /**
   * Policies in Portico's config: the bench's own (`bench/api`, the one ghz calls) and `policies - 1`
   * others of three plans, spread over config shards as the operator fills them (768 KiB each), so
   * the peak RSS shows what holding many tenants' policies costs.
   */
  policies: number;
  /**
   * Run each Portico server without the chart's Node flags and malloc settings
   * (RATELIMIT_SERVER_NODE_FLAGS, CHART_MALLOC_ENV), which it gets otherwise.
   */
  bare: boolean;
  /** More floor servers, one on each of these runtimes (`--floor-node`, e.g. Bun's binary). */
  floorNodes: string[];
  /**
   * Add the floor to the rounds: test/bench/grpc-floor-server.ts (@grpc/grpc-js with Portico's
   * service definition, answering at once), run as the Portico servers are (the same Node flags
   * first), then `--import tsx --max-semi-space-size=8` (a 24 MB young generation).
   */
  floor: boolean;
}

/** One Portico server of the run: the node binary, its flags and the CLI it runs. */
interface PorticoServer {
  readonly node: string;
  readonly cli: string;
  readonly flags: string[];
  /** Environment variables added to its process's. */
  readonly env: Record<string, string>;
  /** Its name in the report; unset: `portico`, or `portico <n>` when there are several. */
  readonly name?: string;
}

/** The floor server of `--floor` (Options.floor). */
function floorServer(node: string = process.execPath): PorticoServer {
  const bun = isBun(node);
  return {
    node,
    cli: path.join(REPO, 'test', 'bench', 'grpc-floor-server.ts'),
    // Bun runs TypeScript itself and takes none of Node's flags.
    flags: bun ? [] : ['--import', import.meta.resolve('tsx'), '--max-semi-space-size=8'],
    env: {},
    name: bun ? 'grpc-js floor (bun)' : 'grpc-js floor',
  };
}

/**
 * Whether `runtime` is Bun (its file name starts with `bun`): a server on it gets none of Node's
 * flags (the chart's, `--node-options`), which Bun does not take.
 */
function isBun(runtime: string): boolean {
  return path.basename(runtime).startsWith('bun');
}

/**
 * The Portico servers of a run: as many as the longest of `--portico-cli`, `--portico-flags`,
 * `--portico-node` and `--portico-env`; a list of one entry serves every server, a longer list one entry per server in
 * order (an empty list: dist/cli.js, no flags, the bench's own node).
 *
 * @throws Error when two lists of more than one entry differ in length
 */
function porticoServers(
  clis: readonly string[],
  flags: readonly string[][],
  nodes: readonly string[],
  envs: readonly Record<string, string>[],
): PorticoServer[] {
  const count = Math.max(clis.length, flags.length, nodes.length, envs.length, 1);
  const lists = {
    '--portico-cli': clis,
    '--portico-flags': flags,
    '--portico-node': nodes,
    '--portico-env': envs,
  };
  for (const [option, list] of Object.entries(lists)) {
    if (list.length > 1 && list.length !== count) {
      throw new Error(`${list.length} ${option} for ${count} servers: give one, or one per server`);
    }
  }
  const at = <T>(list: readonly T[], i: number, otherwise: T): T =>
    (list.length === 1 ? list[0] : list[i]) ?? otherwise;
  return Array.from({ length: count }, (_, i) => ({
    node: at(nodes, i, process.execPath),
    cli: at(clis, i, path.join(REPO, 'dist', 'cli.js')),
    flags: at(flags, i, []),
    env: at(envs, i, {}),
  }));
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '100000' },
      concurrency: { type: 'string', default: '50' },
      connections: { type: 'string', default: '4' },
      keys: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '3' },
      dir: { type: 'string', default: '.sandbox' },
      'node-options': { type: 'string', default: '' },
      pin: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      rps: { type: 'string', default: '0' },
      'portico-cli': { type: 'string', multiple: true, default: [] },
      'portico-flags': { type: 'string', multiple: true, default: [] },
      'portico-node': { type: 'string', multiple: true, default: [] },
      'portico-env': { type: 'string', multiple: true, default: [] },
      'portico-log': { type: 'string' },
      bare: { type: 'boolean', default: false },
      policies: { type: 'string', default: '1' },
      floor: { type: 'boolean', default: false },
      'floor-node': { type: 'string', multiple: true, default: [] },
    },
  });
  return {
    requests: Number(values.requests),
    concurrency: Number(values.concurrency),
    connections: Number(values.connections),
    keys: Number(values.keys),
    rounds: Number(values.rounds),
    dir: path.resolve(values.dir),
    nodeOptions: values['node-options'].split(' ').filter(Boolean),
    pin: values.pin,
    verbose: values.verbose,
    rps: Number(values.rps),
    porticoClis: values['portico-cli'].map((p) => path.resolve(p)),
    porticoFlags: values['portico-flags'].map((f) => f.split(' ').filter(Boolean)),
    porticoNodes: values['portico-node'].map((p) => path.resolve(p)),
    porticoEnvs: values['portico-env'].map(environment),
    porticoLog: values['portico-log'] === undefined ? undefined : path.resolve(values['portico-log']),
    bare: values.bare,
    policies: Number(values.policies),
    floor: values.floor,
    floorNodes: values['floor-node'].map((p) => path.resolve(p)),
  };
}

/**
 * `NAME=value NAME2=value2` as an environment.
 *
 * @throws Error for a word without `=`
 */
function environment(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const word of text.split(' ').filter(Boolean)) {
    const eq = word.indexOf('=');
    if (eq <= 0) throw new Error(`--portico-env: ${word} is not NAME=value`);
    env[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return env;
}

async function tools(): Promise<string> {
  const { stdout } = await run('bash', [path.join(REPO, 'scripts', 'install-tools.sh'), '--bench'], {
    maxBuffer: 1 << 24,
  });
  return stdout.trim().split('\n').at(-1) ?? '';
}

/** `command args`, or `taskset -c <cpu> command args` when `cpu` is given. */
function pinned(cpu: number | undefined, command: string, args: readonly string[]): [string, string[]] {
  return cpu === undefined ? [command, [...args]] : ['taskset', ['-c', String(cpu), command, ...args]];
}

/** Starts `command`; its stdout and stderr go to `logFile` when given, else are discarded. */
function start(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  cpu?: number,
  logFile?: string,
): ChildProcess {
  const [cmd, argv] = pinned(cpu, command, args);
  const log = logFile === undefined ? 'ignore' : openSync(logFile, 'w');
  const child = spawn(cmd, argv, {
    stdio: ['ignore', log, log],
    env: { ...process.env, ...env },
  });
  if (typeof log === 'number') closeSync(log);
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const httpOk = (url: string) => async (): Promise<boolean> => (await fetch(url)).status === 200;

interface GhzReport {
  rps: number;
  latencyDistribution: { percentage: number; latency: number }[] | null;
  statusCodeDistribution: Record<string, number>;
  count: number;
  /** Every call (ghz's JSON format): latency in nanoseconds. */
  details?: { latency: number }[] | null;
}

/** The `q` quantile (0..1) of `values` by nearest rank; NaN for none. */
function nearestRank(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

interface Figures {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** The 99.9th percentile, ms (the issue's target: ≤ 10 ms at 3,000 req/s). */
  p999Ms: number;
  errors: number;
  /** The server's CPU time (user + system, all its threads) per call, microseconds. */
  cpuUsPerCall: number;
  /** The server's peak resident set size since it started (VmHWM), MiB, read after the round. */
  peakRssMiB: number;
  /** ghz's percentiles (10 ... 99.9) of this run, ms; printed per round. */
  distribution?: string;
}

/** One ghz run against `address`. Latencies in ghz's JSON are nanoseconds. */
async function ghz(bin: string, address: string, o: Options, requests: number): Promise<Figures> {
  const data = JSON.stringify({
    domain: DOMAIN,
    descriptors: [
      {
        entries: [
          { key: 'key_id', value: `k{{randomInt 0 ${o.keys}}}` },
          { key: 'plan', value: 'free' },
        ],
      },
    ],
    hits_addend: 1,
  });
  const args = [
    '--insecure',
    '--proto',
    RLS_PROTO,
    '--import-paths',
    protoIncludeDirs().join(','),
    '--call',
    'envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit',
    '--data',
    data,
    '--concurrency',
    String(o.concurrency),
    '--connections',
    String(o.connections),
    '--total',
    String(requests),
    ...(o.rps > 0 ? ['--rps', String(o.rps)] : []),
    '--timeout',
    '5s',
    '--format',
    'json',
    address,
  ];
  const [cmd, argv] = pinned(o.pin ? 0 : undefined, path.join(bin, 'ghz'), args);
  const { stdout } = await run(cmd, argv, { maxBuffer: 1 << 26, timeout: 600_000 });
  const report = JSON.parse(stdout) as GhzReport;
  const at = (p: number): number =>
    (report.latencyDistribution?.find((d) => d.percentage === p)?.latency ?? NaN) / 1e6;
  const errors = Object.entries(report.statusCodeDistribution)
    .filter(([code]) => code !== 'OK')
    .reduce((s, [, n]) => s + n, 0);
  const distribution = (report.latencyDistribution ?? [])
    .map((d) => `p${d.percentage} ${(d.latency / 1e6).toFixed(2)}`)
    .join(', ');
  return {
    rps: report.rps,
    p50Ms: at(50),
    p99Ms: at(99),
    // ghz's distribution stops at p99: p99.9 from every call's latency (nearest rank).
    p999Ms:
      nearestRank(
        (report.details ?? []).map((d) => d.latency),
        0.999,
      ) / 1e6,
    errors,
    cpuUsPerCall: NaN,
    peakRssMiB: NaN,
    distribution,
  };
}

/**
 * CPU time (user + system) process `pid` has used, microseconds, from /proc/<pid>/stat (fields 14 and
 * 15, in clock ticks of 10 ms: enough over the tens of seconds of a round).
 */
function cpuMicros(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return NaN;
  }
}

/**
 * The peak resident set size of process `pid` since it started, MiB (VmHWM in /proc/<pid>/status,
 * kB); NaN when it cannot be read. Of a Portico server: both of its threads, the Node binary's pages
 * included, as a container's memory limit counts them.
 */
function peakRssMiB(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? NaN : Number(kb) / 1024;
  } catch {
    return NaN;
  }
}

/** Warm-up, then `rounds` alternating runs (A, B, A, B, ...), so a change of load on the machine hits both. */
async function benchBoth(
  bin: string,
  targets: readonly { name: string; address: string; pid: number | undefined }[],
  o: Options,
): Promise<Map<string, Figures[]>> {
  const rounds = new Map<string, Figures[]>(targets.map((t) => [t.name, []]));
  for (const t of targets) await ghz(bin, t.address, o, Math.min(20_000, o.requests)); // JIT, connections, scripts
  for (let i = 0; i < o.rounds; i++) {
    for (const t of targets) {
      const cpuBefore = cpuMicros(t.pid);
      const f = await ghz(bin, t.address, o, o.requests);
      f.cpuUsPerCall = (cpuMicros(t.pid) - cpuBefore) / o.requests;
      f.peakRssMiB = peakRssMiB(t.pid);
      process.stdout.write(
        `${t.name.padEnd(22)} round ${i + 1}: ${f.rps.toFixed(0)} req/s, p50 ${f.p50Ms.toFixed(2)} ms, p99 ${f.p99Ms.toFixed(2)} ms, p99.9 ${f.p999Ms.toFixed(2)} ms, CPU ${f.cpuUsPerCall.toFixed(0)} µs/call, peak RSS ${f.peakRssMiB.toFixed(0)} MiB, errors ${f.errors}\n` +
          (o.verbose ? `${''.padEnd(22)}   ${f.distribution ?? ''} ms\n` : ''),
      );
      rounds.get(t.name)?.push(f);
    }
  }
  return rounds;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

function summary(rounds: Figures[]): Figures {
  return {
    rps: median(rounds.map((r) => r.rps)),
    p50Ms: median(rounds.map((r) => r.p50Ms)),
    p99Ms: median(rounds.map((r) => r.p99Ms)),
    p999Ms: median(rounds.map((r) => r.p999Ms)),
    cpuUsPerCall: median(rounds.map((r) => r.cpuUsPerCall)),
    peakRssMiB: Math.max(...rounds.map((r) => r.peakRssMiB)),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
  };
}

/** The bench's policy (the one ghz calls) and `count - 1` others. */
function benchPolicies(count: number): CompiledPolicy[] {
  const bench: CompiledPolicy = {
    domain: DOMAIN,
    uid: 'bench',
    generation: 1,
    plans: [{ name: 'free', requestsPerMinute: HIGH, requestsPerDay: HIGH }],
    defaultPlan: 'free',
    overrides: [],
  };
  const others = Array.from({ length: Math.max(0, count - 1) }, (_, i): CompiledPolicy => ({
    domain: `tenant-${String(i).padStart(5, '0')}/api`,
    uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    generation: 1,
    plans: [
      { name: 'free', requestsPerMinute: 60, requestsPerDay: 1_000 },
      { name: 'pro', requestsPerMinute: 600, requestsPerDay: 50_000 },
      { name: 'enterprise', requestsPerMinute: 6_000, requestsPerDay: 1_000_000 },
    ],
    defaultPlan: 'free',
    overrides: [],
    ban: { afterRejectedRequests: 100, durationSeconds: 600 },
  }));
  return [bench, ...others];
}

/**
 * Writes Portico's config: `policyCount` policies (`benchPolicies`) in the shards the operator's own
 * placement (`planShards`) makes of them when none exist; the shards of an earlier run are deleted
 * first.
 */
async function porticoConfig(kubeconfig: string, policyCount: number): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } }).catch(() => undefined);
  const { writes } = planShards({
    configName: DEFAULT_RATELIMIT_CONFIG_NAME,
    desired: new Map(benchPolicies(policyCount).map((p) => [p.domain, renderCompiledEntry(p)])),
    current: [],
    required: [],
    budgetBytes: CONFIG_SHARD_BUDGET_BYTES,
  });
  const existing = await core.listNamespacedConfigMap({ namespace: NAMESPACE });
  for (const cm of existing.items) {
    const index = configShardIndex(DEFAULT_RATELIMIT_CONFIG_NAME, cm.metadata?.name ?? '');
    if (index !== undefined) {
      await core.deleteNamespacedConfigMap({ namespace: NAMESPACE, name: cm.metadata?.name ?? '' });
    }
  }
  for (const shard of writes) {
    await core.createNamespacedConfigMap({
      namespace: NAMESPACE,
      body: {
        metadata: { name: shard.name, labels: { 'app.kubernetes.io/component': 'ratelimit' } },
        data: { 'config.json': shard.text },
      },
    });
  }
}

function envoyConfigDir(): string {
  const root = mkdtempSync(path.join(tmpdir(), 'envoy-ratelimit-'));
  mkdirSync(path.join(root, 'ratelimit', 'config'), { recursive: true });
  writeFileSync(
    path.join(root, 'ratelimit', 'config', 'bench.yaml'),
    [
      `domain: ${DOMAIN}`,
      'descriptors:',
      '  - key: key_id',
      '    descriptors:',
      '      - key: plan',
      '        value: free',
      '        rate_limit:',
      '          unit: minute',
      `          requests_per_unit: ${HIGH}`,
      '',
    ].join('\n'),
  );
  return root;
}

const load = (): string =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const o = options();
  const servers = [
    ...porticoServers(o.porticoClis, o.porticoFlags, o.porticoNodes, o.porticoEnvs),
    ...(o.floor ? [floorServer()] : []),
    ...o.floorNodes.map((node) => floorServer(node)),
  ];
  const loadAtStart = load();
  const bin = await tools();
  const status = await sandboxStatus(o.dir).catch(() => undefined);
  const env = status?.up
    ? await readSandboxEnv(o.dir)
    : await sandboxUp({ dir: o.dir, applyExamples: false });
  await porticoConfig(env.kubeconfig, o.policies);
  const ports = await pickFreePorts<string>({
    redis: 'tcp',
    envoyGrpc: 'tcp',
    envoyHttp: 'tcp',
    envoyDebug: 'tcp',
    ...Object.fromEntries(servers.flatMap((_, i) => [`grpc${i}`, `metrics${i}`].map((k) => [k, 'tcp']))),
  });
  const port = (name: string): number => {
    const n = ports[name];
    if (n === undefined) throw new Error(`no port picked for ${name}`);
    return n;
  };
  const porticos = servers.map((server, i) => ({
    ...server,
    name: server.name ?? (servers.length === 1 ? 'portico' : `portico ${i + 1}`),
    grpcPort: port(`grpc${i}`),
    metricsPort: port(`metrics${i}`),
  }));
  const serverCpu = o.pin ? 1 : undefined;
  const redisDir = mkdtempSync(path.join(tmpdir(), 'bench-redis-'));
  const redis = start(path.join(bin, 'redis-server'), redisArgs(port('redis'), redisDir), {}, serverCpu);
  const results: Record<string, Figures> = {};
  if (o.porticoLog !== undefined) mkdirSync(o.porticoLog, { recursive: true });
  try {
    const ping = redisPingProbe(`127.0.0.1:${port('redis')}`);
    await waitUntil('redis', async () => (await ping()) === true);

    const porticoProcesses = porticos.map((p, i) =>
      start(
        p.node,
        [
          ...(o.bare || isBun(p.node) ? [] : RATELIMIT_SERVER_NODE_FLAGS),
          ...(isBun(p.node) ? [] : o.nodeOptions),
          ...p.flags,
          p.cli,
          'ratelimit-server',
          '--kubeconfig',
          env.kubeconfig,
          '--redis-url',
          `redis://127.0.0.1:${port('redis')}`,
          '--grpc-listen-address',
          `127.0.0.1:${p.grpcPort}`,
          '--metrics-listen-address',
          `127.0.0.1:${p.metricsPort}`,
          '--config-namespace',
          NAMESPACE,
          '--instance',
          i === 0 ? 'bench' : `bench-${i + 1}`,
          '--log-level',
          'warn',
        ],
        { ...(o.bare ? {} : CHART_MALLOC_ENV), ...p.env },
        serverCpu,
        o.porticoLog === undefined ? undefined : path.join(o.porticoLog, `portico-${i + 1}.log`),
      ),
    );
    const envoy = start(
      path.join(bin, 'envoy-ratelimit-server'),
      [],
      {
        HOST: '127.0.0.1',
        PORT: String(port('envoyHttp')),
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: String(port('envoyGrpc')),
        DEBUG_HOST: '127.0.0.1',
        DEBUG_PORT: String(port('envoyDebug')),
        USE_STATSD: 'false',
        LOG_LEVEL: 'warn',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: `127.0.0.1:${port('redis')}`,
        RUNTIME_ROOT: envoyConfigDir(),
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        RUNTIME_WATCH_ROOT: 'false',
      },
      serverCpu,
    );
    try {
      for (const p of porticos) {
        await waitUntil(`${p.name} ratelimit-server`, httpOk(`http://127.0.0.1:${p.metricsPort}/readyz`));
      }
      await waitUntil('envoyproxy/ratelimit', httpOk(`http://127.0.0.1:${port('envoyHttp')}/healthcheck`));
      await sleep(500);
      const rounds = await benchBoth(
        bin,
        [
          ...porticos.map((p, i) => ({
            name: p.name,
            address: `127.0.0.1:${p.grpcPort}`,
            pid: porticoProcesses[i]?.pid,
          })),
          { name: 'envoyproxy/ratelimit', address: `127.0.0.1:${port('envoyGrpc')}`, pid: envoy.pid },
        ],
        o,
      );
      for (const [name, figures] of rounds) results[name] = summary(figures);
    } finally {
      for (const child of porticoProcesses) await stop(child);
      await stop(envoy);
    }
  } finally {
    await stop(redis);
  }
  const e = results['envoyproxy/ratelimit'];
  if (e === undefined || porticos.some((p) => results[p.name] === undefined)) return;
  const row = (name: string, f: Figures): string =>
    `| ${name} | ${f.rps.toFixed(0)} | ${f.p50Ms.toFixed(2)} | ${f.p99Ms.toFixed(2)} | ${f.p999Ms.toFixed(2)} | ${f.cpuUsPerCall.toFixed(0)} | ${f.peakRssMiB.toFixed(0)} | ${f.errors} |\n`;
  process.stdout.write(
    `\nmachine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${Math.round(totalmem() / 2 ** 30)} GiB; ` +
      `load average (1, 5, 15 min) ${loadAtStart} at the start, ${load()} at the end; ` +
      `${o.rounds} rounds of ${o.requests} requests, concurrency ${o.concurrency}, ${o.connections} connections, ${o.keys} keys; ` +
      `portico node flags: ${[...(o.bare ? [] : RATELIMIT_SERVER_NODE_FLAGS), ...o.nodeOptions].join(' ') || 'none'}` +
      `${o.bare ? ' (bare: no malloc settings)' : " and the chart's malloc settings"}; ` +
      `${o.pin ? 'ghz on CPU 0, servers and Redis on CPU 1' : 'not pinned'}; ` +
      `${o.rps > 0 ? `offered load ${o.rps} req/s (open loop)` : 'closed loop'}; medians\n` +
      porticos
        .map(
          (p) =>
            `${p.name}: ${Object.entries(p.env)
              .map(([k, v]) => `${k}=${v} `)
              .join(
                '',
              )}${p.node === process.execPath ? '' : `${p.node} `}${path.relative(REPO, p.cli)}${p.flags.length > 0 ? ` ${p.flags.join(' ')}` : ''}\n`,
        )
        .join('') +
      `| server | req/s | p50 ms | p99 ms | p99.9 ms | CPU µs/call | peak RSS MiB | errors |\n|---|---|---|---|---|---|---|---|\n` +
      porticos.map((p) => row(p.name, results[p.name] as Figures)).join('') +
      row('envoyproxy/ratelimit', e) +
      porticos
        .map((p) => {
          const f = results[p.name] as Figures;
          return `ratio ${p.name}/envoy: throughput ${(f.rps / e.rps).toFixed(2)}, p99 ${(f.p99Ms / e.p99Ms).toFixed(2)}, p99.9 ${(f.p999Ms / e.p999Ms).toFixed(2)}\n`;
        })
        .join(''),
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
