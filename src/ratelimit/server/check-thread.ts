/**
 * The main thread's handle on what answers checks (`checks.ts`): either a thread of its own
 * (`CheckThread`, `check-worker.ts`: started with a bounded young generation, handed each policy
 * snapshot, asked for its metrics, stopped) or the main thread itself (`MainThreadChecks`). Which one
 * is `checksPlacement()`'s choice.
 */
import { basename, extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Registry } from 'prom-client';
import type { PolicySnapshot } from '../policy-set.js';
import type { FromCheckWorker, ToCheckWorker } from './check-worker.js';
import { startChecks, type CheckOptions, type RunningChecks } from './checks.js';

/**
 * The young generation of the check thread's heap, MB (`maxYoungGenerationSizeMb`; V8 gives a third
 * to each semi-space). The bench (docs/benchmarks.md) measured the pauses this bounds: a scavenge
 * copies what is still referenced, a share of every call in flight or kept by HTTP/2 streams, so its
 * pause grows with this size, while a smaller size means more scavenges (more CPU per check). 6 MB
 * against 24: scavenges 3.8 times as many and 5 times shorter (0.67 against 3.35 ms), the same p99
 * at 3,000 checks a second, 2 % more CPU a check, 18 MiB less RSS (docs/performance.md).
 *
 * A `--max-semi-space-size` flag (the chart's NODE_OPTIONS, `--max-semi-space-size=2`: the same
 * 6 MB) takes precedence over this in every thread of the process, V8 reading its flags last.
 */
export const CHECK_THREAD_YOUNG_GENERATION_MB = 6;

/**
 * Where the checks run: `thread`, a worker thread of their own (`CheckThread`), or `main`, the
 * process's main thread (`MainThreadChecks`).
 */
export type ChecksPlacement = 'thread' | 'main';

/**
 * The environment variable that overrides `checksPlacement()`'s choice (`thread` or `main`), for
 * measuring one against the other (test/bench/ratelimit.ts).
 */
export const CHECKS_PLACEMENT_ENV = 'PORTICO_RATELIMIT_CHECKS';

/**
 * Where the checks run: `CHECKS_PLACEMENT_ENV` when set; else `main` on Bun and `thread` on Node.
 * On Node the thread bounds the young generation V8 collects (the pauses behind the tail); on Bun
 * (JavaScriptCore) `resourceLimits` does nothing and the same server answered with a shorter tail on
 * the main thread (docs/benchmarks.md, "2026-11-28, session 2").
 *
 * @throws Error when the variable holds anything else
 */
export function checksPlacement(env: NodeJS.ProcessEnv = process.env, bun = isBun()): ChecksPlacement {
  const value = env[CHECKS_PLACEMENT_ENV];
  if (value === undefined || value === '') return bun ? 'main' : 'thread';
  if (value === 'thread' || value === 'main') return value;
  throw new Error(`${CHECKS_PLACEMENT_ENV} must be "thread" or "main", not ${JSON.stringify(value)}`);
}

/** Whether this process runs on Bun (`process.versions.bun`, set by Bun's Node compatibility). */
export function isBun(): boolean {
  return (process.versions as Record<string, string | undefined>).bun !== undefined;
}

/** What the main thread does with the checks, wherever they run. */
export interface Checks {
  /** The bound gRPC port. */
  readonly grpcPort: number;
  /** Settles when the checks have ended: resolves after `stop`, rejects if they ended on their own. */
  readonly exited: Promise<void>;
  /** Resolves once the checks enforce `snapshot` (checks after that see it). */
  setPolicies(snapshot: PolicySnapshot): Promise<void>;
  /** The checks' metrics, Prometheus text format. */
  metrics(): Promise<string>;
  /** Stops taking calls, waits up to `graceMs` for those in flight, closes Redis. */
  stop(graceMs: number): Promise<void>;
}

/**
 * Starts the checks where `placement` says.
 *
 * @throws Error when they fail to start (e.g. the address cannot be bound)
 */
export function startChecksIn(placement: ChecksPlacement, options: CheckOptions): Promise<Checks> {
  return placement === 'main' ? MainThreadChecks.start(options) : CheckThread.start(options);
}

/** The checks in the calling thread (`checks.ts`); they never end on their own. */
export class MainThreadChecks implements Checks {
  readonly #checks: RunningChecks;
  #stopped: Promise<void> | undefined;
  readonly exited: Promise<void>;
  readonly #exit: () => void;
  readonly grpcPort: number;

  private constructor(checks: RunningChecks) {
    this.#checks = checks;
    this.grpcPort = checks.grpcPort;
    let exit = (): void => undefined;
    this.exited = new Promise((resolve) => {
      exit = resolve;
    });
    this.#exit = exit;
  }

  /** @throws Error when the address cannot be bound */
  static async start(options: CheckOptions): Promise<MainThreadChecks> {
    return new MainThreadChecks(await startChecks(options));
  }

  setPolicies(snapshot: PolicySnapshot): Promise<void> {
    if (this.#stopped !== undefined)
      return Promise.reject(new CheckThreadExitedError('the checks have ended'));
    this.#checks.setPolicies(snapshot);
    return Promise.resolve();
  }

  metrics(): Promise<string> {
    if (this.#stopped !== undefined)
      return Promise.reject(new CheckThreadExitedError('the checks have ended'));
    return this.#checks.metrics();
  }

  stop(graceMs: number): Promise<void> {
    this.#stopped ??= this.#checks.stop(graceMs).finally(this.#exit);
    return this.#stopped;
  }
}

/** Why the check thread ended on its own (it never should). */
export class CheckThreadExitedError extends Error {}

type Request = ToCheckWorker extends infer M ? (M extends { id: number } ? Omit<M, 'id'> : never) : never;
type Done = Extract<FromCheckWorker, { type: 'done' }>;

interface Pending {
  readonly resolve: (reply: Done) => void;
  readonly reject: (err: Error) => void;
}

/** The checks in a worker thread of their own (`check-worker.ts`). */
export class CheckThread implements Checks {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #stopping = false;
  /** Settles when the thread has ended: resolves after `stop`, rejects if it ended on its own. */
  readonly exited: Promise<void>;
  /** The bound gRPC port. */
  readonly grpcPort: number;

  private constructor(worker: Worker, grpcPort: number, exited: Promise<void>) {
    this.#worker = worker;
    this.grpcPort = grpcPort;
    this.exited = exited;
    worker.on('message', (message: FromCheckWorker) => {
      if (message.type !== 'done') return;
      const pending = this.#pending.get(message.id);
      this.#pending.delete(message.id);
      pending?.resolve(message);
    });
    worker.once('exit', () => {
      for (const pending of this.#pending.values()) {
        pending.reject(new CheckThreadExitedError('the check thread has ended'));
      }
      this.#pending.clear();
    });
  }

  /**
   * Starts the thread and waits until its gRPC listener is bound.
   *
   * @throws Error when the thread fails to start (e.g. the address cannot be bound)
   */
  static async start(
    options: CheckOptions,
    youngGenerationMb = CHECK_THREAD_YOUNG_GENERATION_MB,
  ): Promise<CheckThread> {
    const workerModule = checkWorkerModule();
    const worker = new Worker(workerModule, {
      workerData: options,
      resourceLimits: { maxYoungGenerationSizeMb: youngGenerationMb },
      ...(workerModule.pathname.endsWith('.ts')
        ? { execArgv: [...process.execArgv, '--import', 'tsx'] }
        : {}),
    });
    let stopping = (): boolean => false;
    const exited = new Promise<void>((resolve, reject) => {
      let failure: Error | undefined;
      worker.once('error', (err: unknown) => {
        failure = err instanceof Error ? err : new Error(String(err));
      });
      worker.once('exit', (code) => {
        if (stopping()) resolve();
        else reject(failure ?? new CheckThreadExitedError(`the check thread exited with code ${code}`));
      });
    });
    const port = await new Promise<number>((resolve, reject) => {
      const onMessage = (message: FromCheckWorker): void => {
        if (message.type !== 'listening') return;
        worker.off('message', onMessage);
        resolve(message.port);
      };
      worker.on('message', onMessage);
      exited.then(
        () => {
          reject(new CheckThreadExitedError('the check thread ended before listening'));
        },
        (err: unknown) => {
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
    const thread = new CheckThread(worker, port, exited);
    stopping = () => thread.#stopping;
    return thread;
  }

  #request(message: Request): Promise<Done> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (this.#worker.threadId === -1) {
        reject(new CheckThreadExitedError('the check thread has ended'));
        return;
      }
      this.#pending.set(id, { resolve, reject });
      const full: ToCheckWorker = { ...message, id };
      this.#worker.postMessage(full);
    });
  }

  /** Resolves once the check thread enforces `snapshot` (checks after that see it). */
  async setPolicies(snapshot: PolicySnapshot): Promise<void> {
    await this.#request({ type: 'policies', snapshot });
  }

  /** The check thread's metrics, Prometheus text format. */
  async metrics(): Promise<string> {
    return (await this.#request({ type: 'metrics' })).text ?? '';
  }

  /** Stops taking calls, waits up to `graceMs` for those in flight, closes Redis, ends the thread. */
  async stop(graceMs: number): Promise<void> {
    if (this.#stopping) return this.exited;
    this.#stopping = true;
    try {
      await this.#request({ type: 'stop', graceMs });
    } finally {
      await this.#worker.terminate();
    }
    await this.exited;
  }
}

/** A registry whose text is its own metrics followed by `more()` (the check thread's). */
export class JoinedRegistry extends Registry {
  readonly #more: () => Promise<string>;

  constructor(more: () => Promise<string>) {
    super();
    this.#more = more;
  }

  override async metrics(): Promise<string> {
    const [own, more] = await Promise.all([super.metrics(), this.#more()]);
    return more === '' ? own : `${own}\n${more}`;
  }
}

/**
 * The check thread's module: in the rate-limit server's bundle (dist/ratelimit-server.bundle.js,
 * scripts/bundle.ts), the check thread's bundle beside it; else check-worker.js next to this file in
 * dist/, or check-worker.ts from source (tests, tsx), which the thread loads through tsx.
 */
function checkWorkerModule(): URL {
  const self = fileURLToPath(import.meta.url);
  if (basename(self) === 'ratelimit-server.bundle.js') {
    return new URL('./ratelimit-check-worker.bundle.js', import.meta.url);
  }
  return new URL(`./check-worker${extname(self)}`, import.meta.url);
}
