/**
 * Stops the e2e stack's own operator and starts it again with the same command line and
 * environment, for tests that run operator processes of their own (the CA validates HTTP-01 on the
 * one port the stack's operator listens on).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { CONTROLLER } from '../../../src/sandbox/controller.js';
import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { readPid, startDetached, stopProcess } from '../../../src/sandbox/processes.js';
import { sandbox, waitFor } from './cluster.js';

export interface ControllerCommand {
  command: string;
  args: string[];
  /** The PORTICO_* variables and NODE_EXTRA_CA_CERTS it ran with. */
  env: Record<string, string>;
}

const paths = sandboxPaths(sandbox.sandboxDir);

/** The HTTP status of a GET, or undefined when nothing answers. */
export async function httpStatus(url: string): Promise<number | undefined> {
  try {
    return (await fetch(url)).status;
  } catch {
    return undefined;
  }
}

/** Stops the stack's operator and returns its command line and environment, or undefined if none ran. */
export async function stopStackController(): Promise<ControllerCommand | undefined> {
  const pid = await readPid(paths, CONTROLLER);
  if (pid === undefined) return undefined;
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
  const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0').filter(Boolean);
  const env = Object.fromEntries(
    environ
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])
      .filter(([k]) => k?.startsWith('PORTICO_') === true || k === 'NODE_EXTRA_CA_CERTS'),
  ) as Record<string, string>;
  const [command, ...args] = argv;
  await stopProcess(paths, CONTROLLER);
  return { command: command ?? process.execPath, args, env };
}

/** Starts the stack's operator again as `stopStackController` found it, and waits until it is ready. */
export async function restartStackController(stopped: ControllerCommand | undefined): Promise<void> {
  if (!stopped) return;
  // startDetached sets the owner variable itself.
  const env = Object.fromEntries(Object.entries(stopped.env).filter(([k]) => k !== 'PORTICO_SANDBOX_OWNER'));
  await startDetached(paths, { name: CONTROLLER, ...stopped, env });
  await waitFor('the stack operator to be ready again', async () =>
    (await httpStatus(sandbox.controllerReadyzUrl)) === 200 ? true : undefined,
  );
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  return typeof address === 'object' && address ? address.port : 0;
}

export interface OperatorProcess {
  name: string;
  child: ChildProcess;
  /** Its log file (JSON lines). */
  log: string;
  metricsPort: number;
}

/**
 * Starts another operator with the stack's command line, its own metrics port and `overrides`
 * (flag → value), logging to `<stack>/logs/<name>.log`; waits until it serves /healthz.
 */
export async function startOperator(
  stack: ControllerCommand,
  name: string,
  overrides: Record<string, string> = {},
): Promise<OperatorProcess> {
  const metricsPort = await freePort();
  const args = [...stack.args];
  const set = (flag: string, value: string): void => {
    const at = args.indexOf(flag);
    if (at >= 0) args[at + 1] = value;
    else args.push(flag, value);
  };
  set('--metrics-listen-address', `127.0.0.1:${metricsPort}`);
  for (const [flag, value] of Object.entries(overrides)) set(flag, value);
  const log = path.join(sandbox.sandboxDir, 'logs', `${name}.log`);
  const child = spawn(stack.command, args, {
    env: { PATH: process.env.PATH ?? '', ...stack.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = createWriteStream(log);
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  await waitFor(`operator ${name} to serve /healthz`, async () =>
    (await httpStatus(`http://127.0.0.1:${metricsPort}/healthz`)) === 200 ? true : undefined,
  );
  return { name, child, log, metricsPort };
}

/** SIGTERM, and wait for the exit. */
export async function stopOperator(operator: OperatorProcess): Promise<void> {
  if (operator.child.exitCode !== null || operator.child.signalCode !== null) return;
  const exited = once(operator.child, 'exit');
  operator.child.kill('SIGTERM');
  await exited;
}
