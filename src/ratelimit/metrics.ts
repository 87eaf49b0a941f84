/**
 * Prometheus metrics of `portico ratelimit-server` (prom-client), served at `/metrics`.
 * Names follow Prometheus conventions: `_total` counters, `_seconds` durations, base units.
 *
 * Two groups, each in a registry of its own: the checks' metrics live in the thread that answers
 * checks (`server/check-worker.ts`), the config's and Node's process metrics in the main thread; the
 * `/metrics` page joins both (`server/check-thread.ts`).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What the checks record. */
export interface CheckMetrics {
  readonly registry: Registry;
  /** Descriptors checked, by domain, answer code and reason. */
  readonly checksTotal: Counter<'domain' | 'code' | 'reason'>;
  /** Time from receiving a check to answering it. */
  readonly checkDuration: Histogram;
  /** Checks Redis could not answer, answered by the failure mode instead. */
  readonly storeFailuresTotal: Counter<'failure_mode'>;
  /** Bans started. */
  readonly bansTotal: Counter<'domain'>;
  /** 1 while connected to Redis. */
  readonly redisConnected: Gauge;
  /** Requests refused with INVALID_ARGUMENT, by the bound they broke (`request-limits.ts`). */
  readonly invalidRequestsTotal: Counter<'bound'>;
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
}

export type RateLimitMetrics = CheckMetrics & ConfigMetrics;

/** The checks' metrics, in `registry`. */
export function createCheckMetrics(registry: Registry = new Registry()): CheckMetrics {
  const registers = [registry];
  return {
    registry,
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
      help: 'Checks Redis could not answer; answered by the failure mode (allow or deny).',
      labelNames: ['failure_mode'],
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
  };
}

/** The config's metrics and Node's process metrics (standard names, `process_*` and `nodejs_*`), in `registry`. */
export function createConfigMetrics(registry: Registry = new Registry()): ConfigMetrics {
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
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
  };
}

/** Every metric in one registry (one thread: tests and tools). */
export function createRateLimitMetrics(): RateLimitMetrics {
  const registry = new Registry();
  return { ...createConfigMetrics(registry), ...createCheckMetrics(registry) };
}
