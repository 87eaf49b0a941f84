/**
 * The thread that answers checks: the gRPC listener, RateLimitService and the Redis connection of
 * `portico ratelimit-server`, in a worker thread (node:worker_threads) started by `check-thread.ts`.
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
import type { LevelWithSilent, Logger } from 'pino';
import { bindServer, createRateLimitGrpcServer, serverCredentials, shutdownServer } from '../grpc.js';
import type { GrpcConnectionSettings, GrpcTlsFiles } from '../grpc-settings.js';
import { createCheckMetrics, type CheckMetrics } from '../metrics.js';
import { EMPTY_SNAPSHOT, type PolicySnapshot } from '../policy-set.js';
import {
  redisConnectionErrorHint,
  type RedisConnectionErrorKind,
  type RedisConnectionSettings,
} from '../redis-connection.js';
import { CredentialFileWatcher, type RedisCredentials } from '../redis-credentials.js';
import { DEFAULT_BATCH_SETTINGS } from '../batched-counts.js';
import { RedisCounterStore } from '../redis-store.js';
import { RateLimitService, type FailureMode } from '../service.js';
import { createServerLogger } from './logger.js';

/** What the check thread needs to start (`workerData`). */
export interface CheckWorkerOptions {
  readonly grpcListenAddress: string;
  /** One server, a cluster or Sentinel; TLS and credentials. */
  readonly redis: RedisConnectionSettings;
  readonly redisTimeoutMs: number;
  readonly failureMode: FailureMode;
  /** Shadow mode (service.ts); off when unset. */
  readonly shadowMode?: boolean;
  /** `--batch-max-hits` (batched-counts.ts); 0 or unset: every check is exact. */
  readonly batchMaxHits?: number;
  /** `--gateway-domain` (service.ts); `DEFAULT_GATEWAY_DOMAIN` when unset. */
  readonly gatewayDomain?: string;
  /** Keepalive and maximum connection age; grpc.ts's defaults when unset. */
  readonly connection?: GrpcConnectionSettings;
  /** TLS (mTLS with a client CA) of the gRPC listener; plaintext when unset. */
  readonly tls?: GrpcTlsFiles | undefined;
  readonly logLevel: LevelWithSilent;
}

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

/** A connection error is logged when its kind or message changes, else at most once per this, ms. */
export const CONNECTION_ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * Logs connection errors: the first of each kind and message at once, a repeat at most every
 * CONNECTION_ERROR_LOG_INTERVAL_MS with the number since the last line (ioredis retries every
 * 50 ms to 2 s, and a wrong password fails each attempt).
 */
function connectionErrorLogger(
  log: Logger,
  options: CheckWorkerOptions,
): (kind: RedisConnectionErrorKind, err: Error) => void {
  let last = '';
  let lastAt = 0;
  let since = 0;
  return (kind, err) => {
    since += 1;
    const what = `${kind}: ${err.message}`;
    const now = Date.now();
    if (what === last && now - lastAt < CONNECTION_ERROR_LOG_INTERVAL_MS) return;
    const hint = redisConnectionErrorHint(kind, err, options.redis);
    log.error(
      { reason: kind, err: err.message, errors: since, failureMode: options.failureMode },
      `Redis connection error: ${hint}`,
    );
    last = what;
    lastAt = now;
    since = 0;
  };
}

/**
 * Watches the Redis credential files, if any, and hands a change to the store (used from the next
 * connection on); logs and counts each change and each file that cannot be read. Undefined when no
 * credential comes from a file.
 */
function watchCredentials(
  options: CheckWorkerOptions,
  store: RedisCounterStore,
  metrics: CheckMetrics,
  log: Logger,
): CredentialFileWatcher | undefined {
  const { redis } = options;
  const files = redis.credentialFiles;
  if (files === undefined) return undefined;
  const t = redis.topology;
  const initial: RedisCredentials = {
    username: files.usernameFile === undefined ? undefined : redis.username,
    password: files.passwordFile === undefined ? undefined : redis.password,
    sentinelPassword:
      files.sentinelPasswordFile === undefined || t.kind !== 'sentinel' ? undefined : t.sentinelPassword,
  };
  return new CredentialFileWatcher({
    files,
    initial,
    onChange: (credentials, changed) => {
      store.setCredentials(credentials);
      metrics.redisCredentialReloadsTotal.inc({ result: 'loaded' });
      log.info({ changed }, 'reloaded the Redis credentials: used from the next connection on');
    },
    onError: (err) => {
      metrics.redisCredentialReloadsTotal.inc({ result: 'failed' });
      log.error(
        { credential: err.credential, file: err.file, err: err.reason },
        'cannot read a Redis credential file: the previous credentials stay in use',
      );
    },
  });
}

function createStore(options: CheckWorkerOptions, metrics: CheckMetrics, log: Logger): RedisCounterStore {
  const logConnectionError = connectionErrorLogger(log, options);
  return new RedisCounterStore({
    connection: options.redis,
    commandTimeoutMs: options.redisTimeoutMs,
    onCommand: (command, seconds, error) => {
      metrics.redisCommandDuration.observe({ command }, seconds);
      if (error !== undefined) metrics.redisErrorsTotal.inc({ command, error });
    },
    onConnectionError: (kind, err) => {
      metrics.redisConnectionErrorsTotal.inc({ reason: kind });
      logConnectionError(kind, err);
    },
    onStateChange: (state, err) => {
      metrics.redisConnected.set(state === 'ready' ? 1 : 0);
      if (state === 'ready') log.info({ topology: options.redis.topology.kind }, 'connected to Redis');
      else log.error({ err: err?.message, failureMode: options.failureMode }, 'lost the connection to Redis');
    },
  });
}

async function run(port: MessagePort, options: CheckWorkerOptions): Promise<void> {
  const log = createServerLogger(options.logLevel);
  const metrics = createCheckMetrics();
  let snapshot: PolicySnapshot = EMPTY_SNAPSHOT;
  const store = createStore(options, metrics, log);
  const credentials = watchCredentials(options, store, metrics, log);
  const service = new RateLimitService({
    policies: () => snapshot,
    store,
    failureMode: options.failureMode,
    shadowMode: options.shadowMode === true,
    batching: { ...DEFAULT_BATCH_SETTINGS, maxBatchHits: options.batchMaxHits ?? 0 },
    ...(options.gatewayDomain === undefined ? {} : { gatewayDomain: options.gatewayDomain }),
    now: () => Date.now(),
    metrics,
    log,
  });
  const { server: grpc, setServing } = createRateLimitGrpcServer(
    (request) => service.shouldRateLimit(request),
    log,
    options.connection,
  );
  let grpcPort: number;
  try {
    grpcPort = await bindServer(grpc, options.grpcListenAddress, serverCredentials(options.tls));
  } catch (err) {
    credentials?.close();
    await store.close();
    throw err;
  }
  const reply = (message: FromCheckWorker): void => {
    port.postMessage(message);
  };
  port.on('message', (message: ToCheckWorker) => {
    switch (message.type) {
      case 'policies':
        snapshot = message.snapshot;
        reply({ type: 'done', id: message.id });
        return;
      case 'metrics':
        metrics.registry.metrics().then(
          (text) => {
            reply({ type: 'done', id: message.id, text });
          },
          (err: unknown) => {
            log.error({ err }, 'reading the check metrics failed');
            reply({ type: 'done', id: message.id, text: '' });
          },
        );
        return;
      case 'stop':
        // Health says NOT_SERVING to whoever watches it; no new call is taken, those in flight are
        // answered (up to the grace). The main thread terminates this thread after the reply.
        setServing(false);
        void shutdownServer(grpc, message.graceMs)
          .then(() => service.flush())
          .then(() => {
            credentials?.close();
            return store.close();
          })
          .finally(() => {
            reply({ type: 'done', id: message.id });
          });
        return;
    }
  });
  reply({ type: 'listening', port: grpcPort });
}

if (parentPort !== null) await run(parentPort, workerData as CheckWorkerOptions);
