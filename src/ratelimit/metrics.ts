/**
 * Prometheus metrics of `portico ratelimit-server` (prom-client), served at `/metrics`.
 * Names follow Prometheus conventions: `_total` counters, `_seconds` durations, base units.
 *
 * Two groups, each in a registry of its own: the checks' metrics live in the thread that answers
 * checks (`server/check-worker.ts`), the config's and Node's process metrics in the main thread; the
 * `/metrics` page joins both (`server/check-thread.ts`).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { BanLedger } from './ban-ledger.js';
import { REDIS_CONNECTION_ERROR_KINDS } from './redis-connection.js';
import { REQUEST_BOUNDS } from './request-limits.js';
import { buildInfo } from '../build-info.js';
import { registerBuildInfo } from '../observability/build-info-metric.js';

/**
 * The Redis commands the server sends: the check script (EVALSHA), a batch of counts admitted
 * locally (`batch`, EVALSHA; batched-counts.ts) and the clock measurement (TIME).
 */
export const REDIS_COMMANDS = ['check', 'batch', 'time'] as const;
export type RedisCommand = (typeof REDIS_COMMANDS)[number];

/**
 * Why a Redis command failed: `timeout` (no answer within --redis-timeout-ms), `connection` (not
 * connected, or the connection was lost while it waited), `reply` (Redis answered with an error),
 * `too_late` (the check script ran after its deadline and counted nothing, `redis-store.ts`).
 */
export const REDIS_ERROR_KINDS = ['timeout', 'connection', 'reply', 'too_late'] as const;
export type RedisErrorKind = (typeof REDIS_ERROR_KINDS)[number];

/** What the checks record. */
export interface CheckMetrics {
  readonly registry: Registry;
  /** Descriptors checked, by domain, answer code and reason. */
  readonly checksTotal: Counter<'domain' | 'code' | 'reason'>;
  /** Time from receiving a check to answering it. */
  readonly checkDuration: Histogram;
  /** Checks Redis could not answer, answered by the failure mode instead. */
  readonly storeFailuresTotal: Counter<'failure_mode'>;
  /** Checks answered from this replica's counts while Redis could not answer, by the local decision's reason. */
  readonly degradedChecksTotal: Counter<'reason'>;
  /** 1 while checks skip Redis because it failed to answer (the breaker is open), else 0. */
  readonly degraded: Gauge;
  /** Shadow mode: descriptors that would have been refused, by domain and reason. */
  readonly shadowRefusalsTotal: Counter<'domain' | 'reason'>;
  /** Checks of keys over their limit or banned answered from memory, without Redis. */
  readonly overLimitCacheHitsTotal: Counter;
  /** Descriptors admitted far below their limit without waiting for Redis (batched-counts.ts). */
  readonly batchedAdmissionsTotal: Counter;
  /** Batches of locally admitted hits sent to Redis, by result (`acknowledged`, `failed`). */
  readonly batchesTotal: Counter<'result'>;
  /** Bans started. */
  readonly bansTotal: Counter<'domain'>;
  /** 1 while connected to Redis. */
  readonly redisConnected: Gauge;
  /** Requests refused with INVALID_ARGUMENT, by the bound they broke (`request-limits.ts`). */
  readonly invalidRequestsTotal: Counter<'bound'>;
  /** Bans this server started that still run; `portico_ratelimit_bans_active` reads it at each scrape. */
  readonly bans: BanLedger;
  /** Time from sending a Redis command to its answer or failure, by command. */
  readonly redisCommandDuration: Histogram<'command'>;
  /** Redis commands that failed, by command and kind of error. */
  readonly redisErrorsTotal: Counter<'command' | 'error'>;
  /** Errors on the connections to Redis, by kind (`redis-connection.ts`). */
  readonly redisConnectionErrorsTotal: Counter<'reason'>;
  /** Reads of the Redis credential files that changed them (`loaded`) or failed (`failed`). */
  readonly redisCredentialReloadsTotal: Counter<'result'>;
}

/** What loading the config records. */
export interface ConfigMetrics {
  readonly registry: Registry;
  /** Config documents read from the ConfigMap, by result (loaded, rejected). */
  readonly configLoadsTotal: Counter<'result'>;
  /** Policy entries refused by the server's checks. */
  readonly policiesRejectedTotal: Counter;
  /** Policies loaded now. */
  readonly policiesLoaded: Gauge;
  /** By config shard: a hash of the document in force (`configHash`). */
  readonly configHash: Gauge<'shard'>;
  /** By config shard: 1 when its last document loaded, 0 when it was refused whole. */
  readonly configLastLoadSuccessful: Gauge<'shard'>;
  /** By config shard: when a document of it last loaded, Unix seconds. */
  readonly configLastLoadSuccessTimestamp: Gauge<'shard'>;
  /** Writes of this instance's load report to the status ConfigMap, by result (written, failed). */
  readonly loadReportWritesTotal: Counter<'result'>;
  /** Bytes of this instance's last load report (its value in the status ConfigMap). */
  readonly loadReportBytes: Gauge;
}

/** The results `portico_ratelimit_load_report_writes_total` counts. */
export const LOAD_REPORT_WRITE_RESULTS = ['written', 'failed'] as const;
export type LoadReportWriteResult = (typeof LOAD_REPORT_WRITE_RESULTS)[number];

export type RateLimitMetrics = CheckMetrics & ConfigMetrics;

/**
 * The checks' metrics, in `registry`. The series of every known label value of the Redis error and
 * invalid request counters start at 0 (as the config loads' do), so that `increase()` and `rate()`
 * see the first one (a series that first appears at 1 has no earlier sample to grow from); the
 * store failures' series of the server's failure mode is started by `RateLimitService`. `now` (Unix
 * ms) is the clock the bans-active gauge compares ban ends with: the service's own.
 */
export function createCheckMetrics(
  registry: Registry = new Registry(),
  now: () => number = Date.now,
): CheckMetrics {
  const registers = [registry];
  const bans = new BanLedger();
  const metrics: CheckMetrics = {
    registry,
    bans,
    checksTotal: new Counter({
      name: 'portico_ratelimit_checks_total',
      help: 'Descriptors checked, by rate-limit domain, code (OK, OVER_LIMIT) and reason (admitted, minute, day, banned, unknown_domain, no_key_id, store_unavailable).',
      labelNames: ['domain', 'code', 'reason'],
      registers,
    }),
    checkDuration: new Histogram({
      name: 'portico_ratelimit_check_duration_seconds',
      help: 'Time to answer one ShouldRateLimit call, seconds.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    storeFailuresTotal: new Counter({
      name: 'portico_ratelimit_store_failures_total',
      help: 'Checks Redis could not answer (or that skipped it while it did not answer); answered by the failure mode (local, allow or deny).',
      labelNames: ['failure_mode'],
      registers,
    }),
    degradedChecksTotal: new Counter({
      name: 'portico_ratelimit_degraded_checks_total',
      help: "Checks answered from this replica's own counts while Redis could not answer (failure mode local or allow), by the local decision's reason (admitted, minute, day, banned).",
      labelNames: ['reason'],
      registers,
    }),
    shadowRefusalsTotal: new Counter({
      name: 'portico_ratelimit_shadow_refusals_total',
      help: 'Shadow mode: descriptors answered OK that would have been refused, by rate-limit domain and reason (minute, day, banned, no_key_id).',
      labelNames: ['domain', 'reason'],
      registers,
    }),
    overLimitCacheHitsTotal: new Counter({
      name: 'portico_ratelimit_over_limit_cache_hits_total',
      help: 'Checks of keys already over their limit or banned, answered from memory without a Redis round trip.',
      registers,
    }),
    batchedAdmissionsTotal: new Counter({
      name: 'portico_ratelimit_batched_admissions_total',
      help: 'Checks admitted far below their limit without waiting for Redis; their hits reach Redis in batches (docs/ratelimits.md, batched counts).',
      registers,
    }),
    batchesTotal: new Counter({
      name: 'portico_ratelimit_batches_total',
      help: 'Batches of locally admitted hits sent to Redis, by result (acknowledged; failed: not sent again, those hits are not counted).',
      labelNames: ['result'],
      registers,
    }),
    degraded: new Gauge({
      name: 'portico_ratelimit_degraded',
      help: '1 while checks are answered without Redis because it did not answer (one check at a time probes it), else 0.',
      registers,
    }),
    bansTotal: new Counter({
      name: 'portico_ratelimit_bans_total',
      help: 'Temporary bans started, by rate-limit domain.',
      labelNames: ['domain'],
      registers,
    }),
    redisConnected: new Gauge({
      name: 'portico_ratelimit_redis_connected',
      help: '1 while the server is connected to Redis, else 0.',
      registers,
    }),
    invalidRequestsTotal: new Counter({
      name: 'portico_ratelimit_invalid_requests_total',
      help: 'ShouldRateLimit requests refused with INVALID_ARGUMENT, by the bound they broke (descriptors, entries, entry_length, domain_length).',
      labelNames: ['bound'],
      registers,
    }),
    redisCommandDuration: new Histogram({
      name: 'portico_ratelimit_redis_command_duration_seconds',
      help: 'Time from sending a command to Redis to its answer or failure, seconds, by command (check: the check script; time: the clock measurement).',
      labelNames: ['command'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    redisErrorsTotal: new Counter({
      name: 'portico_ratelimit_redis_errors_total',
      help: 'Redis commands that failed, by command (check, time) and error (timeout, connection, reply, too_late).',
      labelNames: ['command', 'error'],
      registers,
    }),
    redisConnectionErrorsTotal: new Counter({
      name: 'portico_ratelimit_redis_connection_errors_total',
      help: 'Errors on the connections to Redis, by reason: auth (username or password refused), tls (TLS handshake failed: certificate not trusted, expired, of another name, or refused), sentinel (no sentinel answered or knew the primary), connection (refused, reset, closed).',
      labelNames: ['reason'],
      registers,
    }),
    redisCredentialReloadsTotal: new Counter({
      name: 'portico_ratelimit_redis_credential_reloads_total',
      help: 'Changes of the Redis credential files (--redis-password-file and the like), by result: loaded (used from the next connection on) or failed (a file that cannot be read or is empty; the previous credentials stay in use).',
      labelNames: ['result'],
      registers,
    }),
  };
  for (const reason of REDIS_CONNECTION_ERROR_KINDS) metrics.redisConnectionErrorsTotal.inc({ reason }, 0);
  for (const result of ['loaded', 'failed']) metrics.redisCredentialReloadsTotal.inc({ result }, 0);
  for (const command of REDIS_COMMANDS) {
    for (const error of REDIS_ERROR_KINDS) metrics.redisErrorsTotal.inc({ command, error }, 0);
  }
  for (const bound of REQUEST_BOUNDS) metrics.invalidRequestsTotal.inc({ bound }, 0);
  for (const result of ['acknowledged', 'failed']) metrics.batchesTotal.inc({ result }, 0);
  new Gauge<'domain'>({
    name: 'portico_ratelimit_bans_active',
    help: 'Bans this server started that have not run out, by rate-limit domain; the bans active in Redis are the sum over the servers.',
    labelNames: ['domain'],
    registers,
    collect(this: Gauge<'domain'>) {
      this.reset();
      for (const [domain, count] of bans.active(now())) this.set({ domain }, count);
    },
  });
  return metrics;
}

/** The config's metrics and Node's process metrics (standard names, `process_*` and `nodejs_*`), in `registry`. */
export function createConfigMetrics(registry: Registry = new Registry()): ConfigMetrics {
  collectDefaultMetrics({ register: registry });
  registerBuildInfo(registry, buildInfo(), process.version);
  const registers = [registry];
  const metrics: ConfigMetrics = {
    registry,
    configLoadsTotal: new Counter({
      name: 'portico_ratelimit_config_loads_total',
      help: 'Config documents read from the ConfigMap, by result (loaded, rejected).',
      labelNames: ['result'],
      registers,
    }),
    policiesRejectedTotal: new Counter({
      name: 'portico_ratelimit_policies_rejected_total',
      help: 'Policy entries the server refused while loading a config.',
      registers,
    }),
    policiesLoaded: new Gauge({
      name: 'portico_ratelimit_policies',
      help: 'Policies the server enforces now.',
      registers,
    }),
    configHash: new Gauge({
      name: 'portico_ratelimit_config_hash',
      help: 'By config shard (ConfigMap): a hash of the config document in force (the first 48 bits of its SHA-256); servers that show different values for one shard enforce different configs.',
      labelNames: ['shard'],
      registers,
    }),
    configLastLoadSuccessful: new Gauge({
      name: 'portico_ratelimit_config_last_load_successful',
      help: "By config shard: 1 when its last config document loaded, 0 when it was refused whole (the shard's previous policies stay in force).",
      labelNames: ['shard'],
      registers,
    }),
    configLastLoadSuccessTimestamp: new Gauge({
      name: 'portico_ratelimit_config_last_load_success_timestamp_seconds',
      help: 'By config shard: when a config document of it last loaded, Unix time in seconds.',
      labelNames: ['shard'],
      registers,
    }),
    loadReportWritesTotal: new Counter({
      name: 'portico_ratelimit_load_report_writes_total',
      help: "Writes of this instance's load report to the status ConfigMap, by result (written, failed); the operator sets each policy's Enforced from these reports.",
      labelNames: ['result'],
      registers,
    }),
    loadReportBytes: new Gauge({
      name: 'portico_ratelimit_load_report_bytes',
      help: "Bytes of this instance's last load report; the reports of all instances share one ConfigMap, whose data the API server caps at 1 MiB.",
      registers,
    }),
  };
  for (const result of ['loaded', 'rejected']) metrics.configLoadsTotal.inc({ result }, 0);
  for (const result of LOAD_REPORT_WRITE_RESULTS) metrics.loadReportWritesTotal.inc({ result }, 0);
  return metrics;
}

/** Every metric in one registry (one thread: tests and tools); `now` as for `createCheckMetrics`. */
export function createRateLimitMetrics(now: () => number = Date.now): RateLimitMetrics {
  const registry = new Registry();
  return { ...createConfigMetrics(registry), ...createCheckMetrics(registry, now) };
}
