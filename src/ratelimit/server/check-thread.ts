/**
 * The main thread's handle on the thread that answers checks (`check-worker.ts`): starts it with a
 * bounded young generation, hands it each policy snapshot, reads its metrics, stops it.
 */
import { basename, extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Registry } from 'prom-client';
import type { PolicySnapshot } from '../policy-set.js';
import type { CheckWorkerOptions, FromCheckWorker, ToCheckWorker } from './check-worker.js';

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

/** Why the check thread ended on its own (it never should). */
export class CheckThreadExitedError extends Error {}

type Request = ToCheckWorker extends infer M ? (M extends { id: number } ? Omit<M, 'id'> : never) : never;
type Done = Extract<FromCheckWorker, { type: 'done' }>;

interface Pending {
  readonly resolve: (reply: Done) => void;
  readonly reject: (err: Error) => void;
}

export class CheckThread {
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
    options: CheckWorkerOptions,
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
