/**
 * The rate-limit benchmark's floor (`npm run bench:ratelimit -- --floor`): a gRPC server with
 * Portico's service definition and server options (src/ratelimit/grpc.ts, @grpc/grpc-js) that
 * answers every ShouldRateLimit call `OK` with the three X-RateLimit headers at once, on its main
 * thread: no Redis, no decision, no metrics, no check thread. Its latency is what any rate-limit
 * server on this runtime and gRPC library costs at least (docs/benchmarks.md, "2026-11-27 (later)").
 * Not Portico's server.
 *
 *   node --import tsx test/bench/grpc-floor-server.ts ratelimit-server \
 *     --grpc-listen-address 127.0.0.1:8081 --metrics-listen-address 127.0.0.1:9091 [other flags]
 *
 * Takes the flags the bench gives `portico ratelimit-server`; uses the two addresses (`host:port`)
 * and `--redis-url`, and ignores the others. `GET /readyz` on the metrics address answers 200 once
 * the gRPC port is bound. Exits 0 on SIGTERM.
 *
 * `PORTICO_FLOOR` (a comma-separated list; the bench's `--portico-env`) adds one part of Portico's
 * server at a time, to tell what each adds to the tail (docs/benchmarks.md, "2026-11-28, session 2"):
 * - `worker`: the gRPC server in a worker thread (node:worker_threads), as Portico's check thread;
 * - `redis`: each call awaits one `INCR` of a key of the request on `--redis-url` (ioredis, one
 *   connection, as Portico's store);
 * - `metrics`: each call counts and times itself in prom-client (a labelled counter and a histogram),
 *   as Portico's check metrics do.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redis } from 'ioredis';
import pino from 'pino';
import { Counter, Histogram, Registry } from 'prom-client';
import { bindServer, createRateLimitGrpcServer } from '../../src/ratelimit/grpc.js';
import type { RateLimitRequest, RateLimitResponse } from '../../src/ratelimit/protocol.js';

const PARTS = ['worker', 'redis', 'metrics'] as const;
type Part = (typeof PARTS)[number];

/** `PORTICO_FLOOR`'s parts. @throws Error for a part not in PARTS */
function parts(value: string | undefined): Set<Part> {
  const list = (value ?? '').split(',').filter(Boolean);
  for (const p of list) {
    if (!(PARTS as readonly string[]).includes(p)) throw new Error(`PORTICO_FLOOR: unknown part ${p}`);
  }
  return new Set(list as Part[]);
}

/** A fresh answer per call, as a server that computed it would build one. */
function admitted(): RateLimitResponse {
  return {
    overall_code: 'OK',
    statuses: [{ code: 'OK' }],
    response_headers_to_add: [
      { key: 'X-RateLimit-Limit', value: '1000' },
      { key: 'X-RateLimit-Remaining', value: '999' },
      { key: 'X-RateLimit-Reset', value: '42' },
    ],
  };
}

interface FloorOptions {
  readonly grpcAddress: string;
  readonly redisUrl: string | undefined;
  readonly parts: readonly Part[];
}

/** Binds the gRPC server with the parts asked for; resolves once it listens. */
async function serve(o: FloorOptions): Promise<void> {
  const redis = o.parts.includes('redis') && o.redisUrl !== undefined ? new Redis(o.redisUrl) : undefined;
  const registry = new Registry();
  const metrics = o.parts.includes('metrics')
    ? {
        checks: new Counter({
          name: 'floor_checks_total',
          help: 'checks',
          labelNames: ['domain', 'code', 'reason'] as const,
          registers: [registry],
        }),
        duration: new Histogram({
          name: 'floor_check_duration_seconds',
          help: 'check time',
          buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
          registers: [registry],
        }),
      }
    : undefined;
  const answer = async (request: RateLimitRequest): Promise<RateLimitResponse> => {
    const started = performance.now();
    if (redis !== undefined) {
      await redis.incr(`floor:${request.descriptors?.[0]?.entries?.[0]?.value ?? ''}`);
    }
    const response = admitted();
    if (metrics !== undefined) {
      metrics.checks.inc({ domain: request.domain ?? '', code: 'OK', reason: 'admitted' });
      metrics.duration.observe((performance.now() - started) / 1000);
    }
    return response;
  };
  const { server } = createRateLimitGrpcServer(answer, pino({ level: 'silent' }));
  await bindServer(server, o.grpcAddress);
}

if (isMainThread) {
  const { values } = parseArgs({
    strict: false,
    allowPositionals: true,
    options: {
      'grpc-listen-address': { type: 'string' },
      'metrics-listen-address': { type: 'string' },
      'redis-url': { type: 'string' },
    },
  });
  const grpcAddress = values['grpc-listen-address'];
  const metricsAddress = values['metrics-listen-address'];
  const redisUrl = values['redis-url'];
  if (typeof grpcAddress !== 'string' || typeof metricsAddress !== 'string') {
    throw new Error('--grpc-listen-address and --metrics-listen-address (host:port) are required');
  }
  const wanted = parts(process.env.PORTICO_FLOOR);
  const o: FloorOptions = {
    grpcAddress,
    redisUrl: typeof redisUrl === 'string' ? redisUrl : undefined,
    parts: [...wanted],
  };
  if (wanted.has('worker')) {
    const worker = new Worker(new URL(import.meta.url), {
      workerData: o,
      ...(import.meta.url.endsWith('.ts') && (process.versions as { bun?: string }).bun === undefined
        ? { execArgv: [...process.execArgv] }
        : {}),
    });
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => {
        resolve();
      });
      worker.once('error', reject);
    });
  } else {
    await serve(o);
  }
  const colon = metricsAddress.lastIndexOf(':');
  createServer((_request, response) => {
    response.end('ok');
  }).listen(Number(metricsAddress.slice(colon + 1)), metricsAddress.slice(0, colon));
  process.on('SIGTERM', () => process.exit(0));
} else {
  await serve(workerData as FloorOptions);
  parentPort?.postMessage('listening');
}
