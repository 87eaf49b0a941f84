/**
 * Stops the e2e stack's own operator and starts it again with the same command line and
 * environment, for tests that run operator processes of their own (the CA validates HTTP-01 on the
 * one port the stack's operator listens on).
 */
import { readFile } from 'node:fs/promises';
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
