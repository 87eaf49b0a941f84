/**
 * What the rate-limit e2e tests share: a gRPC client of the sandbox's rate-limit server, the
 * RateLimitPolicy objects on the real API server, Redis, and extra real processes (a rate-limit
 * server with other flags, a Redis of its own, a Redis Cluster) started and stopped by pid.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { Redis } from 'ioredis';
import type { RateLimitPolicy, RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import { renderCompiledConfig, type CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { createRateLimitClient, type RateLimitClient } from '../../src/ratelimit/grpc.js';
import { loadedGeneration, parseReports, policyToken } from '../../src/ratelimit/load-report.js';
import type { RateLimitResponse } from '../../src/ratelimit/protocol.js';
import { DEGRADED_STATUS_NAME } from '../../src/ratelimit/service.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { redisArgs, redisPingProbe } from '../../src/sandbox/redis.js';
import { sandbox, waitFor } from './support/cluster.js';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const TOOLS_BIN = path.join(
  process.env.PORTICO_TOOLS_DIR ?? path.join(process.env.HOME ?? '', '.cache', 'portico', 'tools'),
  'bin',
);

export function clients(): { core: CoreV1Api; custom: CustomObjectsApi } {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return { core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
}

const GVR = { group: 'portico.dev', version: 'v1alpha1', plural: 'ratelimitpolicies' } as const;

export async function createPolicy(
  namespace: string,
  name: string,
  spec: RateLimitPolicySpec,
): Promise<void> {
  await clients().custom.createNamespacedCustomObject({
    ...GVR,
    namespace,
    body: {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'RateLimitPolicy',
      metadata: { name, namespace },
      spec,
    },
  });
}

export async function getPolicy(namespace: string, name: string): Promise<RateLimitPolicy> {
  return (await clients().custom.getNamespacedCustomObject({ ...GVR, namespace, name })) as RateLimitPolicy;
}

/** Replaces the spec (read, modify, replace). Returns the new generation. */
export async function updatePolicy(
  namespace: string,
  name: string,
  spec: RateLimitPolicySpec,
): Promise<number> {
  const current = await getPolicy(namespace, name);
  const updated = (await clients().custom.replaceNamespacedCustomObject({
    ...GVR,
    namespace,
    name,
    body: { ...current, spec },
  })) as RateLimitPolicy;
  return updated.metadata.generation ?? 0;
}

/** Waits until condition `type` of the policy is `status` (and `reason`) for its current generation. */
export async function waitForPolicyCondition(
  namespace: string,
  name: string,
  type: 'Accepted' | 'Enforced',
  status: 'True' | 'False',
  reason?: string,
  timeoutMs = 30_000,
): Promise<RateLimitPolicy> {
  try {
    return await waitFor(
      `${namespace}/${name} ${type}=${status}${reason ? ` (${reason})` : ''}`,
      async () => {
        const p = await getPolicy(namespace, name);
        const c = p.status?.conditions?.find((x) => x.type === type);
        const current = c?.observedGeneration === p.metadata.generation;
        return current && c?.status === status && (!reason || c.reason === reason) ? p : undefined;
      },
      timeoutMs,
      100,
    );
  } catch (err: unknown) {
    const p = await getPolicy(namespace, name);
    if (p.status === undefined) {
      throw new Error(
        `${namespace}/${name} has no status after ${timeoutMs} ms: the operator does not run the ` +
          'RateLimitPolicy controller (is RateLimitPolicyController started in src/controller/main.ts?)',
        { cause: err },
      );
    }
    throw new Error(`${String(err)}; status: ${JSON.stringify(p.status)}`, { cause: err });
  }
}

/**
 * Waits until rate-limit server `instance`, reporting in the status ConfigMap of `namespace`, says
 * it enforces `entry` (its domain, uid and generation).
 */
export async function waitUntilLoaded(
  namespace: string,
  instance: string,
  entry: Pick<CompiledPolicy, 'domain' | 'uid' | 'generation'>,
): Promise<void> {
  await waitFor(`${instance} to load generation ${entry.generation} of ${entry.domain}`, async () => {
    const cm = await clients().core.readNamespacedConfigMap({ namespace, name: 'portico-ratelimit-status' });
    const report = parseReports(cm.data).find((r) => r.instance === instance);
    if (report === undefined) return undefined;
    const generation = loadedGeneration(report, entry.domain, entry.uid, policyToken(entry.uid));
    return generation === entry.generation ? true : undefined;
  });
}

export async function createNamespace(name: string): Promise<void> {
  await clients().core.createNamespace({ body: { metadata: { name } } });
}

/**
 * Creates `namespace` with the rate-limit config ConfigMap a test server started with
 * `--config-namespace <namespace>` reads: `entries` rendered as the controller renders them.
 */
export async function createNamespaceWithConfig(
  namespace: string,
  entries: readonly CompiledPolicy[],
): Promise<void> {
  await createNamespace(namespace);
  await clients().core.createNamespacedConfigMap({
    namespace,
    body: {
      metadata: { name: 'portico-ratelimit-config', labels: { 'app.kubernetes.io/component': 'ratelimit' } },
      data: { 'config.json': renderCompiledConfig(entries) },
    },
  });
}

/** The answer of one check, with the headers as a plain object. */
export interface Answer {
  readonly code: string;
  readonly headers: Record<string, string>;
  readonly response: RateLimitResponse;
}

export function toAnswer(response: RateLimitResponse): Answer {
  return {
    code: response.overall_code,
    headers: Object.fromEntries(response.response_headers_to_add.map((h) => [h.key, h.value])),
    response,
  };
}

/**
 * Whether the server answered the check without Redis, from its local counts or by the failure
 * mode: its status names `portico:store_unavailable` (docs/ratelimits.md, "Degraded mode").
 */
export function answeredWithoutRedis(answer: Answer): boolean {
  return answer.response.statuses[0]?.current_limit?.name === DEGRADED_STATUS_NAME;
}

let shared: RateLimitClient | undefined;
/** The client of the sandbox's rate-limit server. */
export function rateLimitClient(): RateLimitClient {
  shared ??= createRateLimitClient(sandbox.ratelimitGrpcAddr);
  return shared;
}

/**
 * One ShouldRateLimit call with one descriptor of `entries`; `deadlineMs` is the call's gRPC
 * deadline (the client's default, 5 s, when undefined).
 */
export async function check(
  domain: string,
  entries: Record<string, string>,
  hits?: number,
  client: RateLimitClient = rateLimitClient(),
  deadlineMs?: number,
): Promise<Answer> {
  const response = await client.shouldRateLimit(
    {
      domain,
      descriptors: [{ entries: Object.entries(entries).map(([key, value]) => ({ key, value })) }],
      ...(hits === undefined ? {} : { hits_addend: hits }),
    },
    deadlineMs,
  );
  return toAnswer(response);
}

/**
 * Returns once at least `seconds` are left in the current clock minute (sleeping into the next
 * minute if needed), so a test that counts within one minute is not split by a window boundary.
 */
export async function freshMinute(seconds: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await sleep(left + 50);
}

/** Unix seconds of the end of the current minute and UTC day. */
export function windowEnds(nowMs = Date.now()): { minute: number; day: number } {
  return {
    minute: (Math.floor(nowMs / 60_000) + 1) * 60,
    day: (Math.floor(nowMs / 86_400_000) + 1) * 86_400,
  };
}

/** A Redis client on the sandbox's Redis. */
export function sandboxRedis(): Redis {
  return new Redis(sandbox.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/** A real process started by a test, stopped by its pid. */
export interface TestProcess {
  readonly child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** Starts `command`; `env` is added to this process's environment. */
export function startProcess(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): TestProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString('utf8')));
  return {
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * redis-server's arguments for a cluster node keeping its node table in `configFile`, its cluster
 * bus on a port picked free (`cluster-port`; by default Redis binds the node's port + 10000, which
 * nothing picked and another socket may hold: the node then exits and never answers); with
 * `nodeTimeoutMs` (`cluster-node-timeout`, ms) a node unreachable that long is failed over, and a
 * cluster missing a primary still serves the others' slots (`cluster-require-full-coverage no`).
 */
export async function clusterNodeArgs(configFile: string, nodeTimeoutMs?: number): Promise<string[]> {
  const { bus } = await pickFreePorts({ bus: 'tcp' });
  const args = [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    configFile,
    '--cluster-port',
    String(bus),
  ];
  if (nodeTimeoutMs !== undefined) {
    args.push('--cluster-node-timeout', String(nodeTimeoutMs), '--cluster-require-full-coverage', 'no');
  }
  return args;
}

/**
 * Joins the cluster-mode redis-servers on `ports` (127.0.0.1) into one Redis Cluster with
 * `redis-cli --cluster create`: redis-cli makes the first `ports.length / (replicas + 1)` primaries
 * and gives each `replicas` replicas. Throws when redis-cli fails or takes over 30 s.
 */
export async function createRedisCluster(ports: readonly number[], replicas = 0): Promise<void> {
  await promisify(execFile)(
    path.join(TOOLS_BIN, 'redis-cli'),
    [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ],
    { timeout: 30_000 },
  );
}

/** Starts a redis-server of the test's own on `port` (cluster mode when `cluster`). */
export async function startTestRedis(port: number, cluster = false): Promise<TestProcess> {
  const dir = mkdtempSync(path.join(tmpdir(), 'portico-redis-'));
  const args = redisArgs(port, dir);
  if (cluster) args.push(...(await clusterNodeArgs(path.join(dir, 'nodes.conf'))));
  const proc = startProcess(path.join(TOOLS_BIN, 'redis-server'), args);
  const probe = redisPingProbe(`127.0.0.1:${port}`);
  await waitFor(
    `redis-server on ${port}`,
    async () => {
      if (proc.child.exitCode !== null)
        throw new Error(`redis-server exited: ${proc.output().trim().slice(-500)}`);
      return (await probe()) === true ? true : undefined;
    },
    10_000,
    50,
  );
  return proc;
}

/** A `portico ratelimit-server` of the test's own, from dist/. */
export interface TestServer extends TestProcess {
  readonly grpcAddr: string;
  readonly metricsUrl: string;
  readonly client: RateLimitClient;
}

/**
 * Starts `portico ratelimit-server` with `args` (besides kubeconfig and listen addresses) and `env`
 * added to the environment; waits for /readyz.
 */
export async function startTestServer(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<TestServer> {
  const ports = await pickFreePorts({ grpc: 'tcp', metrics: 'tcp' });
  const proc = startProcess(
    process.execPath,
    [
      path.join(REPO, 'dist', 'cli.js'),
      'ratelimit-server',
      '--kubeconfig',
      sandbox.kubeconfig,
      '--grpc-listen-address',
      `127.0.0.1:${ports.grpc}`,
      '--metrics-listen-address',
      `127.0.0.1:${ports.metrics}`,
      ...args,
    ],
    env,
  );
  const base = `http://127.0.0.1:${ports.metrics}`;
  await waitFor(
    'the test rate-limit server to be ready',
    async () => {
      if (proc.child.exitCode !== null) throw new Error(`exited: ${proc.output()}`);
      const res = await fetch(`${base}/readyz`);
      return res.status === 200 ? true : undefined;
    },
    30_000,
    100,
  );
  const grpcAddr = `127.0.0.1:${ports.grpc}`;
  const client = createRateLimitClient(grpcAddr);
  return {
    ...proc,
    grpcAddr,
    metricsUrl: `${base}/metrics`,
    client,
    stop: async () => {
      client.close();
      await proc.stop();
    },
  };
}

/**
 * The value of a Prometheus counter or gauge line (`name{labels} value`), summed over matching lines.
 * `name` is the whole name (`portico_ratelimit_degraded` does not match `…_degraded_checks_total`).
 */
export async function metricValue(metricsUrl: string, name: string, labelMatch = ''): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(labelMatch))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/**
 * Polls `name`'s value (summed over the series whose line contains `labelMatch`, as `metricValue`)
 * at `metricsUrl` until `until` holds for it; returns that value.
 *
 * @throws Error after `waitFor`'s 60 s, naming `what`
 */
export async function waitForMetric(
  metricsUrl: string,
  name: string,
  labelMatch: string,
  until: (value: number) => boolean,
  what: string,
): Promise<number> {
  return waitFor(what, async () => {
    const value = await metricValue(metricsUrl, name, labelMatch);
    return until(value) ? value : undefined;
  });
}

/** envoyproxy/ratelimit's `client_cmd` answer: the overall code, the first status's limit, headers. */
export interface EnvoyClientAnswer {
  code: string;
  limit: number | undefined;
  remaining: number;
  headers: Record<string, string>;
}

/**
 * Reads client_cmd's `response: ...` line. It prints Go's protobuf text format, which inserts random
 * extra spaces on purpose, so any whitespace is allowed between tokens; proto3 leaves zero values out
 * (`limit_remaining: 0` is not printed).
 *
 * @throws Error when the output has no response line
 */
export function parseClientCmd(stdout: string): EnvoyClientAnswer {
  const line = stdout.split('\n').find((l) => l.startsWith('response:'));
  if (line === undefined) throw new Error(`client_cmd printed no response: ${stdout}`);
  const headers: Record<string, string> = {};
  for (const m of line.matchAll(
    /response_headers_to_add:\s*\{\s*key:\s*"([^"]+)"\s+value:\s*"([^"]*)"\s*\}/g,
  )) {
    headers[m[1] ?? ''] = m[2] ?? '';
  }
  const limit = /requests_per_unit:\s*(\d+)/.exec(line)?.[1];
  return {
    code: /overall_code:\s*(\w+)/.exec(line)?.[1] ?? 'UNKNOWN',
    limit: limit === undefined ? undefined : Number(limit),
    remaining: Number(/limit_remaining:\s*(\d+)/.exec(line)?.[1] ?? '0'),
    headers,
  };
}

/**
 * One check of the sandbox's rate-limit server by envoyproxy/ratelimit's `client_cmd` (the stack's
 * tools directory): `descriptor` is its `-descriptors` value, `key=value,key=value`.
 *
 * @throws Error when the client fails, runs over 10 s, or prints no response
 */
export async function envoyClientCheck(domain: string, descriptor: string): Promise<EnvoyClientAnswer> {
  const { stdout } = await promisify(execFile)(
    path.join(sandbox.toolsBinDir, 'envoy-ratelimit-client'),
    ['-dial_string', sandbox.ratelimitGrpcAddr, '-domain', domain, '-descriptors', descriptor],
    { timeout: 10_000 },
  );
  return parseClientCmd(stdout);
}
