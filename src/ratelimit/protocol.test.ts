/**
 * The vendored, trimmed protos (proto/, `protocol.ts`) against Envoy's complete ones (the
 * devDependency @grpc/grpc-js-xds, `deps/envoy-api` and its dependencies): a request and a response
 * encode to the same bytes with both, and each side reads the other's bytes the same way.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { loadSync, type MethodDefinition } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import {
  LOADER_OPTIONS,
  protoIncludeDirs,
  RLS_PROTO,
  SERVICE_NAME,
  type RateLimitRequest,
  type RateLimitResponse,
} from './protocol.js';

type Method = MethodDefinition<RateLimitRequest, RateLimitResponse>;

function method(includeDirs: string[]): Method {
  const definition = loadSync(RLS_PROTO, { ...LOADER_OPTIONS, includeDirs });
  const service = definition[SERVICE_NAME] as unknown as Record<string, Method>;
  const m = service['ShouldRateLimit'];
  if (m === undefined) throw new Error('ShouldRateLimit not found');
  return m;
}

function envoyIncludeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const root = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(root, 'deps', d));
}

const REQUEST: RateLimitRequest = {
  domain: 'platform-api/public-api',
  descriptors: [
    {
      entries: [
        { key: 'key_id', value: 'k1' },
        { key: 'plan', value: 'pro' },
      ],
    },
    { entries: [{ key: 'remote_address', value: '192.0.2.7' }] },
  ],
  hits_addend: 3,
};

const RESPONSE: RateLimitResponse = {
  overall_code: 'OVER_LIMIT',
  statuses: [
    {
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 300, unit: 'MINUTE', name: 'portico:store_unavailable' },
      limit_remaining: 0,
      duration_until_reset: { seconds: 42 },
    },
    { code: 'OK', current_limit: { requests_per_unit: 10000, unit: 'DAY' }, limit_remaining: 9000 },
  ],
  response_headers_to_add: [
    { key: 'X-RateLimit-Limit', value: '300' },
    { key: 'Retry-After', value: '42' },
  ],
};

describe('the vendored rate-limit protos', () => {
  const ours = method(protoIncludeDirs());
  const envoys = method(envoyIncludeDirs());

  it('encode a request and a response to the same bytes as Envoy’s complete protos', () => {
    expect(Buffer.compare(ours.requestSerialize(REQUEST), envoys.requestSerialize(REQUEST))).toBe(0);
    expect(Buffer.compare(ours.responseSerialize(RESPONSE), envoys.responseSerialize(RESPONSE))).toBe(0);
  });

  it('read what the other side wrote', () => {
    expect(ours.requestDeserialize(envoys.requestSerialize(REQUEST))).toEqual(
      envoys.requestDeserialize(envoys.requestSerialize(REQUEST)),
    );
    expect(envoys.responseDeserialize(ours.responseSerialize(RESPONSE))).toEqual(
      ours.responseDeserialize(ours.responseSerialize(RESPONSE)),
    );
    expect(ours.requestDeserialize(envoys.requestSerialize(REQUEST))).toMatchObject(REQUEST);
  });
});
