/**
 * etcd, the API server's storage: one member, plain HTTP on loopback, data in `<dir>/etcd`.
 */
import { rm } from 'node:fs/promises';

import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { httpProbe, waitUntilReady } from './readiness.js';

export const ETCD = 'etcd';

/** Ports etcd listens on. */
export interface EtcdPorts {
  readonly clientPort: number;
  readonly peerPort: number;
}

/** etcd's command-line flags (envtest's, with the peer URL pinned and fsync off for speed). */
export function etcdArgs(paths: SandboxPaths, ports: EtcdPorts): string[] {
  const clientUrl = `http://127.0.0.1:${ports.clientPort}`;
  const peerUrl = `http://127.0.0.1:${ports.peerPort}`;
  return [
    '--name=sandbox',
    `--data-dir=${paths.etcdDataDir}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=sandbox=${peerUrl}`,
    '--unsafe-no-fsync',
  ];
}

/**
 * Starts etcd with an empty data directory and waits until `/health` answers 200.
 *
 * @param binary absolute path of the etcd binary
 * @returns the process and its client URL
 * @throws ComponentStartError when etcd exits or is not healthy within 30 s
 */
export async function startEtcd(
  paths: SandboxPaths,
  binary: string,
  ports: EtcdPorts,
): Promise<{ process: StartedProcess; clientUrl: string }> {
  await rm(paths.etcdDataDir, { recursive: true, force: true });
  const proc = await startDetached(paths, { name: ETCD, command: binary, args: etcdArgs(paths, ports) });
  const clientUrl = `http://127.0.0.1:${ports.clientPort}`;
  await waitUntilReady(proc, httpProbe(`${clientUrl}/health`), { timeoutMs: 30_000 });
  return { process: proc, clientUrl };
}
