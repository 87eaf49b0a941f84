/**
 * Long-running processes of the stack: started detached (they outlive the `sandbox up` command),
 * output to `<dir>/logs/<name>.log`, pid in `<dir>/pids/<name>.pid`, stopped by that pid.
 *
 * Each process gets `PORTICO_SANDBOX_OWNER=<sandbox dir>` in its environment. Where /proc exists,
 * a pid is treated as ours only if that variable is in the process's environment, so a stale pid
 * file (after a reboot, say) never makes the sandbox signal an unrelated process that got the pid.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { ComponentStartError } from './errors.js';
import type { SandboxPaths } from './paths.js';

const OWNER_VARIABLE = 'PORTICO_SANDBOX_OWNER';

/**
 * The malloc settings the chart gives both of Portico's programs (charts/portico/templates/
 * controller-deployment.yaml, ratelimit-deployment.yaml), so the sandbox and the benchmarks run them
 * as a cluster does: two glibc arenas instead of up to eight per core, and a fixed mmap and trim
 * threshold of 128 KiB, so freed memory goes back to the system (those thresholds took the
 * operator's peak RSS at 3,000 domains from 215.6 to 202.2 MiB; all three the rate-limit server's at
 * 3,000 checks a second from 213 to 188 MiB: docs/performance.md).
 */
export const CHART_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
};

/** What to run. */
export interface ProcessSpec {
  /** The component's name: names the log and pid files. */
  readonly name: string;
  /** Absolute path of the executable. */
  readonly command: string;
  readonly args: readonly string[];
  /** Variables added to the sandbox command's own environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Keep what the log file holds (a restart of the same component) instead of truncating it. */
  readonly appendToLog?: boolean;
}

/** A process the sandbox started. */
export interface StartedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
}

/**
 * Starts `spec` detached, in its own process group, with stdin closed and stdout and stderr
 * appended to its log file (truncated first unless `appendToLog`, after a header line with the command
 * line), and writes its pid file.
 *
 * @throws ComponentStartError when the executable cannot be started (missing, not executable)
 */
export async function startDetached(paths: SandboxPaths, spec: ProcessSpec): Promise<StartedProcess> {
  const logPath = paths.log(spec.name);
  const log = await open(logPath, spec.appendToLog === true ? 'a' : 'w');
  try {
    await log.write(`# ${new Date().toISOString()} ${[spec.command, ...spec.args].join(' ')}\n`);
    const child = spawn(spec.command, spec.args, {
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      env: { ...process.env, ...spec.env, [OWNER_VARIABLE]: paths.dir },
    });
    const failure = await new Promise<Error | undefined>((resolve) => {
      child.once('spawn', () => {
        resolve(undefined);
      });
      child.once('error', resolve);
    });
    if (failure !== undefined || child.pid === undefined) {
      const reason = failure?.message ?? 'no pid';
      throw new ComponentStartError(spec.name, `cannot start ${spec.command}: ${reason}`, logPath);
    }
    child.unref();
    await writeFile(paths.pid(spec.name), `${child.pid}\n`);
    return { name: spec.name, pid: child.pid, logPath };
  } finally {
    await log.close();
  }
}

/**
 * True when a process with this pid exists and has not exited. Where /proc exists, an exited process
 * its parent has not reaped yet (a zombie: the sandbox's processes are orphans, and some container
 * inits reap late) counts as not alive.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err: unknown) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

function isZombie(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  // "<pid> (<comm>) <state> ...": comm may hold spaces and parentheses, so split after the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state === 'Z' || state === 'X';
}

/**
 * True when `pid` is alive and was started by the sandbox in `dir`. Without /proc (macOS), an
 * alive pid is assumed to be ours.
 */
export async function isOurs(pid: number, dir: string): Promise<boolean> {
  if (!isAlive(pid)) return false;
  let environ: Buffer;
  try {
    environ = await readFile(`/proc/${pid}/environ`);
  } catch (err: unknown) {
    const code = (err as NodeJS.ErrnoException).code;
    // No /proc at all: trust the pid file. The process vanished or is not readable: not ours.
    return code === 'ENOENT' && !(await procExists());
  }
  return environ.toString('utf8').split('\0').includes(`${OWNER_VARIABLE}=${dir}`);
}

async function procExists(): Promise<boolean> {
  try {
    await readdir('/proc/self');
    return true;
  } catch {
    return false;
  }
}

/** The pid in `<dir>/pids/<name>.pid`, or undefined when the file is missing or not a number. */
export async function readPid(paths: SandboxPaths, name: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(paths.pid(name), 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

/** The names of all pid files in `<dir>/pids/`. */
export async function listPidNames(paths: SandboxPaths): Promise<string[]> {
  let entries: string[];
  try {
    entries = await readdir(paths.pidsDir);
  } catch {
    return [];
  }
  return entries.filter((e) => e.endsWith('.pid')).map((e) => path.basename(e, '.pid'));
}

/** What `stopProcess` did. */
export type StopOutcome = 'not-running' | 'terminated' | 'killed';

/**
 * Stops the process in `<dir>/pids/<name>.pid` if it is ours: SIGTERM to its process group, then
 * SIGKILL after `graceMs` milliseconds. Removes the pid file in every case.
 */
export async function stopProcess(paths: SandboxPaths, name: string, graceMs = 5000): Promise<StopOutcome> {
  const pid = await readPid(paths, name);
  let outcome: StopOutcome = 'not-running';
  if (pid !== undefined && (await isOurs(pid, paths.dir))) {
    outcome = await terminate(pid, graceMs);
  }
  await rm(paths.pid(name), { force: true });
  return outcome;
}

async function terminate(pid: number, graceMs: number): Promise<StopOutcome> {
  signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return 'terminated';
    await sleep(100);
  }
  signalGroup(pid, 'SIGKILL');
  const killDeadline = Date.now() + 5000;
  while (isAlive(pid) && Date.now() < killDeadline) await sleep(50);
  return 'killed';
}

/** Signals the process group `pid` leads (the process was started detached), else the process. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}
