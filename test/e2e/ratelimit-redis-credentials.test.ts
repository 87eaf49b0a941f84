/**
 * A Redis password rotated without a restart (docs/ratelimits.md, "Rotating the Redis password"), on
 * a real redis-server with an ACL user: the server reads its password from a file laid out as the
 * kubelet mounts a Secret (`password -> ..data/password`, `..data` swapped by an atomic rename), and
 * the test rotates it as an operator would: `ACL SETUSER u >B`, the Secret's file rewritten to B,
 * `ACL SETUSER u <A`; then `CLIENT KILL USER u` forces the reconnect. With the file changed the
 * server reconnects with B and counts in Redis again, in the same process; without the change (the
 * control case) the reconnect is refused and checks are answered from local counts, until the file
 * changes.
 */
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { counterKeys } from '../../src/ratelimit/redis-keys.js';
import { currentWindows } from '../../src/ratelimit/windows.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
  answeredWithoutRedis,
  createRedisCluster,
  check,
  createNamespaceWithConfig,
  freshMinute,
  metricValue,
  waitForMetric,
  startTestRedis,
  startTestServer,
  waitUntilLoaded,
  type TestProcess,
  type TestServer,
} from './ratelimit-helpers.js';

const ns = unique('rl-cred');
const DOMAIN = `${ns}/api`;
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 10_000, requestsPerDay: 100_000 }],
  defaultPlan: 'free',
  overrides: [],
};

const started: TestProcess[] = [];
let port = 0;
let admin: Redis;

/**
 * A directory as the kubelet mounts a Secret: `password -> ..data/password`, `..data` a symlink to
 * a timestamped directory; `update` writes a new directory and renames a new symlink over `..data`.
 */
function secretVolume(password: string): { file: string; update(password: string): void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'portico-redis-secret-'));
  let n = 0;
  const write = (value: string): void => {
    n += 1;
    const ts = `..2026_11_28_05_00_${String(n).padStart(2, '0')}.${process.pid}`;
    mkdirSync(path.join(dir, ts));
    writeFileSync(path.join(dir, ts, 'password'), value);
    symlinkSync(ts, path.join(dir, '..data_tmp'));
    renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  };
  write(password);
  symlinkSync(path.join('..data', 'password'), path.join(dir, 'password'));
  return { file: path.join(dir, 'password'), update: write };
}

async function server(
  instance: string,
  user: string,
  passwordFile: string,
  redis: readonly string[] = ['--redis-url', `redis://127.0.0.1:${port}`],
): Promise<TestServer> {
  const s = await startTestServer([
    '--config-namespace',
    ns,
    '--redis-timeout-ms',
    '200',
    '--instance',
    instance,
    ...redis,
    '--redis-username',
    user,
    '--redis-password-file',
    passwordFile,
  ]);
  started.push(s);
  await waitUntilLoaded(ns, instance, ENTRY);
  await waitForMetric(
    s.metricsUrl,
    'portico_ratelimit_redis_connected',
    '',
    (v) => v === 1,
    'the server to connect to Redis',
  );
  return s;
}

/** The count of `key` in Redis's minute window now (0 when none). */
async function counted(key: string): Promise<number> {
  return Number((await admin.get(counterKeys(DOMAIN, key, currentWindows(Date.now())).minute)) ?? 0);
}

/** One check of `key`: whether Redis answered it (not the failure mode). */
async function countedInRedis(s: TestServer, key: string): Promise<boolean> {
  const a = await check(DOMAIN, { key_id: key }, undefined, s.client);
  expect(a.code).toBe('OK');
  return !answeredWithoutRedis(a);
}

beforeAll(async () => {
  port = (await pickFreePorts({ redis: 'tcp' })).redis;
  started.push(await startTestRedis(port));
  admin = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  await createNamespaceWithConfig(ns, [ENTRY]);
});

afterAll(async () => {
  admin.disconnect();
  for (const p of started.reverse()) await p.stop();
});

describe('a Redis password rotated in the Secret', () => {
  it('is used after CLIENT KILL: counted in Redis again with the new password, same process, no auth error', async () => {
    const user = 'rotated';
    await admin.acl('SETUSER', user, 'on', '>password-A', '~*', '&*', '+@all');
    const volume = secretVolume('password-A');
    const s = await server('cred-rotated', user, volume.file);
    const pid = s.child.pid;
    await freshMinute(25);
    const key = 'rotated-key';
    expect(await countedInRedis(s, key)).toBe(true);
    expect(await counted(key)).toBe(1);

    // The operator's rotation: add B, rewrite the Secret, wait for the reload, remove A.
    await admin.acl('SETUSER', user, '>password-B');
    volume.update('password-B\n');
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_credential_reloads_total',
      'result="loaded"',
      (v) => v === 1,
      'the reload in the metric',
    );
    expect(s.output()).toContain('reloaded the Redis credentials');
    await admin.acl('SETUSER', user, '<password-A');
    // The authenticated connection survives the ACL change: still counted in Redis.
    expect(await countedInRedis(s, key)).toBe(true);
    expect(await counted(key)).toBe(2);

    const killed = Number(await admin.client('KILL', 'USER', user));
    expect(killed).toBeGreaterThanOrEqual(1);
    // Checks while it reconnects may be answered locally; then Redis counts them again.
    await waitFor(
      'checks counted in Redis again',
      async () => ((await countedInRedis(s, key)) ? true : undefined),
      10_000,
      50,
    );
    const before = await counted(key);
    for (let i = 0; i < 5; i += 1) expect(await countedInRedis(s, key)).toBe(true);
    expect(await counted(key)).toBe(before + 5);
    // Same process, never refused.
    expect(s.child.pid).toBe(pid);
    expect(s.child.exitCode).toBeNull();
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connection_errors_total', 'reason="auth"'),
    ).toBe(0);
    expect(
      s
        .output()
        .split('\n')
        .filter((l) => l.includes('connected to Redis')).length,
    ).toBeGreaterThanOrEqual(2);
  });

  it('control: without the file changed the reconnect is refused and checks are answered locally, until the file changes', async () => {
    const user = 'unrotated';
    await admin.acl('SETUSER', user, 'on', '>password-A', '~*', '&*', '+@all');
    const volume = secretVolume('password-A');
    const s = await server('cred-unrotated', user, volume.file);
    const pid = s.child.pid;
    await freshMinute(25);
    const key = 'unrotated-key';
    expect(await countedInRedis(s, key)).toBe(true);

    await admin.acl('SETUSER', user, '>password-B', '<password-A');
    await admin.client('KILL', 'USER', user);
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="auth"',
      (v) => v > 0,
      'an auth error in the metric',
    );
    const before = await counted(key);
    for (let i = 0; i < 5; i += 1) expect(await countedInRedis(s, key)).toBe(false);
    expect(await counted(key)).toBe(before);
    expect(s.output()).toContain(
      'Redis refused the username or password (check the Secret of --redis-password-file',
    );

    // A file that cannot be used keeps the credentials, with a clear error.
    volume.update('');
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_credential_reloads_total',
      'result="failed"',
      (v) => v === 1,
      'the failed reload in the metric',
    );
    expect(s.output()).toContain('cannot read a Redis credential file: the previous credentials stay in use');

    // The file changed: the next reconnect (ioredis retries at most 2 s apart) uses B.
    volume.update('password-B');
    await waitFor(
      'checks counted in Redis again',
      async () => ((await countedInRedis(s, key)) ? true : undefined),
      10_000,
      100,
    );
    expect(s.child.pid).toBe(pid);
    expect(s.child.exitCode).toBeNull();
  });
});

describe('a Redis Cluster password rotated in the Secret', () => {
  it(
    'is used by every node after CLIENT KILL on each: counted in Redis again, same process, no auth error',
    { timeout: 60_000 },
    async () => {
      const ports = Object.values(await pickFreePorts({ a: 'tcp', b: 'tcp', c: 'tcp' }));
      for (const p of ports) started.push(await startTestRedis(p, true));
      await createRedisCluster(ports);
      const nodes = ports.map((p) => new Redis(p, '127.0.0.1', { maxRetriesPerRequest: 1 }));
      try {
        await waitFor('cluster_state:ok on every node', async () => {
          for (const n of nodes)
            if (!(await n.cluster('INFO')).includes('cluster_state:ok')) return undefined;
          return true;
        });
        const user = 'cluster-rotated';
        for (const n of nodes) await n.acl('SETUSER', user, 'on', '>password-A', '~*', '&*', '+@all');
        const volume = secretVolume('password-A');
        const s = await server('cred-cluster', user, volume.file, [
          '--redis-url',
          `redis://127.0.0.1:${ports[0] ?? 0}`,
          '--redis-cluster',
          '--redis-cluster-nodes',
          ports
            .slice(1)
            .map((p) => `127.0.0.1:${p}`)
            .join(','),
        ]);
        const pid = s.child.pid;
        await freshMinute(25);
        // Key ids on each of the three primaries.
        const keyIds = Array.from({ length: 12 }, (_, i) => `cluster-rotated-${i}`);
        for (const k of keyIds) expect(await countedInRedis(s, k)).toBe(true);

        for (const n of nodes) await n.acl('SETUSER', user, '>password-B');
        volume.update('password-B');
        await waitForMetric(
          s.metricsUrl,
          'portico_ratelimit_redis_credential_reloads_total',
          'result="loaded"',
          (v) => v === 1,
          'the reload in the metric',
        );
        for (const n of nodes) await n.acl('SETUSER', user, '<password-A');
        let killed = 0;
        for (const n of nodes) killed += Number(await n.client('KILL', 'USER', user));
        expect(killed).toBeGreaterThanOrEqual(3);
        await waitFor(
          'every key counted in Redis again',
          async () => {
            for (const k of keyIds) if (!(await countedInRedis(s, k))) return undefined;
            return true;
          },
          20_000,
          100,
        );
        // Each key's primary counts it: one more check of each is one more count on its node.
        const slotMap = await nodes[0]?.cluster('SLOTS');
        const ownerOf = (key: string): Redis | undefined => {
          const slot = calculateSlot(key);
          const p = slotMap?.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1] ?? -1;
          return nodes[ports.indexOf(p)];
        };
        const countOf = async (k: string): Promise<number> => {
          const key = counterKeys(DOMAIN, k, currentWindows(Date.now())).minute;
          return Number((await ownerOf(key)?.get(key)) ?? 0);
        };
        const owners = new Set(
          keyIds.map((k) => ownerOf(counterKeys(DOMAIN, k, currentWindows(Date.now())).minute)),
        );
        expect(owners.size).toBe(3);
        for (const k of keyIds) {
          const before = await countOf(k);
          expect(await countedInRedis(s, k)).toBe(true);
          expect(await countOf(k)).toBe(before + 1);
        }
        expect(s.child.pid).toBe(pid);
        expect(s.child.exitCode).toBeNull();
        expect(
          await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connection_errors_total', 'reason="auth"'),
        ).toBe(0);
      } finally {
        for (const n of nodes) n.disconnect();
      }
    },
  );
});
