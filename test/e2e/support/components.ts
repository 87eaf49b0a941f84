/**
 * Faults of the e2e stack's own processes (etcd, kube-apiserver, Pebble): stop one and start it
 * again with the same command line, environment and data (etcd keeps its data directory: a restart,
 * not a new cluster; Pebble keeps its state in memory, so it comes back with no accounts, orders or
 * roots of before: a CA that lost its state), or freeze one with SIGSTOP and thaw it with SIGCONT.
 */
import { readFile } from 'node:fs/promises';
import { apiServerReadyProbe, KUBE_APISERVER } from '../../../src/sandbox/kube-apiserver.js';
import { ETCD } from '../../../src/sandbox/etcd.js';
import { PEBBLE } from '../../../src/sandbox/pebble.js';
import { httpProbe } from '../../../src/sandbox/readiness.js';
import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { readPid, startDetached, stopProcess } from '../../../src/sandbox/processes.js';
import { httpStatus } from './stack-controller.js';
import { sandbox, waitFor } from './cluster.js';

const paths = sandboxPaths(sandbox.sandboxDir);

/** The stack's components this file restarts. */
export type RestartableComponent = typeof ETCD | typeof KUBE_APISERVER | typeof PEBBLE;

/** A stopped component: what `startComponent` needs to start it again as it was. */
export interface StoppedComponent {
  readonly name: RestartableComponent;
  readonly command: string;
  readonly args: string[];
  readonly env: Record<string, string>;
}

/** The pid of the stack's `name`; throws when it has none. */
export async function componentPid(name: string): Promise<number> {
  const pid = await readPid(paths, name);
  if (pid === undefined) throw new Error(`the stack's ${name} has no pid file in ${paths.pidsDir}`);
  return pid;
}

/**
 * Stops the stack's `name` (SIGTERM, SIGKILL after 3 s, as a supervisor's restart would) and returns its command line and
 * environment, read from /proc before the stop.
 */
export async function stopComponent(name: RestartableComponent): Promise<StoppedComponent> {
  const pid = await componentPid(name);
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
  const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0').filter(Boolean);
  const env = Object.fromEntries(
    environ
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const)
      // startDetached sets the owner variable itself.
      .filter(([k]) => k !== 'PORTICO_SANDBOX_OWNER'),
  );
  const [command, ...args] = argv;
  if (!command) throw new Error(`cannot read the command line of the stack's ${name} (pid ${pid})`);
  await stopProcess(paths, name, 3_000);
  return { name, command, args, env };
}

/** True when the component answers: etcd `/health` 200, kube-apiserver `/readyz` 200, Pebble its directory. */
async function answers(name: RestartableComponent): Promise<boolean> {
  if (name === PEBBLE) {
    const ca = await readFile(sandbox.acmeCaBundle, 'utf8');
    return (await httpProbe(sandbox.acmeDirectoryUrl, { ca })()) === true;
  }
  if (name === ETCD) {
    if (!sandbox.etcdUrl) throw new Error('the stack runs no etcd of its own (an external cluster)');
    return (await httpStatus(`${sandbox.etcdUrl}/health`)) === 200;
  }
  return (await apiServerReadyProbe(sandbox.kubeconfig)()) === true;
}

/**
 * Starts a component `stopComponent` stopped, as it was (its log appended to), and waits until it
 * answers (at most 90 s).
 */
export async function startComponent(stopped: StoppedComponent): Promise<void> {
  await startDetached(paths, { ...stopped, appendToLog: true });
  await waitFor(
    `${stopped.name} to answer again`,
    async () => ((await answers(stopped.name)) ? true : undefined),
    90_000,
  );
}

/** SIGSTOP to the stack's `name`: it answers nothing (connections stay open) until `thawComponent`. */
export async function freezeComponent(name: string): Promise<void> {
  process.kill(await componentPid(name), 'SIGSTOP');
}

/** SIGCONT to the stack's `name`. */
export async function thawComponent(name: string): Promise<void> {
  process.kill(await componentPid(name), 'SIGCONT');
}
