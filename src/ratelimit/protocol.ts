/**
 * Envoy's rate-limit protocol, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
 * (envoy/service/ratelimit/v3/rls.proto), loaded at run time with @grpc/proto-loader.
 *
 * The .proto files are vendored in the repository's `proto/` (Envoy's, Apache-2.0, trimmed to the
 * messages of this protocol with names, numbers and types unchanged: proto/README.md), so the server
 * has no runtime dependency on another package's copy of Envoy's API; `protocol.test.ts` checks their
 * wire format against Envoy's complete files. The image ships `proto/` beside `dist/`.
 *
 * The TypeScript types below are the subset of the messages Portico reads and writes, in the shape
 * proto-loader produces with LOADER_OPTIONS (field names as in the .proto, enums as strings, 64-bit
 * integers as numbers, unset scalar fields absent, unset repeated fields empty).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';

export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';
export const SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';

export const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
  arrays: true,
};

/** envoy.service.ratelimit.v3.RateLimitResponse.Code */
export type ResponseCode = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
/** envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit */
export type RateLimitUnit = 'UNKNOWN' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'MONTH' | 'YEAR';

/** envoy.extensions.common.ratelimit.v3.RateLimitDescriptor (fields Portico reads). */
export interface RateLimitDescriptor {
  entries?: { key?: string; value?: string }[];
}

/** envoy.service.ratelimit.v3.RateLimitRequest */
export interface RateLimitRequest {
  domain?: string;
  descriptors?: RateLimitDescriptor[];
  /** 0 or unset means 1 (rls.proto: "If the value is not set in the message, a request increases the matched limit by 1"). */
  hits_addend?: number;
}

/** envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus */
export interface DescriptorStatus {
  code: ResponseCode;
  current_limit?: { requests_per_unit: number; unit: RateLimitUnit; name?: string };
  limit_remaining?: number;
  /** google.protobuf.Duration */
  duration_until_reset?: { seconds: number; nanos?: number };
}

/** envoy.config.core.v3.HeaderValue */
export interface HeaderValueMessage {
  key: string;
  value: string;
}

/** envoy.service.ratelimit.v3.RateLimitResponse (fields Portico writes). */
export interface RateLimitResponse {
  overall_code: ResponseCode;
  statuses: DescriptorStatus[];
  response_headers_to_add: HeaderValueMessage[];
}

/**
 * The directory of the vendored .proto files: `proto/` at the package's root, found from this
 * module's place (src/ratelimit/ and dist/ratelimit/ are two levels below the root, the bundles in
 * dist/ one).
 *
 * @throws Error when no `proto/` with rls.proto is found above this module
 */
export function protoIncludeDirs(): string[] {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = path.join(dir, 'proto');
    if (existsSync(path.join(candidate, RLS_PROTO))) return [candidate];
    dir = path.dirname(dir);
  }
  throw new Error(
    `the vendored ${RLS_PROTO} was not found in a proto/ directory above ${fileURLToPath(import.meta.url)}; ` +
      'the package must ship proto/ beside dist/',
  );
}

interface LoadedService {
  service: ServiceDefinition;
}

let cached: LoadedService | undefined;

/** The RateLimitService definition (loaded once per process, about 0.1 s). */
export function rateLimitServiceDefinition(): ServiceDefinition {
  if (cached === undefined) {
    const definition = loadSync(RLS_PROTO, { ...LOADER_OPTIONS, includeDirs: protoIncludeDirs() });
    const pkg = loadPackageDefinition(definition) as unknown as {
      envoy: { service: { ratelimit: { v3: { RateLimitService: LoadedService } } } };
    };
    cached = pkg.envoy.service.ratelimit.v3.RateLimitService;
  }
  return cached.service;
}
