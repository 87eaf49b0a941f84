/**
 * Redis for the rate-limit counters: Debian's `redis-server` (linked into the tools' bin directory
 * by scripts/install-tools.sh), on loopback, with no persistence (counters are windows of a minute
 * and a day; a restarted sandbox starts from zero).
 */
import { mkdir } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';

import type { SandboxPaths } from './paths.js';
import { startDetached, type StartedProcess } from './processes.js';
import { waitUntilReady } from './readiness.js';

export const REDIS = 'redis-server';

/**
 * redis-server's command-line flags: loopback only, no RDB snapshots, no AOF. `set-proc-title no`
 * keeps Redis from writing its title over the memory of its environment, where the sandbox looks
 * for its owner mark (processes.ts, `isOurs`).
 */
export function redisArgs(port: number, dataDir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dataDir,
    '--daemonize',
    'no',
    '--set-proc-title',
    'no',
  ];
}

/**
 * A probe that is true when Redis at `host:port` answers PING with PONG.
 *
 * @param timeoutMs the deadline for the round trip, in milliseconds
 */
export function redisPingProbe(address: string, timeoutMs = 1000): () => Promise<true | string> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at);
  const port = Number(address.slice(at + 1));
  return () =>
    new Promise((resolve) => {
      const socket = connect({ host, port });
      let reply = '';
      const done = (result: true | string): void => {
        socket.destroy();
        resolve(result);
      };
      socket.setTimeout(timeoutMs, () => {
        done(`PING ${address}: no answer within ${timeoutMs} ms`);
      });
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (chunk: Buffer) => {
        reply += chunk.toString('utf8');
        if (reply.includes('\r\n'))
          done(reply.startsWith('+PONG') || `PING ${address} answered ${reply.trim()}`);
      });
      socket.on('error', (err) => {
        done(`PING ${address} failed: ${err.message}`);
      });
    });
}

/**
 * Starts redis-server on 127.0.0.1:`port` and waits until it answers PING.
 *
 * @param binary absolute path of redis-server
 * @returns the process and the URL (`redis://127.0.0.1:<port>`)
 * @throws ComponentStartError when it exits or does not answer within 20 s
 */
export async function startRedis(
  paths: SandboxPaths,
  binary: string,
  port: number,
): Promise<{ process: StartedProcess; url: string }> {
  const dataDir = path.join(paths.dir, 'redis');
  await mkdir(dataDir, { recursive: true });
  const proc = await startDetached(paths, { name: REDIS, command: binary, args: redisArgs(port, dataDir) });
  await waitUntilReady(proc, redisPingProbe(`127.0.0.1:${port}`), { timeoutMs: 20_000, intervalMs: 100 });
  return { process: proc, url: `redis://127.0.0.1:${port}` };
}
