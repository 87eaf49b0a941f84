/**
 * The rate-limit server when things go wrong, with real processes (docs/ratelimits.md, "Degraded
 * mode (Redis down)"; docs/reliability.md, "Rate-limit service"): Redis down answered by the
 * configured failure mode (local, allow or deny; with the headers of each replica's own counts for
 * local and allow), logged and counted; Redis back, counting again, also when it is killed and
 * restarted under load; a Redis Cluster (hash tags keep one key's counters in one slot); a config
 * the service rejects shows Enforced=False with its reason; and the CRD's validation rules.
 *
 * The servers started here read a config of their own (a ConfigMap in a namespace of this test), so
 * they never report on the sandbox's policies.
 */
import { execFile } from 'node:child_process';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitPolicy, RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { counterKeys } from '../../src/ratelimit/redis-keys.js';
import { currentWindows } from '../../src/ratelimit/windows.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
  answeredWithoutRedis,
  TOOLS_BIN,
  check,
  clients,
  createNamespace,
  createNamespaceWithConfig,
  createPolicy,
  freshMinute,
  metricValue,
  rateLimitClient,
  startTestRedis,
  startTestServer,
  updatePolicy,
  waitForPolicyCondition,
  type TestProcess,
  type TestServer,
  waitUntilLoaded,
  windowEnds,
} from './ratelimit-helpers.js';

const run = promisify(execFile);
const ns = unique('rl-res');
const DOMAIN = `${ns}/api`;
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
};

const started: TestProcess[] = [];
function track<T extends TestProcess>(p: T): T {
  started.push(p);
  return p;
}

/** A rate-limit server of this test on `redisUrl`, reading this test's config. */
function server(redisUrl: string, extra: readonly string[] = []): Promise<TestServer> {
  return startTestServer([
    '--redis-url',
    redisUrl,
    '--config-namespace',
    ns,
    '--redis-timeout-ms',
    '200',
    '--log-level',
    'info',
    ...extra,
  ]).then(track);
}

beforeAll(async () => {
  await createNamespaceWithConfig(ns, [ENTRY]);
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
  rateLimitClient().close();
});

/** Waits until a server has loaded this test's config (its load report says so). */
async function loaded(instance: string): Promise<void> {
  await waitUntilLoaded(ns, instance, ENTRY);
}

describe('when Redis is down', () => {
  it('decides on its own counts by default (local): the limit holds, with the headers; logged and counted', async () => {
    const { dead } = await pickFreePorts({ dead: 'tcp' });
    const s = await server(`redis://127.0.0.1:${dead}`, ['--instance', 'local']);
    await loaded('local');
    await freshMinute(20);
    const answers = [];
    for (let i = 0; i < 61; i++) answers.push(await check(DOMAIN, { key_id: 'k' }, undefined, s.client));
    expect(answers.slice(0, 60).every((a) => a.code === 'OK')).toBe(true);
    expect(answers.map((a) => a.headers['X-RateLimit-Remaining']).slice(0, 60)).toEqual(
      Array.from({ length: 60 }, (_, i) => String(59 - i)),
    );
    const last = answers[60];
    expect(last?.code).toBe('OVER_LIMIT');
    expect(last?.headers).toMatchObject({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(windowEnds().minute),
    });
    expect(Number(last?.headers['Retry-After'])).toBeGreaterThan(0);
    // Each status says it was answered without Redis.
    expect(answers.every(answeredWithoutRedis)).toBe(true);
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_store_failures_total', 'failure_mode="local"'),
    ).toBe(61);
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_degraded_checks_total', 'reason="admitted"'),
    ).toBe(60);
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_degraded_checks_total', 'reason="minute"'),
    ).toBe(1);
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_degraded')).toBe(1);
    // One log line for the 61 (at most one every 10 s).
    const lines = s
      .output()
      .split('\n')
      .filter((l) => l.includes('Redis unavailable: answering checks'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('failure mode \\"local\\"');
  });

  it('fails open with --failure-mode allow: OK, with the headers of the local counts; logged and counted', async () => {
    const { dead } = await pickFreePorts({ dead: 'tcp' });
    const s = await server(`redis://127.0.0.1:${dead}`, ['--failure-mode', 'allow', '--instance', 'allow']);
    await loaded('allow');
    const started = Date.now();
    const a = await check(DOMAIN, { key_id: 'k' }, undefined, s.client);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(a.code).toBe('OK');
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '59' });
    const past = await check(DOMAIN, { key_id: 'k' }, 60, s.client);
    expect(past.code).toBe('OK');
    expect(past.headers['Retry-After']).toBeUndefined();
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_store_failures_total', 'failure_mode="allow"'),
    ).toBe(2);
    expect(s.output()).toContain('Redis unavailable: answering checks by failure mode \\"allow\\"');
  });

  it('fails closed with --failure-mode deny: OVER_LIMIT with Retry-After 1', async () => {
    const { dead } = await pickFreePorts({ dead: 'tcp' });
    const s = await server(`redis://127.0.0.1:${dead}`, ['--failure-mode', 'deny', '--instance', 'deny']);
    await loaded('deny');
    const a = await check(DOMAIN, { key_id: 'k' }, undefined, s.client);
    expect(a.code).toBe('OVER_LIMIT');
    expect(a.headers).toMatchObject({
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '0',
      'Retry-After': '1',
    });
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_store_failures_total', 'failure_mode="deny"'),
    ).toBe(1);
  });

  it('answers by the failure mode while Redis is away and counts again once it is back', async () => {
    const { port } = await pickFreePorts({ port: 'tcp' });
    const redis = track(await startTestRedis(port));
    const s = await server(`redis://127.0.0.1:${port}`, ['--failure-mode', 'deny', '--instance', 'flap']);
    await loaded('flap');
    await freshMinute(20);
    expect((await check(DOMAIN, { key_id: 'k' }, undefined, s.client)).headers['X-RateLimit-Remaining']).toBe(
      '59',
    );
    await redis.stop();
    const down = await check(DOMAIN, { key_id: 'k' }, undefined, s.client);
    expect(down).toMatchObject({ code: 'OVER_LIMIT', headers: { 'Retry-After': '1' } });
    track(await startTestRedis(port));
    // A fresh Redis (no persistence) starts from zero once the server has reconnected.
    const back = await waitFor('counting to resume', async () => {
      const a = await check(DOMAIN, { key_id: 'k' }, undefined, s.client);
      return a.code === 'OK' ? a : undefined;
    });
    expect(back.headers['X-RateLimit-Remaining']).toBe('59');
    expect(s.output()).toContain('lost the connection to Redis');
  });
});

describe('Redis restarted under load', () => {
  it('answers every check in time by the failure mode while it is away, and counts exactly again once back', async () => {
    const { port } = await pickFreePorts({ port: 'tcp' });
    const redis = track(await startTestRedis(port));
    const s = await server(`redis://127.0.0.1:${port}`, ['--failure-mode', 'allow', '--instance', 'restart']);
    await loaded('restart');
    type Sent = { keyId: string; startedAt: number; tookMs: number; counted: boolean };
    const sent: Sent[] = [];
    let stop = false;
    let n = 0;
    // 8 callers in a loop, each check with a key id of its own (one hit of a 60 per minute plan).
    const worker = async (w: number): Promise<void> => {
      while (!stop) {
        const keyId = `load-${w}-${(n += 1)}`;
        const startedAt = Date.now();
        const answer = await check(DOMAIN, { key_id: keyId }, undefined, s.client);
        // Counted in Redis, or by the failure mode (allow) from local counts: OK with the headers
        // either way; the status's limit name tells them apart.
        expect(answer.code).toBe('OK');
        expect(answer.headers['X-RateLimit-Limit']).toBe('60');
        sent.push({
          keyId,
          startedAt,
          tookMs: Date.now() - startedAt,
          counted: !answeredWithoutRedis(answer),
        });
      }
    };
    const load = Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
    await new Promise((r) => setTimeout(r, 1_500));
    await redis.stop();
    const stoppedAt = Date.now();
    await new Promise((r) => setTimeout(r, 2_000));
    // Redis answers from some moment inside startTestRedis (which returns once its probe has seen a
    // PONG), and a check waiting on the reconnect may be counted then: "away" ends a 200 ms timeout
    // plus a margin before the restart began.
    const restartingAt = Date.now();
    track(await startTestRedis(port));
    const restartedAt = Date.now();
    await waitFor('counting to resume under load', () =>
      Promise.resolve(sent.some((x) => x.startedAt > restartedAt && x.counted) ? true : undefined),
    );
    await new Promise((r) => setTimeout(r, 1_500));
    stop = true;
    await load;

    const before = sent.filter((x) => x.startedAt < stoppedAt - 300);
    const away = sent.filter((x) => x.startedAt > stoppedAt + 300 && x.startedAt < restartingAt - 300);
    const after = sent.filter((x) => x.startedAt > restartedAt);
    expect(before.length).toBeGreaterThan(20);
    // A failure names the checks and their times from the stop, ms (started, took).
    const fromStop = (x: Sent): string => `${x.keyId} ${x.startedAt - stoppedAt}+${x.tookMs} ms`;
    expect(before.filter((x) => !x.counted).map(fromStop)).toEqual([]);
    expect(away.length).toBeGreaterThan(20);
    expect(away.filter((x) => x.counted).map(fromStop)).toEqual([]);
    expect(after.some((x) => x.counted)).toBe(true);
    // Never a wait past the failure mode's deadline (200 ms Redis timeout here, plus scheduling).
    expect(Math.max(...sent.map((x) => x.tookMs))).toBeLessThan(1_000);
    // The new Redis (no persistence) holds exactly the checks it counted: one hit for each key id
    // counted, none for a check answered by the failure mode (local counts are never replayed).
    const client = new Redis({ port, lazyConnect: true });
    try {
      await client.connect();
      const windows = currentWindows(Date.now());
      const days = await client.mget(after.map((x) => counterKeys(DOMAIN, x.keyId, windows).day));
      expect(days.map((v, i) => (after[i]?.counted ? v === '1' : v === null)).every(Boolean)).toBe(true);
    } finally {
      client.disconnect();
    }
    expect(s.output()).toContain('lost the connection to Redis');
  });
});

describe('with a Redis Cluster', () => {
  it("keeps one key's counters in one slot and limits exactly", async () => {
    const ports = Object.values(await pickFreePorts({ a: 'tcp', b: 'tcp', c: 'tcp' }));
    for (const p of ports) track(await startTestRedis(p, true));
    const cli = path.join(path.dirname(realpathSync(path.join(TOOLS_BIN, 'redis-server'))), 'redis-cli');
    await run(
      cli,
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      {
        timeout: 30_000,
      },
    );
    const probe = new Redis(ports[0] ?? 0, '127.0.0.1');
    await waitFor('cluster_state:ok', async () =>
      (await probe.cluster('INFO')).includes('cluster_state:ok') ? true : undefined,
    );
    const s = await server(`redis://127.0.0.1:${ports[0] ?? 0}`, [
      '--redis-cluster',
      '--failure-mode',
      'deny',
      '--instance',
      'cluster',
    ]);
    await loaded('cluster');
    await freshMinute(20);
    // Keys spread over the cluster's three masters; each key's four counters share one slot.
    const keyIds = Array.from({ length: 6 }, (_, i) => `cluster-key-${i}`);
    const slots = new Set<number>();
    for (const keyId of keyIds) {
      const k = counterKeys(DOMAIN, keyId, currentWindows(Date.now()));
      const keySlots = await Promise.all(
        [k.minute, k.day, k.rejected, k.ban].map((key) => probe.cluster('KEYSLOT', key)),
      );
      expect(new Set(keySlots).size).toBe(1);
      slots.add(keySlots[0] ?? -1);
    }
    expect(slots.size).toBeGreaterThan(1);
    for (const keyId of keyIds.slice(0, 2)) {
      const answers = await Promise.all(
        Array.from({ length: 70 }, () => check(DOMAIN, { key_id: keyId }, undefined, s.client)),
      );
      expect(answers.filter((a) => a.code === 'OK')).toHaveLength(60);
      expect(answers.filter((a) => a.code === 'OVER_LIMIT')).toHaveLength(10);
    }
    await probe.quit();
  });
});

describe('a config the service rejects', () => {
  it('shows Enforced=False with the reason while the last good generation stays enforced', async () => {
    const policyNs = unique('rl-rej');
    await createNamespace(policyNs);
    const spec: RateLimitPolicySpec = {
      plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
      defaultPlan: 'free',
    };
    await createPolicy(policyNs, 'api', spec);
    await waitForPolicyCondition(policyNs, 'api', 'Enforced', 'True', 'Loaded');
    // Someone (a hand edit, an operator of another version) writes an entry the server refuses.
    const { core } = clients();
    const cm = await core.readNamespacedConfigMap({
      namespace: 'portico-system',
      name: 'portico-ratelimit-config',
    });
    const config = JSON.parse(cm.data?.['config.json'] ?? '{}') as { policies: CompiledPolicy[] };
    const entry = config.policies.find((p) => p.domain === `${policyNs}/api`);
    if (entry === undefined) throw new Error('the policy is not in the config');
    entry.plans = [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 10 }];
    await core.replaceNamespacedConfigMap({
      namespace: 'portico-system',
      name: 'portico-ratelimit-config',
      body: { ...cm, data: { 'config.json': JSON.stringify(config) } },
    });
    const rejected: RateLimitPolicy = await waitForPolicyCondition(
      policyNs,
      'api',
      'Enforced',
      'False',
      'ConfigRejected',
    );
    const message = rejected.status?.conditions?.find((c) => c.type === 'Enforced')?.message ?? '';
    expect(message).toContain('rejected generation 1');
    expect(message).toContain('requestsPerDay must be at least requestsPerMinute');
    // The server still enforces what it had: the day limit is 1000, not 10.
    const a = await check(`${policyNs}/api`, { key_id: 'k' });
    expect(a.response.statuses[0]?.current_limit?.requests_per_unit).toBe(60);
    // The next change of the policy is compiled and loaded again.
    await updatePolicy(policyNs, 'api', {
      ...spec,
      plans: [{ name: 'free', requestsPerMinute: 30, requestsPerDay: 1000 }],
    });
    await waitForPolicyCondition(policyNs, 'api', 'Enforced', 'True', 'Loaded');
    expect((await check(`${policyNs}/api`, { key_id: 'k2' })).headers['X-RateLimit-Limit']).toBe('30');
    // `kubectl describe ratelimitpolicy` tells the story: Loaded, the Warning, Loaded again.
    const events = await waitFor('the policy Events', async () => {
      const list = await core.listNamespacedEvent({ namespace: policyNs });
      const mine = list.items.filter((e) => e.involvedObject.kind === 'RateLimitPolicy');
      return mine.filter((e) => e.reason === 'Loaded').length >= 2 ? mine : undefined;
    });
    const warning = events.find((e) => e.reason === 'ConfigRejected');
    expect(warning?.type).toBe('Warning');
    expect(warning?.message).toContain('requestsPerDay must be at least requestsPerMinute');
    // Accepted/Compiled shares its status write's one Normal Event (events.ts: recordTransitions).
    expect(events.some((e) => e.type === 'Normal' && (e.message ?? '').includes('Accepted Compiled:'))).toBe(
      true,
    );
  });
});

describe('the RateLimitPolicy CRD', () => {
  const cases: [string, RateLimitPolicySpec, string][] = [
    [
      'defaultPlan among the plans',
      { plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }], defaultPlan: 'gold' },
      'defaultPlan must be the name of one of spec.plans',
    ],
    [
      'requestsPerDay at least requestsPerMinute',
      { plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 59 }], defaultPlan: 'free' },
      'requestsPerDay must be at least requestsPerMinute',
    ],
    [
      'positive integers',
      { plans: [{ name: 'free', requestsPerMinute: 0, requestsPerDay: 1 }], defaultPlan: 'free' },
      'should be greater than or equal to 1',
    ],
    [
      'unique plan names',
      {
        plans: [
          { name: 'free', requestsPerMinute: 1, requestsPerDay: 1 },
          { name: 'free', requestsPerMinute: 2, requestsPerDay: 2 },
        ],
        defaultPlan: 'free',
      },
      'Duplicate value',
    ],
    [
      'a ban duration in h, m and s',
      {
        plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }],
        defaultPlan: 'free',
        ban: { afterRejectedRequests: 5, duration: '15 minutes' },
      },
      'duration must be hours, minutes and seconds',
    ],
    [
      'a ban of at most 7 days',
      {
        plans: [{ name: 'free', requestsPerMinute: 1, requestsPerDay: 1 }],
        defaultPlan: 'free',
        ban: { afterRejectedRequests: 5, duration: '169h' },
      },
      'duration must be from 1s to 168h',
    ],
  ];
  for (const [rule, spec, message] of cases) {
    it(`refuses a policy without ${rule}`, async () => {
      const err = await createPolicyDryRun(spec).catch((e: unknown) => e);
      expect(String((err as { body?: unknown }).body ?? err)).toContain(message);
    });
  }

  it('accepts the example policy of docs/ratelimits.md', async () => {
    await createPolicyDryRun({
      plans: [
        { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
        { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
        { name: 'business', requestsPerMinute: 1000, requestsPerDay: 100000 },
        { name: 'enterprise', requestsPerMinute: 5000, requestsPerDay: 2000000 },
      ],
      defaultPlan: 'free',
      overrides: [{ keyId: 'acme-corp-prod', requestsPerMinute: 20000, requestsPerDay: 20000000 }],
      ban: { afterRejectedRequests: 20, duration: '15m' },
    });
  });
});

async function createPolicyDryRun(spec: RateLimitPolicySpec): Promise<void> {
  await clients().custom.createNamespacedCustomObject({
    group: 'portico.dev',
    version: 'v1alpha1',
    plural: 'ratelimitpolicies',
    namespace: ns,
    dryRun: 'All',
    body: { apiVersion: 'portico.dev/v1alpha1', kind: 'RateLimitPolicy', metadata: { name: 'dry' }, spec },
  });
}
