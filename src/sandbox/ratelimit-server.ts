/**
 * The rate-limit service, `portico ratelimit-server`, run from the repository's build (`dist/`) with
 * the Node binary running the sandbox, against the sandbox's Redis and API server.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';

import { ComponentStartError } from './errors.js';
import type { SandboxPaths } from './paths.js';
import { CHART_MALLOC_ENV, startDetached, type StartedProcess } from './processes.js';
import { httpProbe, waitUntilReady } from './readiness.js';

export const RATELIMIT_SERVER = 'portico-ratelimit-server';

/** The rate-limit server's configuration in the sandbox. */
export interface RateLimitServerOptions {
  readonly kubeconfig: string;
  readonly redisUrl: string;
  /** Port of the gRPC listener (127.0.0.1). */
  readonly grpcPort: number;
  /** Port of `/metrics`, `/healthz`, `/readyz` (127.0.0.1). */
  readonly metricsPort: number;
  /** Namespace of the config and status ConfigMaps (the operator's). */
  readonly namespace: string;
  /** Its `--instance`: the key of its load report (default `sandbox`). */
  readonly instance?: string;
}

/**
 * The Node flags the chart runs `portico ratelimit-server` with (its NODE_OPTIONS,
 * charts/portico/templates/ratelimit-deployment.yaml), so the sandbox and the benchmark run it as a
 * cluster does. Semi-spaces of 2 MB: a young generation of 6 MB in both threads (V8 takes the flag
 * over the check thread's `resourceLimits`, which ask for the same 6 MB: check-thread.ts). The main
 * thread only watches the config, reports the load and serves /metrics; with Node 24's default its
 * heap kept 33.7 MB committed after start-up, with this flag 21.9 MB (`--trace-gc`). Peak RSS at
 * 3,000 checks a second 223 -> 205 MiB (docs/performance.md).
 */
export const RATELIMIT_SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=2'];

/** `portico ratelimit-server`'s flags. */
export function rateLimitServerArgs(options: RateLimitServerOptions): string[] {
  return [
    '--kubeconfig',
    options.kubeconfig,
    '--redis-url',
    options.redisUrl,
    '--grpc-listen-address',
    `127.0.0.1:${options.grpcPort}`,
    '--metrics-listen-address',
    `127.0.0.1:${options.metricsPort}`,
    '--config-namespace',
    options.namespace,
    '--instance',
    options.instance ?? 'sandbox',
  ];
}

/**
 * Starts `node <repo>/dist/cli.js ratelimit-server ...` and waits until its `/readyz` answers 200.
 * `name` is the process's name in the sandbox (its pid and log files): another one for a second
 * server.
 *
 * @throws ComponentStartError when the build is missing, or the server exits or is not ready in 60 s
 */
export async function startRateLimitServer(
  paths: SandboxPaths,
  repoRoot: string,
  options: RateLimitServerOptions,
  name = RATELIMIT_SERVER,
): Promise<{ process: StartedProcess; grpcAddr: string; metricsUrl: string; readyzUrl: string }> {
  const cli = path.join(repoRoot, 'dist', 'cli.js');
  const main = path.join(repoRoot, 'dist', 'ratelimit', 'server', 'main.js');
  try {
    await access(main);
  } catch {
    throw new ComponentStartError(name, `${main} does not exist: build first (npm run build)`);
  }
  const proc = await startDetached(paths, {
    name,
    command: process.execPath,
    args: [...RATELIMIT_SERVER_NODE_FLAGS, cli, 'ratelimit-server', ...rateLimitServerArgs(options)],
    env: { ...CHART_MALLOC_ENV },
  });
  const base = `http://127.0.0.1:${options.metricsPort}`;
  await waitUntilReady(proc, httpProbe(`${base}/readyz`), { timeoutMs: 60_000, intervalMs: 250 });
  return {
    process: proc,
    grpcAddr: `127.0.0.1:${options.grpcPort}`,
    metricsUrl: `${base}/metrics`,
    readyzUrl: `${base}/readyz`,
  };
}
