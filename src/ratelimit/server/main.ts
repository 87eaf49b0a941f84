/**
 * `portico ratelimit-server`: the rate-limit service the gateway calls (DESIGN.md, "Components").
 * Wires the config watch, the load reports, Redis, the gRPC listener and the observability server,
 * and shuts down cleanly on SIGTERM/SIGINT: stop taking calls and finish those in flight, remove this
 * instance's report, close Redis.
 *
 * `/readyz` turns 200 once the gRPC listener is bound and the config watch has listed; it does not
 * follow Redis, since the failure mode (not the load balancer) decides what happens when Redis is down.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { CoreV1Api, KubernetesObjectApi } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../kube/kubeconfig.js';
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { createObservabilityServer } from '../../observability/http-server.js';
import { ConfigState } from '../config-state.js';
import { ConfigWatcher } from '../config-watcher.js';
import { isRateLimitError } from '../errors.js';
import { bindServer, createRateLimitGrpcServer, shutdownServer } from '../grpc.js';
import { createRateLimitMetrics, type RateLimitMetrics } from '../metrics.js';
import { RedisCounterStore } from '../redis-store.js';
import { RateLimitService } from '../service.js';
import { StatusReporter } from '../status-reporter.js';
import { parseRateLimitServerConfig, rateLimitServerUsage, type RateLimitServerConfig } from './config.js';

function createServerLogger(level: LevelWithSilent): Logger {
  return pino({
    level,
    base: { component: 'portico-ratelimit-server' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

async function listen(server: Server, address: string): Promise<void> {
  const at = address.lastIndexOf(':');
  server.listen(Number(address.slice(at + 1)), address.slice(0, at) || '0.0.0.0');
  await once(server, 'listening');
}

function createStore(
  config: RateLimitServerConfig,
  metrics: RateLimitMetrics,
  log: Logger,
): RedisCounterStore {
  return new RedisCounterStore({
    url: config.redisUrl,
    cluster: config.redisCluster,
    commandTimeoutMs: config.redisTimeoutMs,
    onStateChange: (state, err) => {
      metrics.redisConnected.set(state === 'ready' ? 1 : 0);
      if (state === 'ready') log.info({ cluster: config.redisCluster }, 'connected to Redis');
      else log.error({ err: err?.message, failureMode: config.failureMode }, 'lost the connection to Redis');
    },
  });
}

/** A running server; `stop` shuts it down. */
export interface RunningRateLimitServer {
  readonly grpcPort: number;
  stop(): Promise<void>;
}

/** Starts every part of the server from `config`. */
export async function startRateLimitServer(
  config: RateLimitServerConfig,
  log: Logger,
): Promise<RunningRateLimitServer> {
  const metrics = createRateLimitMetrics();
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const state = new ConfigState(metrics, log);
  const reporter = new StatusReporter({
    objects: KubernetesObjectApi.makeApiClient(kubeConfig),
    namespace: config.configNamespace,
    name: config.statusName,
    instance: config.instance,
    log,
  });
  const watcher = new ConfigWatcher({
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    namespace: config.configNamespace,
    name: config.configName,
    onConfig: (text, resourceVersion) => {
      reporter.publish(state.load(text, resourceVersion));
    },
    log,
  });
  const store = createStore(config, metrics, log);
  const service = new RateLimitService({
    policies: () => state.snapshot,
    store,
    failureMode: config.failureMode,
    now: () => Date.now(),
    metrics,
    log,
  });
  const grpc = createRateLimitGrpcServer((request) => service.shouldRateLimit(request), log);
  const grpcPort = await bindServer(grpc, config.grpcListenAddress);
  log.info({ address: config.grpcListenAddress, port: grpcPort }, 'gRPC listening');
  const observability = createObservabilityServer(metrics.registry, () => watcher.synced);
  await listen(observability, config.metricsListenAddress);
  log.info({ address: config.metricsListenAddress }, 'metrics and health server listening');
  watcher.start();
  reporter.publish(state.report);
  reporter.start();
  return {
    grpcPort,
    stop: async () => {
      await shutdownServer(grpc, 5_000);
      await watcher.stop();
      await reporter.stop();
      await store.close();
      await kubeConfig.close();
      observability.close();
      observability.closeAllConnections();
    },
  };
}

/** Runs until SIGTERM or SIGINT. Returns the exit code: 0 after a clean stop, 2 for bad configuration. */
export async function runRateLimitServer(args: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseRateLimitServerConfig>;
  try {
    parsed = parseRateLimitServerConfig(args);
  } catch (err) {
    if (isRateLimitError(err) || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(
        `portico ratelimit-server: ${(err as Error).message}\n\n${rateLimitServerUsage()}`,
      );
      return 2;
    }
    throw err;
  }
  if ('help' in parsed) {
    process.stdout.write(rateLimitServerUsage());
    return 0;
  }
  const log = createServerLogger(parsed.logLevel);
  const server = await startRateLimitServer(parsed, log);
  log.info(
    {
      failureMode: parsed.failureMode,
      config: `${parsed.configNamespace}/${parsed.configName}`,
      instance: parsed.instance,
    },
    'rate-limit server started',
  );
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => {
      resolve('SIGTERM');
    });
    process.once('SIGINT', () => {
      resolve('SIGINT');
    });
  });
  log.info({ signal }, 'shutting down');
  await server.stop();
  log.info('stopped');
  return 0;
}
