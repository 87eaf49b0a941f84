/**
 * The rate-limit service's metrics after real flows (#12, docs/monitoring.md): decisions by policy
 * and result, bans active while a ban runs, Redis command latency and errors, and the config loaded
 * (its hash per shard, a refused document). A `portico ratelimit-server` of this test's own (from
 * dist/), on a redis-server of its own, reading a config ConfigMap in a namespace of this test, so
 * its counters start at zero.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderCompiledConfig, type CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
  check,
  clients,
  createNamespace,
  freshMinute,
  metricValue,
  startTestRedis,
  startTestServer,
  type TestProcess,
  type TestServer,
} from './ratelimit-helpers.js';

const ns = unique('rl-met');
const DOMAIN = `${ns}/api`;
const CONFIG = 'portico-ratelimit-config';
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 2, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
  ban: { afterRejectedRequests: 1, durationSeconds: 2 },
};
const DOCUMENT = renderCompiledConfig([ENTRY]);

const started: TestProcess[] = [];
let redis: TestProcess;
let server: TestServer;

/** The first 48 bits of the SHA-256 of `text`, as the docs say the config hash is made. */
function expectedHash(text: string): number {
  return createHash('sha256').update(text).digest().readUIntBE(0, 6);
}

beforeAll(async () => {
  await createNamespace(ns);
  await clients().core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: { name: CONFIG, labels: { 'app.kubernetes.io/component': 'ratelimit' } },
      data: { 'config.json': DOCUMENT },
    },
  });
  const { port } = await pickFreePorts({ port: 'tcp' });
  redis = await startTestRedis(port);
  started.push(redis);
  server = await startTestServer([
    '--redis-url',
    `redis://127.0.0.1:${port}`,
    '--config-namespace',
    ns,
    '--redis-timeout-ms',
    '200',
    '--instance',
    'metrics',
  ]);
  started.push(server);
  await waitFor('the config loaded', async () =>
    (await metricValue(server.metricsUrl, 'portico_ratelimit_policies')) === 1 ? true : undefined,
  );
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
});

describe("the rate-limit service's /metrics", () => {
  it('shows the config in force by its hash, and a refused document by last_load_successful 0', async () => {
    const shard = `shard="${CONFIG}"`;
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_config_hash', shard)).toBe(
      expectedHash(DOCUMENT),
    );
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_config_last_load_successful', shard)).toBe(
      1,
    );
    const loadedAt = await metricValue(
      server.metricsUrl,
      'portico_ratelimit_config_last_load_success_timestamp_seconds',
      shard,
    );
    expect(Math.abs(loadedAt - Date.now() / 1000)).toBeLessThan(120);
  });

  it('counts decisions by policy and result, a ban while it runs, and Redis command latency', async () => {
    await freshMinute(10);
    const codes: string[] = [];
    // Two admitted, one refused (the first refusal), then the second refusal bans the key.
    for (let i = 0; i < 4; i++)
      codes.push((await check(DOMAIN, { key_id: 'k' }, undefined, server.client)).code);
    expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    const decisions = (code: string, reason: string): Promise<number> =>
      metricValue(
        server.metricsUrl,
        'portico_ratelimit_checks_total',
        `{domain="${DOMAIN}",code="${code}",reason="${reason}"}`,
      );
    expect(await decisions('OK', 'admitted')).toBe(2);
    expect(await decisions('OVER_LIMIT', 'minute')).toBe(1);
    expect(await decisions('OVER_LIMIT', 'banned')).toBe(1);
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_bans_total', `domain="${DOMAIN}"`)).toBe(
      1,
    );
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_bans_active', `domain="${DOMAIN}"`)).toBe(
      1,
    );
    expect(
      await metricValue(
        server.metricsUrl,
        'portico_ratelimit_redis_command_duration_seconds_count',
        'command="check"',
      ),
    ).toBe(4);
    expect(
      await metricValue(
        server.metricsUrl,
        'portico_ratelimit_redis_command_duration_seconds_count',
        'command="time"',
      ),
    ).toBeGreaterThanOrEqual(1);
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_redis_errors_total')).toBe(0);
    // The ban lasts 2 s; then it is no longer active.
    await waitFor(
      'the ban to run out',
      async () =>
        (await metricValue(server.metricsUrl, 'portico_ratelimit_bans_active', `domain="${DOMAIN}"`)) === 0
          ? true
          : undefined,
      5_000,
    );
  });

  it('counts Redis errors by command and kind while Redis is away', async () => {
    await redis.stop();
    const a = await check(DOMAIN, { key_id: 'k-away' }, undefined, server.client);
    expect(a.code).toBe('OK');
    expect(
      await metricValue(
        server.metricsUrl,
        'portico_ratelimit_redis_errors_total',
        'command="check",error="connection"',
      ),
    ).toBeGreaterThanOrEqual(1);
    expect(
      await metricValue(server.metricsUrl, 'portico_ratelimit_store_failures_total', 'failure_mode="local"'),
    ).toBe(1);
  });

  it('keeps the hash of the document in force when the next one is refused whole', async () => {
    const { core } = clients();
    const cm = await core.readNamespacedConfigMap({ namespace: ns, name: CONFIG });
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: CONFIG,
      body: { ...cm, data: { 'config.json': '{"schemaVersion": 99, "policies": []}' } },
    });
    const shard = `shard="${CONFIG}"`;
    await waitFor('the refused document counted', async () =>
      (await metricValue(server.metricsUrl, 'portico_ratelimit_config_last_load_successful', shard)) === 0
        ? true
        : undefined,
    );
    expect(await metricValue(server.metricsUrl, 'portico_ratelimit_config_hash', shard)).toBe(
      expectedHash(DOCUMENT),
    );
    expect(
      await metricValue(server.metricsUrl, 'portico_ratelimit_config_loads_total', 'result="rejected"'),
    ).toBe(1);
  });
});
