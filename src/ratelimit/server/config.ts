/**
 * Configuration of `portico ratelimit-server`, from flags with environment fallbacks
 * (`--redis-url` or `PORTICO_RATELIMIT_REDIS_URL`, and so on). The flag names are a fixed interface:
 * the Helm chart sets them. Every value is checked here so a bad setting stops the process at start.
 */
import { accessSync, constants } from 'node:fs';
import { hostname } from 'node:os';
import type { LevelWithSilent } from 'pino';
import { flagUsage, readFlags, type FlagSpec } from '../../command-flags.js';
import {
  DEFAULT_GATEWAY_DOMAIN,
  DEFAULT_RATELIMIT_CONFIG_NAME,
  DEFAULT_RATELIMIT_STATUS_NAME,
} from '../../api/ratelimitpolicy.js';
import { gatewayDomainProblem } from '../gateway-domain.js';
import {
  DEFAULT_CONNECTION_SETTINGS,
  type GrpcConnectionSettings,
  type GrpcTlsFiles,
} from '../grpc-settings.js';
import { ServerConfigError } from '../errors.js';
import { HEARTBEAT_INTERVAL_MS, MAX_HEARTBEAT_INTERVAL_SECONDS } from '../load-report.js';
import { FAILURE_MODES, type FailureMode } from '../service.js';

export interface RateLimitServerConfig {
  /** `host:port` of the gRPC listener. */
  grpcListenAddress: string;
  /** TLS of the gRPC listener (mTLS with a client CA); undefined: plaintext. */
  grpcTls: GrpcTlsFiles | undefined;
  /** Keepalive and maximum connection age of gRPC connections. */
  grpcConnection: GrpcConnectionSettings;
  /** `redis://host:port` (or `rediss://`, with credentials); a seed node with `redisCluster`. */
  redisUrl: string;
  redisCluster: boolean;
  /** Milliseconds a Redis command may take before the failure mode answers. */
  redisTimeoutMs: number;
  /**
   * What answers a check Redis cannot: `local` (this replica's own counts), `allow` (OK, with the
   * local counts' headers) or `deny` (OVER_LIMIT); service.ts.
   */
  failureMode: FailureMode;
  /** Answer every check OK while deciding and counting as ever (service.ts, shadow mode). */
  shadowMode: boolean;
  /**
   * The one domain a gateway sends for every policy (Contour's `rateLimitService.domain`): a check with
   * it names its policy in each descriptor's first entry, `portico.dev/policy` (gateway-domain.ts).
   */
  gatewayDomain: string;
  configNamespace: string;
  /** The first config ConfigMap (shard 0); the others are `<configName>-<n>`. */
  configName: string;
  statusName: string;
  /** Milliseconds between rewrites of this server's load report when nothing changed. */
  heartbeatIntervalMs: number;
  /** This replica's name in the status ConfigMap (the pod name in a cluster). */
  instance: string;
  kubeconfig: string | undefined;
  /** `host:port` of /metrics, /healthz, /readyz. */
  metricsListenAddress: string;
  logLevel: LevelWithSilent;
}

const options = {
  'grpc-listen-address': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_LISTEN_ADDRESS'],
    default: '0.0.0.0:8081',
    help: 'gRPC listener (envoy.service.ratelimit.v3.RateLimitService)',
  },
  'grpc-tls-cert-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_TLS_CERT_FILE'],
    help: 'PEM certificate (chain) of the gRPC listener; with --grpc-tls-key-file, TLS instead of plaintext',
  },
  'grpc-tls-key-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_TLS_KEY_FILE'],
    help: 'PEM private key of --grpc-tls-cert-file',
  },
  'grpc-tls-client-ca-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_TLS_CLIENT_CA_FILE'],
    help: 'PEM CA bundle: mTLS, a client must present a certificate it signed',
  },
  'grpc-tls-refresh-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_TLS_REFRESH_SECONDS'],
    default: '60',
    help: 'seconds between reads of the TLS files (a rotated certificate is served without a restart)',
  },
  'grpc-keepalive-time-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_KEEPALIVE_TIME_SECONDS'],
    default: String(DEFAULT_CONNECTION_SETTINGS.keepaliveTimeMs / 1000),
    help: 'ping a gRPC connection idle this long; close it if the ping is not answered within --grpc-keepalive-timeout-seconds',
  },
  'grpc-keepalive-timeout-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_KEEPALIVE_TIMEOUT_SECONDS'],
    default: String(DEFAULT_CONNECTION_SETTINGS.keepaliveTimeoutMs / 1000),
    help: 'seconds a keepalive ping may go unanswered',
  },
  'grpc-max-connection-age-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_MAX_CONNECTION_AGE_SECONDS'],
    default: String(DEFAULT_CONNECTION_SETTINGS.maxConnectionAgeMs / 1000),
    help: 'GOAWAY a gRPC connection this old (plus up to 10% jitter), so clients reconnect and new replicas get load',
  },
  'grpc-max-connection-age-grace-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GRPC_MAX_CONNECTION_AGE_GRACE_SECONDS'],
    default: String(DEFAULT_CONNECTION_SETTINGS.maxConnectionAgeGraceMs / 1000),
    help: 'seconds calls in flight get after that GOAWAY',
  },
  'redis-url': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_URL'],
    help: 'required: redis://host:port of the counters',
  },
  'redis-cluster': {
    type: 'boolean',
    env: ['PORTICO_RATELIMIT_REDIS_CLUSTER'],
    help: 'Redis is a Redis Cluster (redis-url is a seed node)',
  },
  'redis-timeout-ms': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TIMEOUT_MS'],
    default: '500',
    help: 'ms a Redis command may take before the failure mode answers',
  },
  'failure-mode': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_FAILURE_MODE'],
    default: 'local',
    help: "answer when Redis is down: local (decide on this replica's own counts), allow (always OK, headers from local counts) or deny (OVER_LIMIT)",
  },
  'shadow-mode': {
    type: 'boolean',
    env: ['PORTICO_RATELIMIT_SHADOW_MODE'],
    help: 'decide and count as ever, but answer every check OK (headers still sent); portico_ratelimit_shadow_refusals_total counts what would have been refused',
  },
  'gateway-domain': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_GATEWAY_DOMAIN'],
    default: DEFAULT_GATEWAY_DOMAIN,
    help: "the domain a gateway sends for every policy (Contour's rateLimitService.domain); its checks name the policy in the descriptor entry portico.dev/policy",
  },
  'config-namespace': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_CONFIG_NAMESPACE'],
    default: 'portico-system',
    help: 'namespace of the config and status ConfigMaps',
  },
  'config-name': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_CONFIG_NAME'],
    default: DEFAULT_RATELIMIT_CONFIG_NAME,
    help: 'the config ConfigMaps the operator writes (key config.json): this name and <name>-<n>',
  },
  'status-name': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_STATUS_NAME'],
    default: DEFAULT_RATELIMIT_STATUS_NAME,
    help: 'ConfigMap this server reports the loaded generations in',
  },
  'heartbeat-interval-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_HEARTBEAT_INTERVAL_SECONDS'],
    default: String(HEARTBEAT_INTERVAL_MS / 1000),
    help: 'seconds between rewrites of the load report; the operator counts it gone after three',
  },
  instance: {
    type: 'string',
    env: ['PORTICO_RATELIMIT_INSTANCE', 'POD_NAME'],
    help: "this replica's name in the status ConfigMap (default: the host name)",
  },
  kubeconfig: {
    type: 'string',
    env: ['PORTICO_RATELIMIT_KUBECONFIG', 'KUBECONFIG'],
    help: 'kubeconfig path (default: in-cluster)',
  },
  'metrics-listen-address': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_METRICS_LISTEN_ADDRESS'],
    default: '0.0.0.0:8082',
    help: '/metrics, /healthz, /readyz',
  },
  'log-level': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_LOG_LEVEL'],
    default: 'info',
    help: 'trace|debug|info|warn|error',
  },
  help: { type: 'boolean', env: [], help: 'show this help' },
} as const satisfies Record<string, FlagSpec>;

type OptionName = keyof typeof options;

/** The flag reference printed by `portico ratelimit-server --help`. */
export function rateLimitServerUsage(): string {
  return flagUsage('portico ratelimit-server', options);
}

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);
const TRUE = new Set(['1', 'true', 'yes']);

function checkHostPort(name: OptionName, value: string): string {
  const at = value.lastIndexOf(':');
  const port = Number(value.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ServerConfigError(`--${name} must be host:port, got "${value}"`);
  }
  return value;
}

/** A whole number of seconds from `min` to `max`, in milliseconds. */
function seconds(name: OptionName, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ServerConfigError(
      `--${name} must be a whole number of seconds from ${min} to ${max}, got "${value}"`,
    );
  }
  return n * 1000;
}

/**
 * The TLS files: none (plaintext), or a certificate and a key, and optionally a client CA (mTLS).
 *
 * @throws ServerConfigError for one of certificate and key without the other, a client CA without
 *   them, or a file that cannot be read
 */
function tlsFiles(
  get: (name: OptionName) => string | undefined,
  refreshMs: number,
): GrpcTlsFiles | undefined {
  const certFile = get('grpc-tls-cert-file');
  const keyFile = get('grpc-tls-key-file');
  const clientCaFile = get('grpc-tls-client-ca-file');
  if (certFile === undefined && keyFile === undefined) {
    if (clientCaFile !== undefined) {
      throw new ServerConfigError(
        '--grpc-tls-client-ca-file needs --grpc-tls-cert-file and --grpc-tls-key-file (mTLS is TLS with client certificates)',
      );
    }
    return undefined;
  }
  if (certFile === undefined || keyFile === undefined) {
    throw new ServerConfigError(
      '--grpc-tls-cert-file and --grpc-tls-key-file go together: set both or neither',
    );
  }
  for (const [flag, file] of [
    ['grpc-tls-cert-file', certFile],
    ['grpc-tls-key-file', keyFile],
    ['grpc-tls-client-ca-file', clientCaFile],
  ] as const) {
    if (file === undefined) continue;
    try {
      accessSync(file, constants.R_OK);
    } catch (err) {
      throw new ServerConfigError(`--${flag} "${file}" cannot be read: ${(err as Error).message}`);
    }
  }
  return { certFile, keyFile, clientCaFile, refreshMs };
}

function checkRedisUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ServerConfigError(`--redis-url must be a URL such as redis://127.0.0.1:6379, got "${value}"`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new ServerConfigError(`--redis-url must start with redis:// or rediss://, got "${value}"`);
  }
  return value;
}

function connectionSettings(required: (name: OptionName) => string): GrpcConnectionSettings {
  return {
    keepaliveTimeMs: seconds('grpc-keepalive-time-seconds', required('grpc-keepalive-time-seconds'), 1, 7200),
    keepaliveTimeoutMs: seconds(
      'grpc-keepalive-timeout-seconds',
      required('grpc-keepalive-timeout-seconds'),
      1,
      600,
    ),
    maxConnectionAgeMs: seconds(
      'grpc-max-connection-age-seconds',
      required('grpc-max-connection-age-seconds'),
      1,
      86_400,
    ),
    maxConnectionAgeGraceMs: seconds(
      'grpc-max-connection-age-grace-seconds',
      required('grpc-max-connection-age-grace-seconds'),
      1,
      600,
    ),
  };
}

/**
 * Reads the configuration. Returns `{help: true}` for `--help`.
 *
 * @throws ServerConfigError for a missing required setting or a bad value (the message names the flag)
 */
export function parseRateLimitServerConfig(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): RateLimitServerConfig | { help: true } {
  const flags = readFlags(options, args, env, (message) => new ServerConfigError(message));
  if ('help' in flags) return flags;
  const { get, required } = flags;
  const failureMode = required('failure-mode');
  if (!(FAILURE_MODES as readonly string[]).includes(failureMode)) {
    throw new ServerConfigError(
      `--failure-mode must be one of ${FAILURE_MODES.join(', ')}, got "${failureMode}"`,
    );
  }
  const logLevel = required('log-level');
  if (!LEVELS.has(logLevel))
    throw new ServerConfigError(`--log-level must be one of ${[...LEVELS].join(', ')}`);
  const timeout = Number(required('redis-timeout-ms'));
  if (!Number.isInteger(timeout) || timeout <= 0) {
    throw new ServerConfigError(`--redis-timeout-ms must be a positive integer (milliseconds)`);
  }
  const heartbeat = Number(required('heartbeat-interval-seconds'));
  if (!Number.isInteger(heartbeat) || heartbeat < 1 || heartbeat > MAX_HEARTBEAT_INTERVAL_SECONDS) {
    throw new ServerConfigError(
      `--heartbeat-interval-seconds must be an integer from 1 to ${MAX_HEARTBEAT_INTERVAL_SECONDS} (seconds)`,
    );
  }
  const gatewayDomain = required('gateway-domain');
  const gatewayProblem = gatewayDomainProblem(gatewayDomain);
  if (gatewayProblem !== undefined) {
    throw new ServerConfigError(`--gateway-domain ${gatewayProblem}`);
  }
  const refreshMs = seconds('grpc-tls-refresh-seconds', required('grpc-tls-refresh-seconds'), 1, 3600);
  return {
    grpcListenAddress: checkHostPort('grpc-listen-address', required('grpc-listen-address')),
    grpcTls: tlsFiles(get, refreshMs),
    grpcConnection: connectionSettings(required),
    redisUrl: checkRedisUrl(required('redis-url')),
    redisCluster: TRUE.has((get('redis-cluster') ?? '').toLowerCase()),
    redisTimeoutMs: timeout,
    failureMode: failureMode as FailureMode,
    shadowMode: TRUE.has((get('shadow-mode') ?? '').toLowerCase()),
    gatewayDomain,
    configNamespace: required('config-namespace'),
    configName: required('config-name'),
    statusName: required('status-name'),
    heartbeatIntervalMs: heartbeat * 1000,
    instance: get('instance') ?? hostname(),
    kubeconfig: get('kubeconfig'),
    metricsListenAddress: checkHostPort('metrics-listen-address', required('metrics-listen-address')),
    logLevel: logLevel as LevelWithSilent,
  };
}
