/**
 * The thread that answers checks: the gRPC listener, RateLimitService and the Redis connection of
 * `portico ratelimit-server` (`checks.ts`), in a worker thread (node:worker_threads) started by
 * `check-thread.ts` on Node.
 * Everything else (the config watch, the load reports, /metrics) stays in the main thread, which
 * sends each newly loaded policy snapshot here and asks for this thread's metrics when /metrics is
 * read.
 *
 * Why a thread of its own: its V8 heap gets a young generation of a bounded size
 * (`resourceLimits.maxYoungGenerationSizeMb`). Under load a part of every call's objects outlives a
 * young-generation collection (the HTTP/2 streams of @grpc/grpc-js and what hangs on them, kept until
 * a full GC on Node 24), so each scavenge pauses the loop in proportion to the young generation's
 * size; Node 24 lets it grow to 64 MB on its own, which made pauses of 15-40 ms. See
 * docs/benchmarks.md.
 *
 * Messages: in `ToCheckWorker`, out `FromCheckWorker`; each request carries an id its reply repeats.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import type { PolicySnapshot } from '../policy-set.js';
import { startChecks, type CheckOptions } from './checks.js';

/** What the check thread needs to start (`workerData`). */
export type CheckWorkerOptions = CheckOptions;

export type ToCheckWorker =
  /** Enforce `snapshot` from the next check on; reply `done`. */
  | { readonly type: 'policies'; readonly id: number; readonly snapshot: PolicySnapshot }
  /** Reply `done` with this thread's metrics in Prometheus text format. */
  | { readonly type: 'metrics'; readonly id: number }
  /** Stop taking calls, finish those in flight (up to the grace), close Redis; reply `done`. */
  | { readonly type: 'stop'; readonly id: number; readonly graceMs: number };

export type FromCheckWorker =
  /** The gRPC listener is bound (sent once, first). */
  | { readonly type: 'listening'; readonly port: number }
  | { readonly type: 'done'; readonly id: number; readonly text?: string };

async function run(port: MessagePort, options: CheckWorkerOptions): Promise<void> {
  const checks = await startChecks(options);
  const reply = (message: FromCheckWorker): void => {
    port.postMessage(message);
  };
  port.on('message', (message: ToCheckWorker) => {
    switch (message.type) {
      case 'policies':
        checks.setPolicies(message.snapshot);
        reply({ type: 'done', id: message.id });
        return;
      case 'metrics':
        void checks.metrics().then((text) => {
          reply({ type: 'done', id: message.id, text });
        });
        return;
      case 'stop':
        // The main thread terminates this thread after the reply.
        void checks.stop(message.graceMs).finally(() => {
          reply({ type: 'done', id: message.id });
        });
        return;
    }
  });
  reply({ type: 'listening', port: checks.grpcPort });
}

if (parentPort !== null) await run(parentPort, workerData as CheckWorkerOptions);
