/**
 * The rate-limit service, `portico ratelimit-server`, run from the repository's build (`dist/`) with
 * the Node binary running the sandbox, against the sandbox's Redis and API server.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';

import { ComponentStartError } from './errors.js';
import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
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
}

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
    'sandbox',
  ];
}

/**
 * Starts `node <repo>/dist/cli.js ratelimit-server ...` and waits until its `/readyz` answers 200.
 *
 * @throws ComponentStartError when the build is missing, or the server exits or is not ready in 60 s
 */
export async function startRateLimitServer(
  paths: SandboxPaths,
  repoRoot: string,
  options: RateLimitServerOptions,
): Promise<{ process: StartedProcess; grpcAddr: string; metricsUrl: string; readyzUrl: string }> {
  const cli = path.join(repoRoot, 'dist', 'cli.js');
  const main = path.join(repoRoot, 'dist', 'ratelimit', 'server', 'main.js');
  try {
    await access(main);
  } catch {
    throw new ComponentStartError(RATELIMIT_SERVER, `${main} does not exist: build first (npm run build)`);
  }
  const proc = await startDetached(paths, {
    name: RATELIMIT_SERVER,
    command: process.execPath,
    args: [cli, 'ratelimit-server', ...rateLimitServerArgs(options)],
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
