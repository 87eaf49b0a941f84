/**
 * Benchmark: N RateLimitPolicies on the sandbox stack, with --servers rate-limit servers reporting
 * what they loaded (the sandbox's own and --servers − 1 started here, in the sandbox's directory,
 * `.sandbox-policies/` unless --dir). Prints the time from create to `Enforced=True` (p50, p99,
 * max), the load report each server writes (bytes, writes written and failed), the status
 * ConfigMap's size, and in a --steady-seconds window with nothing changing: the operator's CPU
 * seconds and RateLimitPolicy reconciles, and each process's RSS. Not part of `npm test`.
 *
 *   npm run build && npm run bench:policies -- --policies 1000
 *   npm run bench:policies -- --policies 10000 --servers 2 --steady-seconds 120
 *   npm run bench:policies -- --policies 100 --keep     # leave the policies and the servers up
 *
 * The sandbox is left up (stop it with `PORTICO_SANDBOX_DIR=.sandbox-policies portico sandbox down`);
 * unless --keep, the policies and their namespaces are deleted and the servers started here are
 * stopped at the end. The policies already in the cluster are counted in the report. Sources: condition times are the operator's `lastTransitionTime`s minus the moment the
 * benchmark sent the create; CPU and RSS from /proc/<pid>; reconciles from the operator's /metrics
 * (`portico_reconcile_total{controller="ratelimitpolicy"}`); report figures from each server's
 * /metrics (`portico_ratelimit_load_report_*`).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { GROUP, VERSION } from '../../src/api/customdomain.js';
import {
  DEFAULT_RATELIMIT_STATUS_NAME,
  RATE_LIMIT_POLICY_PLURAL,
  type RateLimitPolicy,
  type RateLimitPolicySpec,
} from '../../src/api/ratelimitpolicy.js';
import { findCondition } from '../../src/kube/conditions.js';
import { CONTROLLER } from '../../src/sandbox/controller.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { readPid, stopProcess } from '../../src/sandbox/processes.js';
import { RATELIMIT_SERVER, startRateLimitServer } from '../../src/sandbox/ratelimit-server.js';
import {
  OPERATOR_NAMESPACE,
  PACKAGE_ROOT,
  readSandboxEnv,
  sandboxStatus,
  sandboxUp,
} from '../../src/sandbox/stack.js';
import { clockTicks, cpuSeconds, parsePrometheus, rssBytes, sumOf, type Sample } from './process-figures.js';
import { pool, positive, secs, stats } from './run-helpers.js';

const RUN_LABEL = 'portico.dev/bench-policies';
const MiB = 1024 * 1024;

interface Options {
  policies: number;
  namespaces: number;
  servers: number;
  steadySeconds: number;
  concurrency: number;
  timeoutSeconds: number;
  dir: string;
  keep: boolean;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      policies: { type: 'string', default: '1000' },
      namespaces: { type: 'string', default: '10' },
      servers: { type: 'string', default: '2' },
      'steady-seconds': { type: 'string', default: '120' },
      concurrency: { type: 'string', default: '32' },
      'timeout-seconds': { type: 'string', default: '1800' },
      dir: { type: 'string', default: '.sandbox-policies' },
      keep: { type: 'boolean', default: false },
    },
  });
  return {
    policies: positive('policies', values.policies),
    namespaces: positive('namespaces', values.namespaces),
    servers: positive('servers', values.servers),
    steadySeconds: positive('steady-seconds', values['steady-seconds']),
    concurrency: positive('concurrency', values.concurrency),
    timeoutSeconds: positive('timeout-seconds', values['timeout-seconds']),
    dir: path.resolve(values.dir),
    keep: values.keep,
  };
}

/** The policy every RateLimitPolicy of the run gets: the example's (the spec's plan table, §8). */
async function exampleSpec(): Promise<RateLimitPolicySpec> {
  const text = await readFile(path.join(PACKAGE_ROOT, 'examples', '03-shop-api-ratelimits.yaml'), 'utf8');
  return (parse(text) as { spec: RateLimitPolicySpec }).spec;
}

/** The samples of `names` on `url`; undefined when it does not answer in 30 s (a starved event loop). */
async function metrics(url: string, names: ReadonlySet<string>): Promise<Sample[] | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
    return res.ok ? parsePrometheus(await res.text(), names) : undefined;
  } catch {
    return undefined;
  }
}

const OPERATOR_METRICS = new Set(['portico_reconcile_total']);
const SERVER_METRICS = new Set([
  'portico_ratelimit_load_report_writes_total',
  'portico_ratelimit_load_report_bytes',
]);

interface Server {
  name: string;
  metricsUrl: string;
  pid: number | undefined;
}

async function main(): Promise<void> {
  const o = options();
  const status = await sandboxStatus(o.dir).catch(() => undefined);
  const env = status?.up
    ? await readSandboxEnv(o.dir)
    : await sandboxUp({ dir: o.dir, applyExamples: false });
  const paths = sandboxPaths(o.dir);
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ticks = await clockTicks();
  const operatorPid = await readPid(paths, CONTROLLER);
  if (operatorPid === undefined) throw new Error(`no ${CONTROLLER} process in ${o.dir}`);

  const servers: Server[] = [
    { name: 'sandbox', metricsUrl: env.ratelimitMetricsUrl, pid: await readPid(paths, RATELIMIT_SERVER) },
  ];
  const started: string[] = [];
  for (let i = 2; i <= o.servers; i++) {
    const ports = await pickFreePorts({ grpc: 'tcp', metrics: 'tcp' });
    const name = `${RATELIMIT_SERVER}-${i}`;
    const server = await startRateLimitServer(
      paths,
      PACKAGE_ROOT,
      {
        kubeconfig: env.kubeconfig,
        redisUrl: env.redisUrl,
        grpcPort: ports.grpc,
        metricsPort: ports.metrics,
        namespace: OPERATOR_NAMESPACE,
        instance: `bench-${i}`,
      },
      name,
    );
    started.push(name);
    servers.push({ name: `bench-${i}`, metricsUrl: server.metricsUrl, pid: server.process.pid });
  }

  const existing = (await custom.listClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: RATE_LIMIT_POLICY_PLURAL,
  })) as { items: unknown[] };
  const run = Date.now().toString(36);
  const namespaces = Array.from({ length: o.namespaces }, (_, j) => `rlp-${run}-${j}`);
  for (const ns of namespaces) {
    await core.createNamespace({ body: { metadata: { name: ns, labels: { [RUN_LABEL]: run } } } });
  }
  const names = Array.from({ length: o.policies }, (_, i) => ({
    namespace: namespaces[i % namespaces.length] ?? '',
    name: `api-${i}`,
  }));
  const spec = await exampleSpec();
  const createdAt = new Map<string, number>();
  const t0 = Date.now();
  process.stderr.write(`bench: creating ${o.policies} RateLimitPolicies in ${o.namespaces} namespaces\n`);
  await pool(names, o.concurrency, async ({ namespace, name }) => {
    createdAt.set(`${namespace}/${name}`, Date.now());
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural: RATE_LIMIT_POLICY_PLURAL,
      namespace,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'RateLimitPolicy',
        metadata: { name, namespace, labels: { [RUN_LABEL]: run } },
        spec,
      },
    });
  });
  const createSeconds = (Date.now() - t0) / 1000;

  // Until every policy shows Enforced=True for its generation.
  const deadline = Date.now() + o.timeoutSeconds * 1000;
  let enforcedMs: number[];
  for (;;) {
    const list = (await custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: RATE_LIMIT_POLICY_PLURAL,
      labelSelector: `${RUN_LABEL}=${run}`,
    })) as { items: RateLimitPolicy[] };
    enforcedMs = [];
    for (const p of list.items) {
      const c = findCondition(p.status?.conditions, 'Enforced');
      const created = createdAt.get(`${p.metadata.namespace ?? ''}/${p.metadata.name ?? ''}`);
      if (c?.status === 'True' && c.observedGeneration === p.metadata.generation && created !== undefined) {
        enforcedMs.push(Date.parse(c.lastTransitionTime) - created);
      }
    }
    process.stderr.write(`bench: ${enforcedMs.length}/${o.policies} Enforced\n`);
    if (enforcedMs.length === o.policies) break;
    if (Date.now() > deadline)
      throw new Error(`${o.policies - enforcedMs.length} policies not Enforced in ${o.timeoutSeconds} s`);
    await sleep(5000);
  }
  const allEnforcedSeconds = (Date.now() - t0) / 1000;
  const enforced = stats(enforcedMs);
  if (enforced === undefined) throw new Error('no policy to measure');

  // Nothing changes from here on: what does holding N policies cost?
  await sleep(10_000);
  const cpuBefore = await cpuSeconds(operatorPid, ticks);
  const operatorBefore = await metrics(env.controllerMetricsUrl, OPERATOR_METRICS);
  const serversBefore = await Promise.all(servers.map((s) => metrics(s.metricsUrl, SERVER_METRICS)));
  process.stderr.write(`bench: all Enforced; a steady window of ${o.steadySeconds} s\n`);
  await sleep(o.steadySeconds * 1000);
  const cpuAfter = await cpuSeconds(operatorPid, ticks);
  const operatorAfter = await metrics(env.controllerMetricsUrl, OPERATOR_METRICS);
  const serversAfter = await Promise.all(servers.map((s) => metrics(s.metricsUrl, SERVER_METRICS)));
  const statusMap = await core.readNamespacedConfigMap({
    name: DEFAULT_RATELIMIT_STATUS_NAME,
    namespace: OPERATOR_NAMESPACE,
  });
  const statusBytes = Object.entries(statusMap.data ?? {}).reduce(
    (sum, [k, v]) => sum + Buffer.byteLength(k) + Buffer.byteLength(v),
    0,
  );

  const RLP = { controller: 'ratelimitpolicy' };
  const reconciles =
    operatorBefore === undefined || operatorAfter === undefined
      ? 'n/a (its /metrics did not answer in 30 s)'
      : String(
          sumOf(operatorAfter, 'portico_reconcile_total', RLP) -
            sumOf(operatorBefore, 'portico_reconcile_total', RLP),
        );
  const out: string[] = [];
  out.push(
    `RateLimitPolicies: ${o.policies} in ${o.namespaces} namespaces, ${existing.items.length} others in the cluster; rate-limit servers: ${o.servers}`,
  );
  out.push(
    `created in ${secs(createSeconds, 1)}; all Enforced ${secs(allEnforcedSeconds, 1)} after the first create`,
  );
  out.push(
    `create -> Enforced=True: p50 ${secs(enforced.p50 / 1000, 1)}, p99 ${secs(enforced.p99 / 1000, 1)}, max ${secs(enforced.max / 1000, 1)}`,
  );
  out.push(`status ConfigMap ${DEFAULT_RATELIMIT_STATUS_NAME}: ${statusBytes} bytes of data`);
  out.push(`steady window of ${o.steadySeconds} s:`);
  const cpu = cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore;
  out.push(
    `  operator: ${cpu === undefined ? 'n/a' : `${cpu.toFixed(2)} s`} CPU (${cpu === undefined ? 'n/a' : ((100 * cpu) / o.steadySeconds).toFixed(1)} % of a core), ${reconciles} RateLimitPolicy reconciles, RSS ${(((await rssBytes(operatorPid)) ?? Number.NaN) / MiB).toFixed(0)} MiB`,
  );
  for (const [i, s] of servers.entries()) {
    const before = serversBefore[i] ?? [];
    const after = serversAfter[i] ?? [];
    if (serversBefore[i] === undefined || serversAfter[i] === undefined) {
      out.push(`  server ${s.name}: its /metrics did not answer in 30 s`);
      continue;
    }
    const writes = (result: string): number =>
      sumOf(after, 'portico_ratelimit_load_report_writes_total', { result }) -
      sumOf(before, 'portico_ratelimit_load_report_writes_total', { result });
    const rss = s.pid === undefined ? undefined : await rssBytes(s.pid);
    out.push(
      `  server ${s.name}: load report ${sumOf(after, 'portico_ratelimit_load_report_bytes')} bytes, writes ${writes('written')} written / ${writes('failed')} failed, RSS ${rss === undefined ? 'n/a' : (rss / MiB).toFixed(0)} MiB`,
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);

  if (!o.keep) {
    // The sandbox runs no namespace controller: a deleted namespace would keep its policies.
    for (const namespace of namespaces) {
      await custom.deleteCollectionNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: RATE_LIMIT_POLICY_PLURAL,
        namespace,
      });
      await core.deleteNamespace({ name: namespace });
    }
    for (const name of started) await stopProcess(paths, name);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
