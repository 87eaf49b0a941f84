import { afterEach, describe, expect, it } from 'vitest';
import { createRateLimitClient } from '../grpc.js';
import { indexPolicy } from '../limits.js';
import type { PolicySnapshot } from '../policy-set.js';
import { CheckThread, JoinedRegistry } from './check-thread.js';

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

// Each test starts worker threads that load their TypeScript through tsx: 2-5 s on a loaded 2-core
// machine, so vitest's 5 s default timed the second test out about one run in three.
describe('CheckThread', { timeout: 20_000 }, () => {
  const threads: CheckThread[] = [];
  afterEach(async () => {
    await Promise.all(threads.splice(0).map((t) => t.stop(1_000)));
  });

  it('answers checks with the policies it was given, reports its metrics, and stops', async () => {
    const thread = await CheckThread.start(options);
    threads.push(thread);
    const client = createRateLimitClient(`127.0.0.1:${thread.grpcPort}`);
    try {
      const request = { domain: DOMAIN, descriptors: [{ entries: [{ key: 'key_id', value: 'k' }] }] };
      expect((await client.shouldRateLimit(request)).overall_code).toBe('OK'); // no policies yet
      await thread.setPolicies(snapshot);
      const denied = await client.shouldRateLimit(request);
      expect(denied.overall_code).toBe('OVER_LIMIT');
      expect(denied.response_headers_to_add).toContainEqual({ key: 'Retry-After', value: '1' });
    } finally {
      client.close();
    }
    const registry = new JoinedRegistry(() => thread.metrics());
    const text = await registry.metrics();
    expect(text).toContain('portico_ratelimit_store_failures_total{failure_mode="deny"} 1');
    expect(text).toContain(
      `portico_ratelimit_checks_total{domain="${DOMAIN}",code="OVER_LIMIT",reason="store_unavailable"} 1`,
    );
    await thread.stop(1_000);
    await expect(thread.exited).resolves.toBeUndefined();
    await expect(thread.metrics()).rejects.toThrow(/ended/);
  });

  it('fails to start when the gRPC address is taken', async () => {
    const first = await CheckThread.start(options);
    threads.push(first);
    await expect(
      CheckThread.start({ ...options, grpcListenAddress: `127.0.0.1:${first.grpcPort}` }),
    ).rejects.toThrow(/address|EADDRINUSE|No address added/);
  });
});
