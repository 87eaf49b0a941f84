/**
 * The settings of the gRPC listener (grpc.ts), apart so that the main thread can read and check them
 * (server/config.ts) without loading @grpc/grpc-js, which only the check thread runs.
 */

/** Connection management of the gRPC listener; all milliseconds. */
export interface GrpcConnectionSettings {
  /** Ping a connection after this long without activity (`grpc.keepalive_time_ms`). */
  readonly keepaliveTimeMs: number;
  /** Close it when the ping is not answered within this (`grpc.keepalive_timeout_ms`). */
  readonly keepaliveTimeoutMs: number;
  /** GOAWAY a connection this old, plus up to 10 % jitter (`grpc.max_connection_age_ms`). */
  readonly maxConnectionAgeMs: number;
  /** Calls in flight at GOAWAY get this long before the connection closes. */
  readonly maxConnectionAgeGraceMs: number;
}

/** The defaults of `portico ratelimit-server` (its flags). */
export const DEFAULT_CONNECTION_SETTINGS: GrpcConnectionSettings = {
  keepaliveTimeMs: 30_000,
  keepaliveTimeoutMs: 10_000,
  maxConnectionAgeMs: 300_000,
  maxConnectionAgeGraceMs: 10_000,
};

/** TLS of the gRPC listener, from files (PEM). */
export interface GrpcTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** With it, mTLS: a client must present a certificate this CA signed. */
  readonly clientCaFile?: string | undefined;
  /** How often the files are read again, ms. */
  readonly refreshMs: number;
}
