/**
 * The gRPC side of the rate-limit service (@grpc/grpc-js): a server that registers
 * `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, and a small promise-based client
 * for tests and tools. Plaintext HTTP/2, as Envoy's `rate_limit_service` grpc_service expects inside a
 * cluster; terminate TLS in a mesh sidecar if you need it.
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
  makeGenericClientConstructor,
  status,
  type ServiceError,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { isInvalidRequestError } from './errors.js';
import { rateLimitServiceDefinition, type RateLimitRequest, type RateLimitResponse } from './protocol.js';
import { MAX_REQUEST_MESSAGE_BYTES } from './request-limits.js';

export type CheckHandler = (request: RateLimitRequest) => Promise<RateLimitResponse>;

/**
 * A gRPC server with the RateLimitService registered; not yet bound.
 *
 * @param handler answers a check; an InvalidRequestError it throws becomes INVALID_ARGUMENT, any other
 *   error INTERNAL (logged)
 */
export function createRateLimitGrpcServer(handler: CheckHandler, log: Logger): Server {
  const server = new Server({
    'grpc.max_receive_message_length': MAX_REQUEST_MESSAGE_BYTES,
    'grpc.enable_channelz': 0,
  });
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
  return server;
}

/**
 * Binds `server` to `address` (`host:port`; port 0 picks a free one) and returns the bound port.
 *
 * @throws Error when the address cannot be bound
 */
export function bindServer(server: Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, port) => {
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

/** Connects to the service at `address` (`host:port`), plaintext. */
export function createRateLimitClient(address: string): RateLimitClient {
  const Constructor = makeGenericClientConstructor(rateLimitServiceDefinition(), 'RateLimitService');
  const client = new Constructor(address, credentials.createInsecure()) as unknown as GeneratedClient;
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
