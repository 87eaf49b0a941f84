/**
 * The flags of `portico ratelimit-server`, each with its environment variable, default and help
 * line (`portico ratelimit-server --help` prints them; config.ts reads and checks them).
 */
import { CHECK_CONFIG_FLAG, type FlagSpec } from '../../command-flags.js';
import {
  DEFAULT_GATEWAY_DOMAIN,
  DEFAULT_RATELIMIT_CONFIG_NAME,
  DEFAULT_RATELIMIT_STATUS_NAME,
} from '../../api/ratelimitpolicy.js';
import { DEFAULT_CONNECTION_SETTINGS } from '../grpc-settings.js';
import { HEARTBEAT_INTERVAL_MS } from '../load-report.js';

export const rateLimitServerOptions = {
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
    help: 'redis://[user:password@]host:port[/db] of the counters (rediss:// for TLS); a seed node with --redis-cluster; required unless --redis-sentinels',
  },
  'redis-cluster': {
    type: 'boolean',
    env: ['PORTICO_RATELIMIT_REDIS_CLUSTER'],
    help: 'Redis is a Redis Cluster (redis-url is a seed node)',
  },
  'redis-cluster-nodes': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_CLUSTER_NODES'],
    help: 'more seed nodes of the Redis Cluster, host:port,host:port (with --redis-cluster)',
  },
  'redis-sentinels': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINELS'],
    help: 'Redis Sentinel: host:port,host:port of the sentinels that name the primary (instead of --redis-url)',
  },
  'redis-sentinel-master-name': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINEL_MASTER_NAME'],
    help: 'the name the sentinels monitor the primary under (required with --redis-sentinels)',
  },
  'redis-sentinel-username': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINEL_USERNAME'],
    help: 'ACL user of the sentinels (default: none)',
  },
  'redis-sentinel-password': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINEL_PASSWORD'],
    help: "the sentinels' password (requirepass of sentinel.conf); prefer the variable, flags show in the process list",
  },
  'redis-sentinel-password-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINEL_PASSWORD_FILE'],
    help: "file holding the sentinels' password, read again when it changes (a mounted Secret); instead of --redis-sentinel-password",
  },
  'redis-sentinel-tls': {
    type: 'boolean',
    env: ['PORTICO_RATELIMIT_REDIS_SENTINEL_TLS'],
    help: 'the sentinels speak TLS (with the --redis-tls-* files)',
  },
  'redis-db': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_DB'],
    help: "logical database with --redis-sentinels (a URL's /db otherwise); default 0",
  },
  'redis-username': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_USERNAME'],
    help: "ACL user of the Redis nodes; wins over the URL's",
  },
  'redis-password': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_PASSWORD'],
    help: "password of the Redis nodes; wins over the URL's; prefer the variable, flags show in the process list",
  },
  'redis-username-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_USERNAME_FILE'],
    help: 'file holding the ACL user of the Redis nodes, read again when it changes; instead of --redis-username',
  },
  'redis-password-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_PASSWORD_FILE'],
    help: 'file holding the password of the Redis nodes, read again when it changes (a mounted Secret: a rotated password is used from the next connection on); instead of --redis-password',
  },
  'redis-tls': {
    type: 'boolean',
    env: ['PORTICO_RATELIMIT_REDIS_TLS'],
    help: 'TLS to the Redis nodes (also implied by a rediss:// URL)',
  },
  'redis-tls-ca-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TLS_CA_FILE'],
    help: "PEM CA bundle that signed the Redis servers' certificates (default: the system's CAs)",
  },
  'redis-tls-cert-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TLS_CERT_FILE'],
    help: 'PEM client certificate (chain) for Redis, with --redis-tls-key-file (tls-auth-clients)',
  },
  'redis-tls-key-file': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TLS_KEY_FILE'],
    help: 'PEM private key of --redis-tls-cert-file',
  },
  'redis-tls-server-name': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TLS_SERVER_NAME'],
    help: "the name Redis's certificates are checked against (and SNI), instead of the host connected to",
  },
  'redis-tls-refresh-seconds': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_REDIS_TLS_REFRESH_SECONDS'],
    default: '60',
    help: 'seconds between reads of the Redis TLS files (a rotated certificate is used on the next connection)',
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
  'batch-max-hits': {
    type: 'string',
    env: ['PORTICO_RATELIMIT_BATCH_MAX_HITS'],
    default: '0',
    help: "hits of one key a replica may admit far below its limit without waiting for Redis, sent to Redis in batches (at most 5 % of the key's smaller limit; e.g. 100); 0 (default): every check waits for Redis (docs/ratelimits.md, batched counts)",
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
  'check-config': CHECK_CONFIG_FLAG,
  help: { type: 'boolean', env: [], help: 'show this help' },
} as const satisfies Record<string, FlagSpec>;

/** The name of one of `portico ratelimit-server`'s flags, without the leading `--`. */
export type OptionName = keyof typeof rateLimitServerOptions;
