/**
 * What one ShouldRateLimit call may carry and what it may cost (docs/ratelimits.md, "Request
 * limits" and "Redis"), with real processes: a Redis of this test's own, `portico ratelimit-server`
 * from dist/ over gRPC.
 *
 * - A request over a bound (message size, descriptors, entries, entry length, domain length) is
 *   refused with its gRPC code and a message naming the bound; a large request that is within the
 *   bounds, sent over and over in parallel, does not delay a small check (counted, with headers).
 * - A check answered by the failure mode while Redis is stalled (SIGSTOP: the TCP connection stays
 *   and the commands already written wait in Redis's socket) is never counted once Redis resumes.
 *
 * The servers started here read a config of their own (a ConfigMap in a namespace of this test).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceError } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import type { RateLimitDescriptor, RateLimitRequest } from '../../src/ratelimit/protocol.js';
import { counterKeys } from '../../src/ratelimit/redis-keys.js';
import { currentWindows } from '../../src/ratelimit/windows.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
  answeredWithoutRedis,
  check,
  createNamespaceWithConfig,
  freshMinute,
  metricValue,
  startTestRedis,
  startTestServer,
  toAnswer,
  type Answer,
  type TestProcess,
  type TestServer,
  waitUntilLoaded,
} from './ratelimit-helpers.js';

const ns = unique('rl-req');
const DOMAIN = `${ns}/api`;
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 1_000_000, requestsPerDay: 100_000_000 }],
  defaultPlan: 'free',
  overrides: [],
};

const started: TestProcess[] = [];
function track<T extends TestProcess>(p: T): T {
  started.push(p);
  return p;
}

beforeAll(async () => {
  await createNamespaceWithConfig(ns, [ENTRY]);
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
});

/** A Redis of this test and a rate-limit server on it, once the server has loaded this test's config. */
async function stack(
  instance: string,
  extra: readonly string[],
): Promise<{ redis: TestProcess; redisUrl: string; server: TestServer }> {
  const { port } = await pickFreePorts({ port: 'tcp' });
  const redis = track(await startTestRedis(port));
  const redisUrl = `redis://127.0.0.1:${port}`;
  const server = track(
    await startTestServer([
      '--redis-url',
      redisUrl,
      '--config-namespace',
      ns,
      '--instance',
      instance,
      '--log-level',
      'info',
      ...extra,
    ]),
  );
  await waitUntilLoaded(ns, instance, ENTRY);
  return { redis, redisUrl, server };
}

/** The gRPC error of a call that must fail. */
async function refusal(server: TestServer, request: RateLimitRequest): Promise<ServiceError> {
  const err = await server.client.shouldRateLimit(request).then(
    (r) => new Error(`expected a refusal, got ${JSON.stringify(r)}`),
    (e: unknown) => e,
  );
  if (err instanceof Error && 'code' in err) return err as ServiceError;
  throw err;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const keyEntries = (keyId: string): RateLimitDescriptor[] => [{ entries: [{ key: 'key_id', value: keyId }] }];

describe('bounds on one request', () => {
  let s: TestServer;
  beforeAll(async () => {
    ({ server: s } = await stack('bounds', ['--failure-mode', 'allow', '--redis-timeout-ms', '1000']));
  });

  it('refuses a request over each bound with INVALID_ARGUMENT and a message naming it', async () => {
    const descriptors = await refusal(s, {
      domain: DOMAIN,
      descriptors: Array.from({ length: 17 }, (_, i) => ({ entries: [{ key: 'key_id', value: `k${i}` }] })),
    });
    expect(descriptors.code).toBe(status.INVALID_ARGUMENT);
    expect(descriptors.details).toContain('17 descriptors; at most 16');

    const entries = await refusal(s, {
      domain: DOMAIN,
      descriptors: [{ entries: Array.from({ length: 17 }, (_, i) => ({ key: `e${i}`, value: 'v' })) }],
    });
    expect(entries.code).toBe(status.INVALID_ARGUMENT);
    expect(entries.details).toContain('descriptors[0] has 17 entries; at most 16');

    const value = await refusal(s, { domain: DOMAIN, descriptors: keyEntries('k'.repeat(1025)) });
    expect(value.code).toBe(status.INVALID_ARGUMENT);
    expect(value.details).toContain('descriptors[0].entries[0].value is 1025 characters long; at most 1024');

    const domain = await refusal(s, { domain: 'd'.repeat(513), descriptors: keyEntries('k') });
    expect(domain.code).toBe(status.INVALID_ARGUMENT);
    expect(domain.details).toContain('domain is 513 characters long; at most 512');
  });

  it("refuses the issue's 40,000-descriptor request by its size, before decoding it", async () => {
    const request: RateLimitRequest = {
      domain: DOMAIN,
      descriptors: Array.from({ length: 40_000 }, (_, i) => ({
        entries: [{ key: 'key_id', value: `k${i}` }],
      })),
    };
    const startedMs = performance.now();
    const err = await refusal(s, request);
    expect(err.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.details).toContain('larger than max');
    expect(err.details).toContain('16384');
    expect(performance.now() - startedMs).toBeLessThan(2_000);
  });

  it('answers a small check at once while large allowed requests run in parallel', async () => {
    await freshMinute(15);
    // Within every bound: 16 descriptors of 16 entries (a key_id and 15 others), about 15 KB.
    const large = (round: number): RateLimitRequest => ({
      domain: DOMAIN,
      descriptors: Array.from({ length: 16 }, (_, d) => ({
        entries: [
          { key: 'key_id', value: `large-${round}-${d}` },
          ...Array.from({ length: 15 }, (_, e) => ({ key: `x${e}`, value: 'v'.repeat(50) })),
        ],
      })),
    });
    // The same small checks alone first, on the same connection.
    const baseline: number[] = [];
    for (let i = 0; i < 40; i++) {
      const t = performance.now();
      await check(DOMAIN, { key_id: 'baseline' }, undefined, s.client);
      baseline.push(performance.now() - t);
      await sleep(10);
    }
    let stop = false;
    let largeAnswered = 0;
    const loaderErrors: unknown[] = [];
    const loaders = Array.from({ length: 3 }, async (_, worker) => {
      try {
        for (let round = 0; !stop; round++) {
          const r = await s.client.shouldRateLimit(large(worker * 100_000 + round));
          if (r.statuses.length !== 16) throw new Error(`${r.statuses.length} statuses`);
          largeAnswered += 1;
        }
      } catch (err: unknown) {
        loaderErrors.push(err);
      }
    });
    const latencies: number[] = [];
    try {
      await sleep(200);
      for (let i = 0; i < 40; i++) {
        const t = performance.now();
        const a = await check(DOMAIN, { key_id: 'small' }, undefined, s.client);
        latencies.push(performance.now() - t);
        // Counted: the headers are there and Remaining goes down by one each time.
        expect(a.code).toBe('OK');
        expect(a.headers['X-RateLimit-Remaining']).toBe(String(1_000_000 - 1 - i));
        await sleep(10);
      }
    } finally {
      stop = true;
      await Promise.all(loaders);
    }
    expect(loaderErrors).toEqual([]);
    expect(largeAnswered).toBeGreaterThan(10);
    // The failure mode answers after 500 ms; a small check stays far below it.
    // Generous bounds for a machine shared with other test runs (2 cores): the failure mode answers
    // after 1 s; every small check stays far below it, and the typical one within 100 ms of alone.
    const seen = `alone: ${JSON.stringify(baseline.map(Math.round))}; beside: ${JSON.stringify(latencies.map(Math.round))}`;
    expect(Math.max(...latencies), seen).toBeLessThan(500);
    expect(median(latencies), seen).toBeLessThan(median(baseline) + 100);
  });
});

describe('batched counts (--batch-max-hits)', () => {
  it('admits checks far below the limit from memory and lands every hit in Redis within a batch interval', async () => {
    const { server, redisUrl } = await stack('batched', ['--batch-max-hits', '100']);
    await freshMinute(15);
    const first = await check(DOMAIN, { key_id: 'batched' }, undefined, server.client);
    expect(first.headers['X-RateLimit-Remaining']).toBe(String(1_000_000 - 1));
    let remaining = 1_000_000 - 1;
    for (let i = 0; i < 40; i++) {
      const a = await check(DOMAIN, { key_id: 'batched' }, undefined, server.client);
      expect(a.code).toBe('OK');
      // One replica: Remaining is exact whether the check waited for Redis or not.
      expect(Number(a.headers['X-RateLimit-Remaining'])).toBe(remaining - 1);
      remaining -= 1;
    }
    expect(
      await metricValue(server.metricsUrl, 'portico_ratelimit_batched_admissions_total'),
    ).toBeGreaterThan(0);
    const keys = counterKeys(DOMAIN, 'batched', currentWindows(Date.now()));
    const redis = new Redis(redisUrl);
    try {
      await waitFor(
        'the 41 hits counted in Redis',
        async () => ((await redis.get(keys.minute)) === '41' ? true : undefined),
        2_000,
        50,
      );
    } finally {
      redis.disconnect();
    }
    expect(
      await metricValue(server.metricsUrl, 'portico_ratelimit_batches_total', 'result="acknowledged"'),
    ).toBeGreaterThan(0);
  });
});

describe('a check answered by the failure mode', () => {
  it('is not counted when a stalled Redis resumes', async () => {
    // Every check exact (no batched counts, docs/ratelimits.md): this is the path that waits for
    // Redis; with batches, the first checks of the stall would be admitted from memory instead.
    const { redis, redisUrl, server } = await stack('stall', [
      '--failure-mode',
      'allow',
      '--redis-timeout-ms',
      '200',
      '--batch-max-hits',
      '0',
    ]);
    const pid = redis.child.pid;
    if (pid === undefined) throw new Error('redis-server has no pid');
    await freshMinute(30);
    const before = await check(DOMAIN, { key_id: 'stalled' }, undefined, server.client);
    expect(before.headers['X-RateLimit-Remaining']).toBe(String(1_000_000 - 1));
    const keys = counterKeys(DOMAIN, 'stalled', currentWindows(Date.now()));

    const timeoutsBefore = await metricValue(
      server.metricsUrl,
      'portico_ratelimit_redis_errors_total',
      'command="check",error="timeout"',
    );
    process.kill(pid, 'SIGSTOP');
    let answeredByFailureMode = 0;
    const degraded = (a: Answer): boolean =>
      a.code === 'OK' && a.headers['X-RateLimit-Limit'] === '1000000' && answeredWithoutRedis(a);
    try {
      // Sequential and parallel checks. The first is written to the open connection and times out;
      // it opens the breaker, so the next ones are answered from local counts without asking Redis.
      for (let i = 0; i < 5; i++) {
        const a = await check(DOMAIN, { key_id: 'stalled' }, undefined, server.client);
        expect(degraded(a), JSON.stringify(a.response)).toBe(true);
        answeredByFailureMode += 1;
      }
      const parallel = await Promise.all(
        Array.from({ length: 20 }, () => check(DOMAIN, { key_id: 'stalled' }, undefined, server.client)),
      );
      for (const a of parallel) expect(degraded(a), JSON.stringify(a.response)).toBe(true);
      answeredByFailureMode += parallel.length;
      // The local counts went on from zero on this replica (25 checks).
      expect(parallel.map((a) => Number(a.headers['X-RateLimit-Remaining'])).sort((x, y) => x - y)[0]).toBe(
        1_000_000 - 25,
      );
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(answeredByFailureMode).toBe(25);
    // Far fewer checks went to the stalled Redis than were answered: the first, and a probe at most
    // once a second (the breaker's open interval).
    const timeouts =
      (await metricValue(
        server.metricsUrl,
        'portico_ratelimit_redis_errors_total',
        'command="check",error="timeout"',
      )) - timeoutsBefore;
    expect(timeouts).toBeGreaterThanOrEqual(1);
    expect(timeouts).toBeLessThanOrEqual(3);

    // Once Redis runs again it executes the commands it had received; the next check on the same
    // connection comes after them.
    const after = await waitFor('counting to resume', async () => {
      const a = await check(DOMAIN, { key_id: 'stalled' }, undefined, server.client);
      return a.code === 'OK' && !answeredWithoutRedis(a) ? toAnswer(a.response) : undefined;
    });
    expect(after.headers['X-RateLimit-Remaining']).toBe(String(1_000_000 - 2));
    const direct = new Redis(redisUrl);
    try {
      expect(await direct.get(keys.minute)).toBe('2');
      expect(await direct.get(keys.day)).toBe('2');
    } finally {
      await direct.quit();
    }
  });
});
