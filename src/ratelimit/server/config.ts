/**
 * Configuration of `portico ratelimit-server`, from flags with environment fallbacks
 * (`--redis-url` or `PORTICO_RATELIMIT_REDIS_URL`, and so on). The flag names are a fixed interface:
 * the Helm chart sets them. Every value is checked here so a bad setting stops the process at start.
 */
import { accessSync, constants } from 'node:fs';
import { hostname } from 'node:os';
import type { LevelWithSilent } from 'pino';
import { flagUsage, readFlags } from '../../command-flags.js';
import { rateLimitServerOptions, type OptionName } from './config-flags.js';
import { gatewayDomainProblem } from '../gateway-domain.js';
import type { GrpcConnectionSettings, GrpcTlsFiles } from '../grpc-settings.js';
import { ServerConfigError } from '../errors.js';
import type { HostPort, RedisConnectionSettings, RedisTlsFiles, RedisTopology } from '../redis-connection.js';
import { MAX_HEARTBEAT_INTERVAL_SECONDS } from '../load-report.js';
import { FAILURE_MODES, type FailureMode } from '../service.js';
import {
  CredentialFileError,
  readCredentialFilesSync,
  type RedisCredentialFiles,
  type RedisCredentialName,
  type RedisCredentials,
} from '../redis-credentials.js';

export interface RateLimitServerConfig {
  /** `host:port` of the gRPC listener. */
  grpcListenAddress: string;
  /** TLS of the gRPC listener (mTLS with a client CA); undefined: plaintext. */
  grpcTls: GrpcTlsFiles | undefined;
  /** Keepalive and maximum connection age of gRPC connections. */
  grpcConnection: GrpcConnectionSettings;
  /** One Redis server, a Redis Cluster or Sentinel; TLS and credentials (redis-connection.ts). */
  redis: RedisConnectionSettings;
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
   * The largest batch of one key's hits admitted without waiting for Redis (batched-counts.ts,
   * `maxBatchHits`); 0: every check is exact.
   */
  batchMaxHits: number;
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
  /** `--check-config`: check this configuration and exit instead of starting. */
  checkConfig: boolean;
}

/** The flag reference printed by `portico ratelimit-server --help`. */
export function rateLimitServerUsage(): string {
  return flagUsage('portico ratelimit-server', rateLimitServerOptions);
}

/** The largest `--batch-max-hits`: the overshoot bound grows with it (docs/ratelimits.md). */
export const MAX_BATCH_HITS = 10_000;

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);
const TRUE = new Set(['1', 'true', 'yes']);

function isTrue(value: string | undefined): boolean {
  return TRUE.has((value ?? '').toLowerCase());
}

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

/**
 * A comma-separated list of `host:port`.
 *
 * @throws ServerConfigError naming the flag for an empty list or an entry that is not host:port
 */
export function hostPortList(name: OptionName, value: string): HostPort[] {
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) throw new ServerConfigError(`--${name} must list host:port, got "${value}"`);
  return entries.map((entry) => {
    const at = entry.lastIndexOf(':');
    const host = entry.slice(0, at).replace(/^\[(.*)\]$/, '$1');
    const port = Number(entry.slice(at + 1));
    if (at <= 0 || host === '' || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw new ServerConfigError(`--${name} must list host:port, got "${entry}"`);
    }
    return { host, port };
  });
}

interface ParsedRedisUrl {
  readonly host: string;
  readonly port: number;
  readonly db: number;
  readonly tls: boolean;
  readonly username: string | undefined;
  readonly password: string | undefined;
}

function database(name: OptionName, value: string): number {
  const db = Number(value);
  if (value === '' || !Number.isInteger(db) || db < 0) {
    throw new ServerConfigError(`--${name} must name a database by its number (0, 1, ...), got "${value}"`);
  }
  return db;
}

function parseRedisUrl(value: string): ParsedRedisUrl {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ServerConfigError(`--redis-url must be a URL such as redis://127.0.0.1:6379, got "${value}"`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new ServerConfigError(`--redis-url must start with redis:// or rediss://, got "${value}"`);
  }
  const path = url.pathname.replace(/^\//, '');
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? 6379 : Number(url.port),
    db: path === '' ? 0 : database('redis-url', path),
    tls: url.protocol === 'rediss:',
    username: url.username === '' ? undefined : decodeURIComponent(url.username),
    password: url.password === '' ? undefined : decodeURIComponent(url.password),
  };
}

function readable(flag: OptionName, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    accessSync(file, constants.R_OK);
  } catch (err) {
    throw new ServerConfigError(`--${flag} "${file}" cannot be read: ${(err as Error).message}`);
  }
  return file;
}

/** @param anyTls whether a connection uses TLS; the TLS files without it are refused */
function redisTlsFiles(get: (name: OptionName) => string | undefined, anyTls: boolean): RedisTlsFiles {
  const refreshMs = seconds('redis-tls-refresh-seconds', get('redis-tls-refresh-seconds') ?? '60', 1, 3600);
  const tlsOnly = firstSet(get, ['redis-tls-ca-file', 'redis-tls-cert-file', 'redis-tls-server-name']);
  if (!anyTls && tlsOnly !== undefined) {
    throw new ServerConfigError(
      `--${tlsOnly} needs TLS: a rediss:// URL, --redis-tls or --redis-sentinel-tls`,
    );
  }
  const certFile = readable('redis-tls-cert-file', get('redis-tls-cert-file'));
  const keyFile = readable('redis-tls-key-file', get('redis-tls-key-file'));
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new ServerConfigError(
      '--redis-tls-cert-file and --redis-tls-key-file go together: set both or neither',
    );
  }
  return {
    caFile: readable('redis-tls-ca-file', get('redis-tls-ca-file')),
    certFile,
    keyFile,
    serverName: get('redis-tls-server-name'),
    refreshMs,
  };
}

function sentinelTopology(get: (name: OptionName) => string | undefined, sentinels: string): RedisTopology {
  if (isTrue(get('redis-cluster'))) {
    throw new ServerConfigError('--redis-cluster and --redis-sentinels: a Redis Cluster has no sentinels');
  }
  const masterName = get('redis-sentinel-master-name');
  if (masterName === undefined) {
    throw new ServerConfigError(
      '--redis-sentinels needs --redis-sentinel-master-name: the name the sentinels monitor the primary under',
    );
  }
  const db = get('redis-db');
  return {
    kind: 'sentinel',
    sentinels: hostPortList('redis-sentinels', sentinels),
    masterName,
    db: db === undefined ? 0 : database('redis-db', db),
    sentinelTls: isTrue(get('redis-sentinel-tls')),
    sentinelUsername: get('redis-sentinel-username'),
    sentinelPassword: get('redis-sentinel-password'),
  };
}

/** The first of these flags that is set, if any. */
function firstSet(
  get: (name: OptionName) => string | undefined,
  names: readonly OptionName[],
): OptionName | undefined {
  return names.find((n) => get(n) !== undefined);
}

/**
 * The Redis connection: `--redis-url` (one server, or a cluster's seed with `--redis-cluster`) or
 * `--redis-sentinels`; TLS from a rediss:// URL or `--redis-tls`; credentials from the URL, the
 * flags winning.
 *
 * @throws ServerConfigError for both or neither of --redis-url and --redis-sentinels, flags of one
 *   topology given with another, TLS files without TLS, or a file that cannot be read
 */
export function redisConnectionSettings(
  get: (name: OptionName) => string | undefined,
): RedisConnectionSettings {
  const urlValue = get('redis-url');
  const sentinels = get('redis-sentinels');
  if ((urlValue === undefined) === (sentinels === undefined)) {
    throw new ServerConfigError(
      urlValue === undefined
        ? "--redis-url (or $PORTICO_RATELIMIT_REDIS_URL) is required: the counters' Redis, or --redis-sentinels for Redis Sentinel"
        : '--redis-url and --redis-sentinels name Redis in two ways: set one',
    );
  }
  const url = urlValue === undefined ? undefined : parseRedisUrl(urlValue);
  const topology = url === undefined ? sentinelTopology(get, sentinels ?? '') : urlTopology(get, url);
  const tls = url?.tls === true || isTrue(get('redis-tls'));
  return withCredentialFiles(get, {
    topology,
    tls,
    tlsFiles: redisTlsFiles(get, tls || (topology.kind === 'sentinel' && topology.sentinelTls)),
    username: get('redis-username') ?? url?.username,
    password: get('redis-password') ?? url?.password,
  });
}

/** `settings` with the credentials of the files that are set, which win, and the files. */
function withCredentialFiles(
  get: (name: OptionName) => string | undefined,
  settings: RedisConnectionSettings,
): RedisConnectionSettings {
  const { topology } = settings;
  const files = credentialFiles(get, topology);
  if (files === undefined) return settings;
  const read = readCredentialsAtStart(files);
  return {
    ...settings,
    topology:
      topology.kind === 'sentinel' && read.sentinelPassword !== undefined
        ? { ...topology, sentinelPassword: read.sentinelPassword }
        : topology,
    username: read.username ?? settings.username,
    password: read.password ?? settings.password,
    credentialFiles: files,
  };
}

const CREDENTIAL_FLAGS: Record<RedisCredentialName, OptionName> = {
  username: 'redis-username-file',
  password: 'redis-password-file',
  sentinelPassword: 'redis-sentinel-password-file',
};

/** @throws ServerConfigError naming the flag of a file that cannot be read or is empty */
function readCredentialsAtStart(files: RedisCredentialFiles): RedisCredentials {
  try {
    return readCredentialFilesSync(files);
  } catch (err) {
    if (!(err instanceof CredentialFileError)) throw err;
    throw new ServerConfigError(
      `--${CREDENTIAL_FLAGS[err.credential]} "${err.file}" cannot be used: ${err.reason}`,
    );
  }
}

/**
 * `--redis-username-file`, `--redis-password-file`, `--redis-sentinel-password-file`; undefined when
 * none is set.
 *
 * @throws ServerConfigError for a file flag given with its value flag, or the sentinels' password
 *   file without --redis-sentinels
 */
function credentialFiles(
  get: (name: OptionName) => string | undefined,
  topology: RedisTopology,
): RedisCredentialFiles | undefined {
  const pairs = [
    ['redis-username-file', 'redis-username'],
    ['redis-password-file', 'redis-password'],
    ['redis-sentinel-password-file', 'redis-sentinel-password'],
  ] as const;
  for (const [file, value] of pairs) {
    if (get(file) !== undefined && get(value) !== undefined) {
      throw new ServerConfigError(`--${file} and --${value} name the same credential: set one`);
    }
  }
  const sentinelPasswordFile = get('redis-sentinel-password-file');
  if (sentinelPasswordFile !== undefined && topology.kind !== 'sentinel') {
    throw new ServerConfigError('--redis-sentinel-password-file needs --redis-sentinels');
  }
  const files: RedisCredentialFiles = {
    usernameFile: get('redis-username-file'),
    passwordFile: get('redis-password-file'),
    sentinelPasswordFile,
  };
  return Object.values(files).every((f) => f === undefined) ? undefined : files;
}

/** One server or a cluster, from `--redis-url`. */
function urlTopology(get: (name: OptionName) => string | undefined, url: ParsedRedisUrl): RedisTopology {
  const sentinelOnly = firstSet(get, [
    'redis-sentinel-master-name',
    'redis-sentinel-username',
    'redis-sentinel-password',
    'redis-sentinel-tls',
    'redis-db',
  ]);
  if (sentinelOnly !== undefined) throw new ServerConfigError(`--${sentinelOnly} needs --redis-sentinels`);
  const cluster = isTrue(get('redis-cluster'));
  const more = get('redis-cluster-nodes');
  if (!cluster) {
    if (more !== undefined) throw new ServerConfigError('--redis-cluster-nodes needs --redis-cluster');
    return { kind: 'standalone', host: url.host, port: url.port, db: url.db };
  }
  if (url.db !== 0) {
    throw new ServerConfigError(`--redis-url: a Redis Cluster has only database 0, got /${url.db}`);
  }
  const seeds = [{ host: url.host, port: url.port }];
  if (more !== undefined) seeds.push(...hostPortList('redis-cluster-nodes', more));
  return { kind: 'cluster', seeds };
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

/** `--batch-max-hits`. @throws ServerConfigError unless an integer from 0 to MAX_BATCH_HITS */
function batchMaxHits(value: string): number {
  const hits = Number(value);
  if (!Number.isInteger(hits) || hits < 0 || hits > MAX_BATCH_HITS) {
    throw new ServerConfigError(`--batch-max-hits must be an integer from 0 to ${MAX_BATCH_HITS} (hits)`);
  }
  return hits;
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
  const flags = readFlags(rateLimitServerOptions, args, env, (message) => new ServerConfigError(message));
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
    redis: redisConnectionSettings(get),
    redisTimeoutMs: timeout,
    failureMode: failureMode as FailureMode,
    shadowMode: TRUE.has((get('shadow-mode') ?? '').toLowerCase()),
    batchMaxHits: batchMaxHits(required('batch-max-hits')),
    gatewayDomain,
    configNamespace: required('config-namespace'),
    configName: required('config-name'),
    statusName: required('status-name'),
    heartbeatIntervalMs: heartbeat * 1000,
    instance: get('instance') ?? hostname(),
    kubeconfig: get('kubeconfig'),
    metricsListenAddress: checkHostPort('metrics-listen-address', required('metrics-listen-address')),
    logLevel: logLevel as LevelWithSilent,
    checkConfig: get('check-config') === 'true',
  };
}
