/**
 * Benchmark: what one API request costs the operator's process, with client-node's own KubeConfig
 * (a new undici Agent, so a new TLS connection, per request) and with PooledKubeConfig (one
 * pool). Each variant runs in a fresh Node process against the sandbox's API server and prints CPU
 * time per request (milliseconds), RSS and JS heap after the run, and the peak RSS (MiB). The first
 * row is the process after a single request: what loading the client costs before any load.
 *
 *   npm run bench:api-client                       # 2,000 GETs, 8 in flight, against .sandbox
 *   npm run bench:api-client -- --requests 5000 --concurrency 16
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/kube/kubeconfig.js';
import { readSandboxEnv, sandboxStatus, sandboxUp } from '../../src/sandbox/stack.js';

interface Figures {
  variant: string;
  requests: number;
  cpuMsPerRequest: number;
  requestsPerSecond: number;
  rssMiB: number;
  peakRssMiB: number;
  heapUsedMiB: number;
  externalMiB: number;
}

const MiB = 1024 * 1024;

function vmHwmMiB(): number {
  const line = readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1024;
}

/** The child: runs the requests with one variant and prints its figures as JSON. */
async function child(
  kubeconfig: string,
  variant: string,
  requests: number,
  concurrency: number,
): Promise<void> {
  const kc = variant === 'pooled' ? new PooledKubeConfig() : new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  await core.readNamespace({ name: 'default' }); // warm-up: discovery of nothing, module loading
  const started = performance.now();
  const cpu = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        next += 1;
        await core.readNamespace({ name: 'default' });
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1000;
  const mem = process.memoryUsage();
  const figures: Figures = {
    variant,
    requests,
    cpuMsPerRequest: requests === 0 ? 0 : (used.user + used.system) / 1000 / requests,
    requestsPerSecond: requests === 0 ? 0 : requests / seconds,
    rssMiB: mem.rss / MiB,
    peakRssMiB: vmHwmMiB(),
    heapUsedMiB: mem.heapUsed / MiB,
    externalMiB: mem.external / MiB,
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
  if (kc instanceof PooledKubeConfig) await kc.close();
  process.exit(0);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '8' },
      dir: { type: 'string', default: '.sandbox' },
      child: { type: 'string' },
      kubeconfig: { type: 'string' },
    },
  });
  const requests = Number(values.requests);
  const concurrency = Number(values.concurrency);
  if (values.child && values.kubeconfig) {
    await child(values.kubeconfig, values.child, requests, concurrency);
    return;
  }
  const dir = resolve(values.dir);
  const status = await sandboxStatus(dir).catch(() => undefined);
  const env = status?.up ? await readSandboxEnv(dir) : await sandboxUp({ dir, applyExamples: false });
  const self = new URL(import.meta.url).pathname;
  const rows: Figures[] = [];
  for (const [variant, count] of [
    ['pooled', 0],
    ['client-node', requests],
    ['pooled', requests],
  ] as const) {
    const out = execFileSync(
      process.execPath,
      [
        ...process.execArgv,
        self,
        '--child',
        variant,
        '--kubeconfig',
        env.kubeconfig,
        '--requests',
        String(count),
        '--concurrency',
        String(concurrency),
      ],
      { encoding: 'utf8', maxBuffer: 1 << 20 },
    );
    rows.push(JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as Figures);
  }
  process.stdout.write(
    `GET /api/v1/namespaces/default × ${String(requests)}, ${String(concurrency)} in flight\n`,
  );
  process.stdout.write(
    'variant       CPU ms/request  req/s   RSS MiB  peak RSS MiB  heap MiB  external MiB\n',
  );
  for (const r of rows) {
    const name = r.requests === 0 ? 'one request' : r.variant;
    process.stdout.write(
      `${name.padEnd(12)}  ${r.cpuMsPerRequest.toFixed(3).padStart(14)}  ${r.requestsPerSecond.toFixed(0).padStart(5)}  ${r.rssMiB.toFixed(0).padStart(7)}  ${r.peakRssMiB.toFixed(0).padStart(12)}  ${r.heapUsedMiB.toFixed(0).padStart(8)}  ${r.externalMiB.toFixed(0).padStart(12)}\n`,
    );
  }
}

await main();
