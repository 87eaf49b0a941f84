/**
 * Envoy's rate-limit protocol, `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
 * (envoy/service/ratelimit/v3/rls.proto), loaded at run time with @grpc/proto-loader.
 *
 * The .proto files come from the npm package @grpc/grpc-js-xds (pinned exactly in package.json), which
 * ships Envoy's API tree under `deps/envoy-api` with its dependencies (`deps/xds`, `deps/googleapis`,
 * `deps/protoc-gen-validate`), all Apache-2.0; see docs/adr/2026-11-22-ratelimit-protocol-and-counters.md.
 *
 * The TypeScript types below are the subset of the messages Portico reads and writes, in the shape
 * proto-loader produces with LOADER_OPTIONS (field names as in the .proto, enums as strings, 64-bit
 * integers as numbers, unset scalar fields absent, unset repeated fields empty).
 */
import { createRequire } from 'node:module';
import path from 'node:path';
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

/** The directories proto-loader resolves imports in, inside @grpc/grpc-js-xds. */
export function protoIncludeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const root = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(root, 'deps', d));
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
