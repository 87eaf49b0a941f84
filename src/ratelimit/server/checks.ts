/**
 * What answers checks in `portico ratelimit-server`: the gRPC listener, RateLimitService and the
 * connection to Redis. They run either in a thread of their own (`check-worker.ts`, started by
 * `check-thread.ts`: on Node, where that thread's bounded young generation shortens V8's pauses) or
 * in the process's main thread (`MainThreadChecks` in `check-thread.ts`: on Bun, where the thread's
 * young-generation bound does not exist and the checks in a worker had the longer tail in 3 of 3
 * runs; docs/benchmarks.md, "2026-11-28, session 2"). Everything else (the config watch, the load reports, /metrics) stays in
 * the main thread, which hands the checks each newly loaded policy snapshot and reads their metrics
 * when /metrics is read.
 */
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

/** What the checks need to start (the check thread's `workerData`). */
export interface CheckOptions {
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

/** A connection error is logged when its kind or message changes, else at most once per this, ms. */
export const CONNECTION_ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * Logs connection errors: the first of each kind and message at once, a repeat at most every
 * CONNECTION_ERROR_LOG_INTERVAL_MS with the number since the last line (ioredis retries every
 * 50 ms to 2 s, and a wrong password fails each attempt).
 */
function connectionErrorLogger(
  log: Logger,
  options: CheckOptions,
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
  options: CheckOptions,
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

function createStore(options: CheckOptions, metrics: CheckMetrics, log: Logger): RedisCounterStore {
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

/** Running checks: the bound gRPC listener, its service and its Redis connection. */
export interface RunningChecks {
  /** The bound gRPC port. */
  readonly grpcPort: number;
  /** Enforces `snapshot` from the next check on. */
  setPolicies(snapshot: PolicySnapshot): void;
  /** The checks' metrics, Prometheus text format. */
  metrics(): Promise<string>;
  /**
   * Health turns NOT_SERVING, no new call is taken, those in flight are answered (up to `graceMs`),
   * batched hits are sent, the credential files are no longer watched, Redis is closed. Never throws.
   */
  stop(graceMs: number): Promise<void>;
}

/**
 * Starts the checks in the calling thread and binds the gRPC listener.
 *
 * @throws Error when the address cannot be bound (Redis is closed again)
 */
export async function startChecks(options: CheckOptions): Promise<RunningChecks> {
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
  return {
    grpcPort,
    setPolicies: (next) => {
      snapshot = next;
    },
    metrics: async () => {
      try {
        return await metrics.registry.metrics();
      } catch (err: unknown) {
        log.error({ err }, 'reading the check metrics failed');
        return '';
      }
    },
    stop: async (graceMs) => {
      setServing(false);
      try {
        await shutdownServer(grpc, graceMs);
        await service.flush();
      } finally {
        credentials?.close();
        await store.close();
      }
    },
  };
}
