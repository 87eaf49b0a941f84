/**
 * The gRPC side of the rate-limit service (@grpc/grpc-js): a server that registers
 * `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and the standard health service
 * `grpc.health.v1.Health` (grpc-health-check, the grpc-node project's: `Check` and `Watch`, for the
 * service names `""` and RateLimitService), and a small promise-based client for tests and tools.
 *
 * Transport (docs/ratelimits.md, "Transport"):
 * - plaintext HTTP/2 by default (Envoy's `rate_limit_service` over `h2c`), or TLS with a certificate
 *   and key from files, and mTLS when a client CA file is given (clients without a certificate that CA
 *   signed are refused in the TLS handshake). The files are read again every `refreshMs`, so a
 *   rotated Secret is served without a restart (grpc-js's FileWatcherCertificateProvider);
 * - keepalive: the server pings a connection idle for `keepaliveTimeMs` and closes it when the ping is
 *   not answered within `keepaliveTimeoutMs` (gRPC's A8 keepalive proposal, `grpc.keepalive_time_ms`);
 * - a maximum connection age (gRPC's A9 proposal, `grpc.max_connection_age_ms`): after it, plus up to
 *   10 % jitter, the server sends GOAWAY and the client (Envoy) opens a new connection, which the
 *   Service balances to any replica, so a new replica gets load; calls in flight get
 *   `maxConnectionAgeGraceMs` to finish.
 *
 * What a call may carry (`request-limits.ts`): a message over MAX_REQUEST_MESSAGE_BYTES is refused by
 * @grpc/grpc-js with RESOURCE_EXHAUSTED from its length prefix, before it is read or decoded; a
 * decoded request over a bound of its shape is answered INVALID_ARGUMENT with a message that names
 * the bound. Neither is logged (a misconfigured gateway would fill the log; the metric
 * `portico_ratelimit_invalid_requests_total` counts the second).
 */
import {
  Server,
  ServerCredentials,
  credentials,
  experimental,
  makeGenericClientConstructor,
  status,
  type ChannelCredentials,
  type ServiceError,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import { isInvalidRequestError } from './errors.js';
import {
  DEFAULT_CONNECTION_SETTINGS,
  type GrpcConnectionSettings,
  type GrpcTlsFiles,
} from './grpc-settings.js';
import {
  rateLimitServiceDefinition,
  SERVICE_NAME,
  type RateLimitRequest,
  type RateLimitResponse,
} from './protocol.js';
import { MAX_REQUEST_MESSAGE_BYTES } from './request-limits.js';

export type CheckHandler = (request: RateLimitRequest) => Promise<RateLimitResponse>;

/** A server with its health service, whose statuses `setServing` sets. */
export interface RateLimitGrpcServer {
  readonly server: Server;
  /** SERVING or NOT_SERVING for `""` and RateLimitService (grpc.health.v1). */
  readonly setServing: (serving: boolean) => void;
}

/**
 * A gRPC server with the RateLimitService and grpc.health.v1.Health registered (health SERVING); not
 * yet bound.
 *
 * @param handler answers a check; an InvalidRequestError it throws becomes INVALID_ARGUMENT, any other
 *   error INTERNAL (logged)
 */
export function createRateLimitGrpcServer(
  handler: CheckHandler,
  log: Logger,
  settings: GrpcConnectionSettings = DEFAULT_CONNECTION_SETTINGS,
): RateLimitGrpcServer {
  const server = new Server({
    'grpc.max_receive_message_length': MAX_REQUEST_MESSAGE_BYTES,
    'grpc.enable_channelz': 0,
    'grpc.keepalive_time_ms': settings.keepaliveTimeMs,
    'grpc.keepalive_timeout_ms': settings.keepaliveTimeoutMs,
    'grpc.max_connection_age_ms': settings.maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': settings.maxConnectionAgeGraceMs,
  });
  const health = new HealthImplementation({ '': 'SERVING', [SERVICE_NAME]: 'SERVING' });
  health.addToServer(server);
  server.addService(rateLimitServiceDefinition(), {
    ShouldRateLimit: (
      call: ServerUnaryCall<RateLimitRequest, RateLimitResponse>,
      callback: sendUnaryData<RateLimitResponse>,
    ): void => {
      handler(call.request).then(
        (response) => {
          callback(null, response);
        },
        (err: unknown) => {
          if (isInvalidRequestError(err)) {
            callback({ code: status.INVALID_ARGUMENT, details: err.message });
            return;
          }
          log.error({ err }, 'ShouldRateLimit failed');
          callback({ code: status.INTERNAL, details: err instanceof Error ? err.message : String(err) });
        },
      );
    },
  });
  return {
    server,
    setServing: (serving) => {
      const value = serving ? 'SERVING' : 'NOT_SERVING';
      health.setStatus('', value);
      health.setStatus(SERVICE_NAME, value);
    },
  };
}

/**
 * The listener's credentials: plaintext without `tls`; else TLS from the files, read again every
 * `refreshMs` (a rotated certificate is served to new connections without a restart), and mTLS with a
 * client CA.
 */
export function serverCredentials(tls: GrpcTlsFiles | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const identity = new experimental.FileWatcherCertificateProvider({
    certificateFile: tls.certFile,
    privateKeyFile: tls.keyFile,
    refreshIntervalMs: tls.refreshMs,
  });
  const clientCa =
    tls.clientCaFile === undefined
      ? null
      : new experimental.FileWatcherCertificateProvider({
          caCertificateFile: tls.clientCaFile,
          refreshIntervalMs: tls.refreshMs,
        });
  // grpc-js's CertificateProviderServerCredentials takes (identity, ca) in this order, whatever the
  // exported function's parameter names say (@grpc/grpc-js 1.14 server-credentials.js).
  return experimental.createCertificateProviderServerCredentials(identity, clientCa, clientCa !== null);
}

/**
 * Binds `server` to `address` (`host:port`; port 0 picks a free one) and returns the bound port.
 *
 * @param credentials plaintext when unset (`serverCredentials`)
 * @throws Error when the address cannot be bound
 */
export function bindServer(
  server: Server,
  address: string,
  credentials: ServerCredentials = ServerCredentials.createInsecure(),
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (err, port) => {
      if (err) reject(err);
      else resolve(port);
    });
  });
}

/** Stops accepting calls and waits up to `graceMs` milliseconds for calls in flight, then forces. */
export function shutdownServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** A client of the RateLimitService. */
export interface RateLimitClient {
  /** @param deadlineMs milliseconds the call may take */
  shouldRateLimit(request: RateLimitRequest, deadlineMs?: number): Promise<RateLimitResponse>;
  close(): void;
}

interface GeneratedClient {
  ShouldRateLimit(
    request: RateLimitRequest,
    options: { deadline: Date },
    callback: (err: ServiceError | null, response?: RateLimitResponse) => void,
  ): void;
  close(): void;
}

/**
 * Connects to the service at `address` (`host:port`).
 *
 * @param channelCredentials plaintext when unset; `credentials.createSsl(ca, key, cert)` for (m)TLS
 */
export function createRateLimitClient(
  address: string,
  channelCredentials: ChannelCredentials = credentials.createInsecure(),
): RateLimitClient {
  const Constructor = makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Constructor(address, channelCredentials) as unknown as GeneratedClient;
  return {
    shouldRateLimit: (request, deadlineMs = 5_000) =>
      new Promise((resolve, reject) => {
        client.ShouldRateLimit(request, { deadline: new Date(Date.now() + deadlineMs) }, (err, response) => {
          if (err) reject(err);
          else if (response === undefined) reject(new Error('ShouldRateLimit returned no response'));
          else resolve(response);
        });
      }),
    close: () => {
      client.close();
    },
  };
}
