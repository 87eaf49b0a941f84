/**
 * How `portico ratelimit-server` reaches Redis: one server, a Redis Cluster (seed nodes) or a
 * primary found through Redis Sentinel; TLS with a CA and a client certificate from PEM files;
 * ACL username and password. `server/config.ts` reads these settings from flags; `redis-store.ts`
 * turns them into an ioredis client with `redisClientOptions` (pure, so the mapping is unit-tested).
 *
 * Sources of the rules: ioredis's README ("Sentinel", "Cluster", "TLS Options": `dnsLookup` for
 * TLS endpoints of a cluster, `enableTLSForSentinelMode` and `sentinelTLS`), Redis's documentation
 * ("High availability with Redis Sentinel", "Redis cluster specification", "TLS", "ACL").
 */
import type { ConnectionOptions } from 'node:tls';
import { Cluster, type ClusterOptions, type Redis, type RedisOptions } from 'ioredis';
import type { RedisCredentialFiles, RedisCredentials } from './redis-credentials.js';

/** A `host:port` pair. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** Where the counters live. */
export type RedisTopology =
  /** One Redis server (`db`: its logical database, 0 by default). */
  | { readonly kind: 'standalone'; readonly host: string; readonly port: number; readonly db: number }
  /** A Redis Cluster, found from these seed nodes (any of them answering is enough). */
  | { readonly kind: 'cluster'; readonly seeds: readonly HostPort[] }
  /** The primary of `masterName`, as the sentinels name it (and name it again after a failover). */
  | {
      readonly kind: 'sentinel';
      readonly sentinels: readonly HostPort[];
      readonly masterName: string;
      readonly db: number;
      /** The sentinels speak TLS (the same CA and client certificate as the Redis nodes). */
      readonly sentinelTls: boolean;
      readonly sentinelUsername: string | undefined;
      readonly sentinelPassword: string | undefined;
    };

/** PEM files of the TLS connections to Redis (and to the sentinels with `sentinelTls`). */
export interface RedisTlsFiles {
  /** CA bundle that signed the servers' certificates; the system's CAs when unset. */
  readonly caFile: string | undefined;
  /** Client certificate (chain), for a Redis with `tls-auth-clients yes`; with `keyFile`. */
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  /** The name the servers' certificates are checked against (and sent as SNI) instead of the host. */
  readonly serverName: string | undefined;
  /** How often the files are read again, ms (a rotated certificate is used on the next connection). */
  readonly refreshMs: number;
}

/** Everything `RedisCounterStore` needs to connect. Plain data (it crosses to the check thread). */
export interface RedisConnectionSettings {
  readonly topology: RedisTopology;
  /** TLS to the Redis nodes; plaintext when false. */
  readonly tls: boolean;
  /** Used when `tls` or the sentinels' TLS is on. */
  readonly tlsFiles: RedisTlsFiles;
  /** ACL user (Redis 6+); `default` when unset. */
  readonly username: string | undefined;
  readonly password: string | undefined;
  /**
   * Files the username, the password and the sentinels' password come from, read again when they
   * change (redis-credentials.ts); the values above are their contents at start. Unset: no file.
   */
  readonly credentialFiles?: RedisCredentialFiles | undefined;
}

/** The contents of the TLS files, as read. */
export interface RedisTlsMaterial {
  readonly ca?: Buffer | undefined;
  readonly cert?: Buffer | undefined;
  readonly key?: Buffer | undefined;
}

/** Options every connection gets (the command timeout, no offline queue), from `redis-store.ts`. */
export interface RedisCommonOptions {
  readonly commandTimeout: number;
  readonly maxRetriesPerRequest: number;
  readonly enableOfflineQueue: boolean;
  readonly enableAutoPipelining: boolean;
}

/** ioredis's options without `replyMapping` (its constructors' overloads pick it; left at the default). */
export type ClientRedisOptions = Omit<RedisOptions, 'replyMapping'>;
export type ClientClusterOptions = Omit<ClusterOptions, 'redisOptions'> & {
  readonly redisOptions: Omit<NonNullable<ClusterOptions['redisOptions']>, 'replyMapping'>;
};

/** What to construct: `new Redis(options)` or `new Cluster(seeds, options)`. */
export type RedisClientOptions =
  | { readonly kind: 'redis'; readonly options: ClientRedisOptions }
  | { readonly kind: 'cluster'; readonly seeds: HostPort[]; readonly options: ClientClusterOptions };

/** node:tls options from the files' contents; node:tls uses the system's CAs without `ca`. */
export function tlsConnectionOptions(
  material: RedisTlsMaterial,
  serverName: string | undefined,
): ConnectionOptions {
  return {
    ...(material.ca === undefined ? {} : { ca: material.ca }),
    ...(material.cert === undefined ? {} : { cert: material.cert }),
    ...(material.key === undefined ? {} : { key: material.key }),
    ...(serverName === undefined ? {} : { servername: serverName }),
  };
}

/**
 * The ioredis options for `settings`. `tls` is the object every TLS connection is opened with: the
 * store updates it in place when the files change (ioredis passes this same object to
 * `tls.connect` on each connection), so it is shared, never copied, here.
 *
 * Cluster: `dnsLookup` hands each node's address to `tls.connect` as it is, so a TLS endpoint is
 * checked against the host name the cluster announces rather than an IP address it resolves to
 * (ioredis README, "Special note: AWS ElastiCache Clusters with TLS"). Sentinel: the failover
 * detector subscribes to the sentinels' `+switch-master` and reconnects as soon as they announce
 * the new primary, instead of waiting for the old connection to fail.
 */
export function redisClientOptions(
  settings: RedisConnectionSettings,
  tls: ConnectionOptions | undefined,
  common: RedisCommonOptions,
): RedisClientOptions {
  const auth = {
    ...(settings.username === undefined ? {} : { username: settings.username }),
    ...(settings.password === undefined ? {} : { password: settings.password }),
  };
  const nodeTls = settings.tls && tls !== undefined ? { tls } : {};
  const t = settings.topology;
  switch (t.kind) {
    case 'standalone':
      return {
        kind: 'redis',
        options: { host: t.host, port: t.port, db: t.db, ...auth, ...nodeTls, ...common },
      };
    case 'cluster':
      return {
        kind: 'cluster',
        seeds: t.seeds.map(({ host, port }) => ({ host, port })),
        options: {
          enableOfflineQueue: common.enableOfflineQueue,
          enableAutoPipelining: common.enableAutoPipelining,
          ...(settings.tls
            ? {
                dnsLookup: (address: string, callback: (err: null, address: string) => void) => {
                  callback(null, address);
                },
              }
            : {}),
          redisOptions: {
            ...auth,
            ...nodeTls,
            commandTimeout: common.commandTimeout,
            maxRetriesPerRequest: common.maxRetriesPerRequest,
          },
        },
      };
    case 'sentinel':
      return {
        kind: 'redis',
        options: {
          sentinels: t.sentinels.map(({ host, port }) => ({ host, port })),
          name: t.masterName,
          db: t.db,
          ...auth,
          ...(t.sentinelUsername === undefined ? {} : { sentinelUsername: t.sentinelUsername }),
          ...(t.sentinelPassword === undefined ? {} : { sentinelPassword: t.sentinelPassword }),
          ...(t.sentinelTls && tls !== undefined ? { sentinelTLS: tls } : {}),
          ...(settings.tls && tls !== undefined ? { tls, enableTLSForSentinelMode: true } : {}),
          sentinelCommandTimeout: common.commandTimeout,
          failoverDetector: true,
          ...common,
        },
      };
  }
}

/**
 * Why a connection to Redis failed, for the log and `portico_ratelimit_redis_connection_errors_total`:
 * `auth` (Redis refused the username or password: WRONGPASS, NOAUTH, or AUTH without a password set),
 * `tls` (the TLS handshake failed: a certificate not trusted, expired, of another name, or refused
 * by Redis), `sentinel` (no sentinel answered, or none knows the primary), else `connection`.
 */
export type RedisConnectionErrorKind = 'auth' | 'tls' | 'sentinel' | 'connection';

export const REDIS_CONNECTION_ERROR_KINDS: readonly RedisConnectionErrorKind[] = [
  'auth',
  'tls',
  'sentinel',
  'connection',
];

/** node:tls's and OpenSSL's codes of a certificate that does not verify. */
const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_(GET|VERIFY)_|ERR_OSSL_)/;

/** The kind of an error ioredis emitted on its connection (`error` event). */
export function redisConnectionErrorKind(err: unknown): RedisConnectionErrorKind {
  if (!(err instanceof Error)) return 'connection';
  const code = (err as { code?: unknown }).code;
  if (/^(WRONGPASS|NOAUTH|NOPERM)\b/.test(err.message) || /AUTH .*no password is set/i.test(err.message)) {
    return 'auth';
  }
  if (
    (typeof code === 'string' && TLS_CODES.test(code)) ||
    /\b(SSL|TLS) (alert|routines)|certificate/i.test(err.message)
  ) {
    return 'tls';
  }
  if (/sentinel/i.test(err.message)) return 'sentinel';
  return 'connection';
}

/** The ioredis options of a node's connection the defined credentials set. */
function nodeCredentialOptions(credentials: RedisCredentials): Pick<RedisOptions, 'username' | 'password'> {
  return {
    ...(credentials.username === undefined ? {} : { username: credentials.username }),
    ...(credentials.password === undefined ? {} : { password: credentials.password }),
  };
}

/**
 * Makes every later connection of `client` authenticate with `credentials` (the credentials that are
 * undefined are left as they are); connections already open stay as they are.
 *
 * ioredis has no call for this; it reads the credentials from its options object on each connection:
 * a `Redis` sends `AUTH` from `options.username`/`options.password` when it (re)connects, and with
 * Sentinel the connections to the sentinels are opened with `options.sentinelUsername` and
 * `options.sentinelPassword` of that same object (ioredis `Redis#connect`, `SentinelConnector`).
 * A `Cluster` gives each node a `Redis` with its own copy of `redisOptions`: the nodes there now get
 * the new ones here, and a node added later gets them from the `+node` listener its store keeps
 * (`clusterNodeCredentials`), which runs before the node's first connection (nodes connect lazily).
 */
export function applyRedisCredentials(client: Redis | Cluster, credentials: RedisCredentials): void {
  const set = nodeCredentialOptions(credentials);
  if (client instanceof Cluster) {
    if (client.options.redisOptions !== undefined) Object.assign(client.options.redisOptions, set);
    for (const node of client.nodes('all')) Object.assign(node.options, set);
    return;
  }
  Object.assign(client.options, set);
  if (credentials.sentinelPassword !== undefined)
    client.options.sentinelPassword = credentials.sentinelPassword;
}

/** For a Cluster's `+node` event: a node added after a change gets the credentials in use. */
export function clusterNodeCredentials(node: Redis, credentials: RedisCredentials): void {
  Object.assign(node.options, nodeCredentialOptions(credentials));
}

/** Whether an error's text says a password was refused or missing (`WRONGPASS`, `NOAUTH`). */
const AUTH_REFUSED = /\b(WRONGPASS|NOAUTH)\b/;

/**
 * The hint of the log line for a connection error: what to check, by the flags that set it.
 *
 * A sentinel that refuses the password shows in ioredis as "All sentinels are unreachable … Last
 * error: Command timed out" (the sentinel closes the connection or leaves the command unanswered),
 * or with NOAUTH/WRONGPASS as its last error: so with sentinels, the hint names the sentinels'
 * password flags when a sentinel password is set or the error says a password was refused.
 */
export function redisConnectionErrorHint(
  kind: RedisConnectionErrorKind,
  err: Error,
  settings: RedisConnectionSettings,
): string {
  const passwordFlags =
    settings.credentialFiles?.passwordFile === undefined ? '--redis-password' : '--redis-password-file';
  const usernameFlags =
    settings.credentialFiles?.usernameFile === undefined ? '--redis-username' : '--redis-username-file';
  switch (kind) {
    case 'auth':
      return `Redis refused the username or password (check the Secret of ${passwordFlags} / ${usernameFlags})`;
    case 'tls':
      return 'the TLS handshake with Redis failed (check --redis-tls-ca-file, the client certificate and --redis-tls-server-name)';
    case 'sentinel': {
      const base =
        'no sentinel named a reachable primary (check --redis-sentinels and --redis-sentinel-master-name';
      const t = settings.topology;
      const passwordSet = t.kind === 'sentinel' && t.sentinelPassword !== undefined;
      if (passwordSet || AUTH_REFUSED.test(err.message)) {
        const which =
          settings.credentialFiles?.sentinelPasswordFile === undefined
            ? '--redis-sentinel-password'
            : '--redis-sentinel-password-file';
        const refused = AUTH_REFUSED.test(err.message)
          ? 'a sentinel refused the password'
          : 'a sentinel that refuses the password looks the same as one that does not answer';
        return `${base}, and ${which} and --redis-sentinel-username: ${refused})`;
      }
      return `${base})`;
    }
    case 'connection':
      return 'cannot connect to Redis';
  }
}
