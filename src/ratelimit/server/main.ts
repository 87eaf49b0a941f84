/**
 * `portico ratelimit-server`: the rate-limit service the gateway calls (docs/architecture.md, "The
 * two processes"; docs/ratelimits.md, "`portico ratelimit-server`"). Wires the config watch, the
 * load reports and the observability server in the main thread, and what answers checks (gRPC
 * listener, Redis; `checks.ts`) in a thread of its own on Node or in the main thread on Bun
 * (`check-thread.ts`, `checksPlacement`), and shuts down cleanly on SIGTERM/SIGINT: stop taking
 * calls and finish those in flight, remove this instance's report, close Redis. If the check thread
 * ends on its own the process exits with 1 (the pod restarts).
 *
 * A policy snapshot is reported as loaded only once the checks enforce it.
 *
 * `/readyz` turns 200 once the gRPC listener is bound and the config watch has listed; it does not
 * follow Redis, since the failure mode (not the load balancer) decides what happens when Redis is down.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../kube/kubeconfig.js';
import type { Logger } from 'pino';
import { createObservabilityServer } from '../../observability/http-server.js';
import { ConfigState } from '../config-state.js';
import { ConfigWatcher } from '../config-watcher.js';
import { isRateLimitError } from '../errors.js';
import { createConfigMetrics } from '../metrics.js';
import { StatusReporter } from '../status-reporter.js';
import { checksPlacement, JoinedRegistry, startChecksIn } from './check-thread.js';
import { parseRateLimitServerConfig, rateLimitServerUsage, type RateLimitServerConfig } from './config.js';
import { createServerLogger } from './logger.js';

async function listen(server: Server, address: string): Promise<void> {
  const at = address.lastIndexOf(':');
  server.listen(Number(address.slice(at + 1)), address.slice(0, at) || '0.0.0.0');
  await once(server, 'listening');
}

/** A running server; `stop` shuts it down. */
export interface RunningRateLimitServer {
  readonly grpcPort: number;
  /** Rejects if the check thread ends on its own; resolves after `stop`. */
  readonly checkThreadExited: Promise<void>;
  stop(): Promise<void>;
}

/** Starts every part of the server from `config`. */
export async function startRateLimitServer(
  config: RateLimitServerConfig,
  log: Logger,
): Promise<RunningRateLimitServer> {
  const placement = checksPlacement();
  const checks = await startChecksIn(placement, {
    grpcListenAddress: config.grpcListenAddress,
    connection: config.grpcConnection,
    tls: config.grpcTls,
    redis: config.redis,
    redisTimeoutMs: config.redisTimeoutMs,
    failureMode: config.failureMode,
    shadowMode: config.shadowMode,
    batchMaxHits: config.batchMaxHits,
    gatewayDomain: config.gatewayDomain,
    logLevel: config.logLevel,
  });
  log.info(
    {
      address: config.grpcListenAddress,
      port: checks.grpcPort,
      checks: placement,
      tls: config.grpcTls === undefined ? 'off' : config.grpcTls.clientCaFile === undefined ? 'tls' : 'mtls',
    },
    'gRPC listening',
  );
  const metrics = createConfigMetrics(new JoinedRegistry(() => checks.metrics()));
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const state = new ConfigState(metrics, log);
  const reporter = new StatusReporter({
    objects: KubernetesObjectApi.makeApiClient(kubeConfig),
    namespace: config.configNamespace,
    name: config.statusName,
    instance: config.instance,
    heartbeatMs: config.heartbeatIntervalMs,
    log,
    onWrite: (result, bytes) => {
      metrics.loadReportWritesTotal.inc({ result });
      metrics.loadReportBytes.set(bytes);
    },
  });
  const enforce = (report: ReturnType<ConfigState['load']>): void => {
    checks.setPolicies(state.snapshot).then(
      () => {
        reporter.publish(report);
      },
      (err: unknown) => {
        log.error({ err }, 'the check thread did not take the new policies');
      },
    );
  };
  const watcher = new ConfigWatcher({
    kubeConfig,
    namespace: config.configNamespace,
    configName: config.configName,
    onConfig: (name, index, text, resourceVersion) => {
      enforce(state.load(name, index, text, resourceVersion));
    },
    onDelete: (name) => {
      enforce(state.remove(name));
    },
    log,
  });
  const observability = createObservabilityServer(metrics.registry, () => watcher.synced);
  await listen(observability, config.metricsListenAddress);
  log.info({ address: config.metricsListenAddress }, 'metrics and health server listening');
  watcher.start();
  reporter.publish(state.report);
  reporter.start();
  return {
    grpcPort: checks.grpcPort,
    checkThreadExited: checks.exited,
    stop: async () => {
      await checks.stop(5_000);
      await watcher.stop();
      await reporter.stop();
      await kubeConfig.close();
      observability.close();
      observability.closeAllConnections();
    },
  };
}

/** How the server reaches Redis, for its start-up log line (no password). */
function describeRedis(redis: RateLimitServerConfig['redis']): Record<string, unknown> {
  const t = redis.topology;
  const where =
    t.kind === 'standalone'
      ? { address: `${t.host}:${t.port}`, db: t.db }
      : t.kind === 'cluster'
        ? { seeds: t.seeds.map((s) => `${s.host}:${s.port}`) }
        : {
            sentinels: t.sentinels.map((s) => `${s.host}:${s.port}`),
            masterName: t.masterName,
            sentinelTls: t.sentinelTls,
          };
  return {
    topology: t.kind,
    ...where,
    tls: redis.tls,
    clientCertificate: redis.tlsFiles.certFile !== undefined,
    username: redis.username,
    password: redis.password !== undefined,
  };
}

/**
 * Runs until SIGTERM or SIGINT. Returns the exit code: 0 after a clean stop, 1 if the check thread
 * ended on its own, 2 for bad configuration. With `--check-config`, returns 0 once the configuration
 * is read and checked (the credential files read, the TLS files readable), without starting.
 */
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
  if (parsed.checkConfig) {
    process.stdout.write(
      'portico ratelimit-server: the configuration is valid (--check-config: not started)\n',
    );
    return 0;
  }
  const log = createServerLogger(parsed.logLevel);
  const server = await startRateLimitServer(parsed, log);
  log.info(
    {
      failureMode: parsed.failureMode,
      shadowMode: parsed.shadowMode,
      batchMaxHits: parsed.batchMaxHits,
      gatewayDomain: parsed.gatewayDomain,
      config: `${parsed.configNamespace}/${parsed.configName}`,
      instance: parsed.instance,
      redis: describeRedis(parsed.redis),
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
    server.checkThreadExited.catch((err: unknown) => {
      log.fatal({ err }, 'the thread that answers checks ended');
      resolve('');
    });
  });
  if (signal === '') {
    await server.stop().catch(() => undefined);
    return 1;
  }
  log.info({ signal }, 'shutting down');
  await server.stop();
  log.info('stopped');
  return 0;
}
