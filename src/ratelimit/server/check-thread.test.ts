import { afterEach, describe, expect, it } from 'vitest';
import { createRateLimitClient } from '../grpc.js';
import { indexPolicy } from '../limits.js';
import type { PolicySnapshot } from '../policy-set.js';
import {
  CHECKS_PLACEMENT_ENV,
  CheckThread,
  checksPlacement,
  JoinedRegistry,
  MainThreadChecks,
  startChecksIn,
  type Checks,
  type ChecksPlacement,
} from './check-thread.js';

const DOMAIN = 'team/api';
const snapshot: PolicySnapshot = {
  byDomain: new Map([
    [
      DOMAIN,
      indexPolicy({
        domain: DOMAIN,
        uid: 'u1',
        generation: 1,
        plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
        defaultPlan: 'free',
        overrides: [],
      }),
    ],
  ]),
};

// Nothing listens on port 1: every check meets a Redis that is down, answered by the failure mode.
const options = {
  grpcListenAddress: '127.0.0.1:0',
  redis: {
    topology: { kind: 'standalone', host: '127.0.0.1', port: 1, db: 0 },
    tls: false,
    tlsFiles: {
      caFile: undefined,
      certFile: undefined,
      keyFile: undefined,
      serverName: undefined,
      refreshMs: 60_000,
    },
    username: undefined,
    password: undefined,
  },
  redisTimeoutMs: 200,
  failureMode: 'deny',
  logLevel: 'silent',
} as const;

describe('checksPlacement', () => {
  it('runs the checks in a thread of their own on Node and in the main thread on Bun', () => {
    expect(checksPlacement({}, false)).toBe('thread');
    expect(checksPlacement({}, true)).toBe('main');
    expect(checksPlacement({ [CHECKS_PLACEMENT_ENV]: '' }, true)).toBe('main');
  });

  it('takes the environment variable over the runtime, and refuses any other value', () => {
    expect(checksPlacement({ [CHECKS_PLACEMENT_ENV]: 'main' }, false)).toBe('main');
    expect(checksPlacement({ [CHECKS_PLACEMENT_ENV]: 'thread' }, true)).toBe('thread');
    expect(() => checksPlacement({ [CHECKS_PLACEMENT_ENV]: 'worker' }, false)).toThrow(
      /PORTICO_RATELIMIT_CHECKS must be "thread" or "main", not "worker"/,
    );
  });
});

// Each test starts worker threads that load their TypeScript through tsx: 2-5 s on a loaded 2-core
// machine, so vitest's 5 s default timed the second test out about one run in three.
describe.each<ChecksPlacement>(['thread', 'main'])(
  'checks in the %s thread',
  { timeout: 20_000 },
  (placement) => {
    const started: Checks[] = [];
    afterEach(async () => {
      await Promise.all(started.splice(0).map((c) => c.stop(1_000)));
    });

    it('answer checks with the policies they were given, report their metrics, and stop', async () => {
      const checks = await startChecksIn(placement, options);
      started.push(checks);
      expect(checks).toBeInstanceOf(placement === 'main' ? MainThreadChecks : CheckThread);
      const client = createRateLimitClient(`127.0.0.1:${checks.grpcPort}`);
      try {
        const request = { domain: DOMAIN, descriptors: [{ entries: [{ key: 'key_id', value: 'k' }] }] };
        expect((await client.shouldRateLimit(request)).overall_code).toBe('OK'); // no policies yet
        await checks.setPolicies(snapshot);
        const denied = await client.shouldRateLimit(request);
        expect(denied.overall_code).toBe('OVER_LIMIT');
        expect(denied.response_headers_to_add).toContainEqual({ key: 'Retry-After', value: '1' });
      } finally {
        client.close();
      }
      const registry = new JoinedRegistry(() => checks.metrics());
      const text = await registry.metrics();
      expect(text).toContain('portico_ratelimit_store_failures_total{failure_mode="deny"} 1');
      expect(text).toContain(
        `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="store_unavailable"} 1`,
      );
      await checks.stop(1_000);
      await expect(checks.exited).resolves.toBeUndefined();
      await expect(checks.metrics()).rejects.toThrow(/ended/);
      await expect(checks.setPolicies(snapshot)).rejects.toThrow(/ended/);
    });

    it('fail to start when the gRPC address is taken', async () => {
      const first = await startChecksIn(placement, options);
      started.push(first);
      await expect(
        startChecksIn(placement, { ...options, grpcListenAddress: `127.0.0.1:${first.grpcPort}` }),
      ).rejects.toThrow(/address|EADDRINUSE|No address added/);
    });
  },
);
