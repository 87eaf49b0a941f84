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
import { scrape } from './metrics.js';

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

/**
 * Stops the stack's operator and returns its command line and environment, or undefined if none ran.
 * Throws when it did not exit within 15 s of SIGTERM, after starting it again (the stack is left as
 * it was found).
 */
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
  const stopped = { command: command ?? process.execPath, args, env };
  if ((await stopProcess(paths, CONTROLLER, 15_000)) === 'killed') {
    await restartStackController(stopped);
    throw new Error(
      `the stack operator did not exit within 15 s of SIGTERM (killed and started again); see ${path.join(sandbox.sandboxDir, 'logs', `${CONTROLLER}.log`)}`,
    );
  }
  return stopped;
}

/** Starts the stack's operator again as `stopStackController` found it, and waits until it is ready. */
export async function restartStackController(stopped: ControllerCommand | undefined): Promise<void> {
  if (!stopped) return;
  // startDetached sets the owner variable itself.
  const env = Object.fromEntries(Object.entries(stopped.env).filter(([k]) => k !== 'PORTICO_SANDBOX_OWNER'));
  // Appended: the log keeps what the operator did before the stop, for a later file's failure.
  await startDetached(paths, { name: CONTROLLER, ...stopped, env, appendToLog: true });
  await waitFor('the stack operator to be ready again', async () =>
    (await httpStatus(sandbox.controllerReadyzUrl)) === 200 ? true : undefined,
  );
}

/**
 * The first retry of a failed certificate order in the operators the fault tests start, in seconds
 * (`--issuance-first-retry-seconds`; 60 in production, docs/customdomains.md, "Schedules"): the
 * schedule's shape (the doubling, the CA's Retry-After, the announced next attempt) is the same, but
 * a test waits 15 s for it rather than a minute.
 */
export const TEST_FIRST_RETRY_SECONDS = 15;
/** `TEST_FIRST_RETRY_SECONDS` as the flag `startOperator`'s overrides take. */
export const SHORT_FIRST_RETRY: Readonly<Record<string, string>> = {
  '--issuance-first-retry-seconds': String(TEST_FIRST_RETRY_SECONDS),
};

/**
 * The stack operator's HTTP-01 port (`--http01-self-check-port`, or its environment variable): where
 * a second Pebble must validate HTTP-01 for an operator started from the stack's command line.
 *
 * @throws Error when the command sets none
 */
export function challengePort(command: ControllerCommand): number {
  const at = command.args.indexOf('--http01-self-check-port');
  const port = Number(at >= 0 ? command.args[at + 1] : command.env.PORTICO_HTTP01_SELF_CHECK_PORT);
  if (!Number.isInteger(port) || port <= 0)
    throw new Error('the stack operator has no --http01-self-check-port');
  return port;
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
 * The sum of the samples of `name` whose labels include `labels`, at the operator's /metrics
 * (0 when there are none).
 */
export async function operatorMetric(
  operator: Pick<OperatorProcess, 'metricsPort'>,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const samples = await scrape(`http://127.0.0.1:${operator.metricsPort}/metrics`);
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** One line of an operator's log: pino's JSON object (`msg`, `level`, `time` and the line's fields). */
export type OperatorLogEntry = Record<string, unknown>;

/**
 * The lines of an operator's log (JSON lines, as the operator writes them) whose message is `msg`,
 * or every line when `msg` is undefined, in the order written; `where` narrows them further (e.g.
 * by `hostname` or `namespace`). A line that is not a JSON object (a stack trace, or a last line
 * still being written) is passed over.
 *
 * @throws the error of reading the file (ENOENT before the operator has written its first line).
 */
export async function operatorLogLines(
  operator: Pick<OperatorProcess, 'log'>,
  msg?: string,
  where: (entry: OperatorLogEntry) => boolean = () => true,
): Promise<OperatorLogEntry[]> {
  const entries: OperatorLogEntry[] = [];
  for (const line of (await readFile(operator.log, 'utf8')).split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: OperatorLogEntry;
    try {
      entry = JSON.parse(line) as OperatorLogEntry;
    } catch {
      continue;
    }
    if ((msg === undefined || entry['msg'] === msg) && where(entry)) entries.push(entry);
  }
  return entries;
}

/**
 * Waits until `operator` leads and has synced its watches (its log says "controller started") and
 * its /readyz answers 200.
 *
 * @throws when that has not happened within `timeoutMs` milliseconds.
 */
export async function waitForOperatorStarted(operator: OperatorProcess, timeoutMs = 90_000): Promise<void> {
  await waitFor(
    'the operator to lead and sync its watches',
    async () => {
      const started = await operatorLogLines(operator, 'controller started').catch(() => []);
      if (started.length === 0) return undefined;
      return (await httpStatus(`http://127.0.0.1:${operator.metricsPort}/readyz`)) === 200 ? true : undefined;
    },
    timeoutMs,
  );
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

/** Milliseconds an operator gets to exit after SIGTERM before it is killed. */
const EXIT_DEADLINE_MS = 30_000;

/**
 * SIGTERM, and wait for the exit. Throws when the operator did not exit within 30 s (it is then
 * SIGKILLed, so the next test starts clean) or exited with a code other than 0: a clean stop is
 * part of what is tested.
 */
export async function stopOperator(operator: OperatorProcess): Promise<void> {
  await stopChild(operator.child, `operator ${operator.name}`, operator.log);
}

/** `stopOperator` for any child process of the test: `what` and `log` name it in the error. */
export async function stopChild(child: ChildProcess, what: string, log: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  let exit: [number | null, NodeJS.Signals | null];
  try {
    exit = (await once(child, 'exit', { signal: AbortSignal.timeout(EXIT_DEADLINE_MS) })) as typeof exit;
  } catch (err) {
    if ((err as Error).name !== 'AbortError') throw err;
    const killed = once(child, 'exit');
    child.kill('SIGKILL');
    await killed;
    throw new Error(
      `${what} did not exit within ${EXIT_DEADLINE_MS / 1000} s of SIGTERM (killed); see ${log}`,
      { cause: err },
    );
  }
  const [code, signal] = exit;
  if (code !== 0) {
    throw new Error(
      `${what} exited with ${code === null ? `signal ${String(signal)}` : `code ${code}`} after SIGTERM; see ${log}`,
    );
  }
}

/**
 * Runs every step even when one fails (a teardown must restore the stack for the files after it),
 * then throws the first failure.
 */
export async function runAll(...steps: (() => Promise<unknown>)[]): Promise<void> {
  const failures: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length > 0) throw failures[0];
}

/** SIGKILL, and wait for the exit: a crash, with no chance to clean up. */
export async function killOperator(operator: OperatorProcess): Promise<void> {
  const { child } = operator;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

/**
 * The value of `portico_reconcile_total{controller, result}` at `metricsUrl` (an operator's
 * `/metrics`); 0 when the series does not exist yet.
 */
export async function reconcileCount(
  metricsUrl: string,
  controller: string,
  result: string,
): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('portico_reconcile_total{') &&
        l.includes(`controller="${controller}"`) &&
        l.includes(`result="${result}"`),
    );
  return Number(line?.split(' ').at(-1) ?? 0);
}
