/**
 * The rate-limit server on a highly available Redis, real processes on loopback (Debian's
 * redis-server and redis-sentinel):
 *
 * - Sentinel: a primary, a replica and three sentinels; the server in Sentinel mode answers a steady
 *   load from gRPC callers; the primary is killed (SIGKILL). Measured and asserted against the bounds
 *   of docs/ratelimits.md ("Redis Sentinel: what a failover costs"), derived from the sentinels'
 *   settings below: checks that failed (none: the failure mode answers each), the time until checks
 *   are counted in Redis again, and the counts lost (the primary's writes the replica never got).
 * - Cluster: three primaries without replicas (`cluster-require-full-coverage no`); one is killed;
 *   keys whose slots the others serve go on being counted in Redis, keys of the dead one's slots are
 *   answered from local counts, with the headers.
 * - Cluster with replicas: three primaries each with a replica (`cluster-node-timeout 1000`); the
 *   primary of a loaded key's slot is killed; measured and asserted against the bounds of
 *   docs/ratelimits.md ("Redis Cluster"): no failed check, the time until the replica is promoted and
 *   checks of the key are counted in Redis again, the counts lost.
 *
 * - A sentinel that names a primary nobody can reach: local answers with the headers at once.
 * - A sentinel that requires a password: with it, counted on the primary it names; with a wrong one,
 *   local answers with the headers, a log line naming the sentinel password flag and the metric, the
 *   process running on; with a wrong one in a file that is then corrected, the same process finds the
 *   primary.
 *
 * The failover and the Clusters take 20-60 s each and run with PORTICO_E2E_SLOW=1; without it they
 * are reported as skipped, and of the Sentinel cases only the first runs: the server finds the
 * primary through the sentinels and counts there.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import type { RateLimitClient } from '../../src/ratelimit/grpc.js';
import { counterKeys } from '../../src/ratelimit/redis-keys.js';
import { DEGRADED_STATUS_NAME } from '../../src/ratelimit/service.js';
import { currentWindows } from '../../src/ratelimit/windows.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { redisArgs, redisPingProbe } from '../../src/sandbox/redis.js';
import { unique, waitFor } from './support/cluster.js';
import {
  answeredWithoutRedis,
  clusterNodeArgs,
  createRedisCluster,
  TOOLS_BIN,
  check,
  createNamespaceWithConfig,
  freshMinute,
  metricValue,
  waitForMetric,
  startProcess,
  startTestServer,
  waitUntilLoaded,
  type TestProcess,
  type TestServer,
} from './ratelimit-helpers.js';

const SLOW = process.env.PORTICO_E2E_SLOW === '1';

const ns = unique('rl-ha');
const DOMAIN = `${ns}/api`;
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  // Far above what the load sends: every check is admitted, so each admitted one is one count.
  plans: [{ name: 'free', requestsPerMinute: 1_000_000, requestsPerDay: 10_000_000 }],
  defaultPlan: 'free',
  overrides: [],
};

/** The sentinels' settings the bounds derive from (docs/ratelimits.md). */
const DOWN_AFTER_MS = 1_000;
const FAILOVER_TIMEOUT_MS = 3_000;
/**
 * Kill to the first check counted in Redis again, at most: the primary seen down by each sentinel
 * (down-after-milliseconds), the failover start spread by up to 1 s across sentinels
 * (SENTINEL_MAX_DESYNC in sentinel.c), one failed leader election retried after twice
 * failover-timeout, two 1 s INFO periods for the promotion to be seen, and the client's reconnect
 * delay (ioredis: at most 2 s between attempts).
 */
const RECOVERY_BOUND_MS = DOWN_AFTER_MS + 1_000 + 2 * FAILOVER_TIMEOUT_MS + 2 * 1_000 + 2_000;
/** Callers of the steady load, each with one check in flight at a time. */
const CALLERS = 8;
/** The bound on counts lost or counted without an answer from Redis: one check in flight per caller. */
const COUNTS_BOUND = CALLERS;

/**
 * Redis Cluster with replicas: `cluster-node-timeout` of the test's nodes, and the bound on the time
 * from killing a primary to the first check counted in Redis again (docs/ratelimits.md, "Redis
 * Cluster"): the primary seen failing by the others and the failure agreed by a majority of the
 * primaries (at most 2 x the node timeout: PFAIL after one timeout, the reports gossiped within
 * another), the replica's election delay (500 ms + up to 500 ms at rank 0), one lost election retried
 * (max(2 x node timeout, 2 s)), the breaker's 1 s open before it probes again and two probes that
 * time out (2 x --redis-timeout-ms).
 */
const CLUSTER_NODE_TIMEOUT_MS = 1_000;
// The service's default. At 200 ms a loaded machine (the e2e shards side by side) saw checks of a
// healthy Redis answered from local counts before any kill.
const SERVER_REDIS_TIMEOUT_MS = 500;
const CLUSTER_RECOVERY_BOUND_MS =
  2 * CLUSTER_NODE_TIMEOUT_MS +
  1_000 +
  Math.max(2 * CLUSTER_NODE_TIMEOUT_MS, 2_000) +
  1_000 +
  2 * SERVER_REDIS_TIMEOUT_MS;

const started: TestProcess[] = [];
function track<T extends TestProcess>(p: T): T {
  started.push(p);
  return p;
}

const dir = mkdtempSync(path.join(tmpdir(), 'portico-redis-ha-'));

/** A redis-server of this test on `port`, with `extra` flags; waits until it answers PING. */
async function redisServer(port: number, extra: readonly string[] = []): Promise<TestProcess> {
  const data = mkdtempSync(path.join(dir, `redis-${port}-`));
  const proc = track(
    startProcess(path.join(TOOLS_BIN, 'redis-server'), [...redisArgs(port, data), ...extra]),
  );
  const probe = redisPingProbe(`127.0.0.1:${port}`);
  await waitFor(
    `redis-server on ${port}`,
    async () => ((await probe()) === true ? true : undefined),
    10_000,
    50,
  );
  return proc;
}

/** A redis-sentinel on `port` watching the primary at `primaryPort` as `master`, quorum 2. */
function sentinel(port: number, primaryPort: number, master: string): TestProcess {
  const conf = path.join(dir, `sentinel-${port}.conf`);
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${master} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${master} ${DOWN_AFTER_MS}`,
      `sentinel failover-timeout ${master} ${FAILOVER_TIMEOUT_MS}`,
      `sentinel parallel-syncs ${master} 1`,
      '',
    ].join('\n'),
  );
  return track(startProcess(path.join(TOOLS_BIN, 'redis-sentinel'), [conf]));
}

/** A rate-limit server of this test, reading this test's config. */
async function server(instance: string, extra: readonly string[]): Promise<TestServer> {
  const s = track(
    await startTestServer([
      '--config-namespace',
      ns,
      '--redis-timeout-ms',
      String(SERVER_REDIS_TIMEOUT_MS),
      '--instance',
      instance,
      ...extra,
    ]),
  );
  await waitUntilLoaded(ns, instance, ENTRY);
  return s;
}

beforeAll(async () => {
  await createNamespaceWithConfig(ns, [ENTRY]);
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
});

/** One answer of the load: from Redis, from local counts, or an error (no answer). */
interface Sample {
  readonly startMs: number;
  readonly endMs: number;
  readonly source: 'redis' | 'local' | 'error';
  readonly code: string;
}

/** A steady load: CALLERS loops, each one check at a time and 10 ms between checks. */
function steadyLoad(
  client: RateLimitClient,
  keyId: string,
): { samples: Sample[]; stop: () => Promise<void> } {
  const samples: Sample[] = [];
  let running = true;
  const loop = async (): Promise<void> => {
    while (running) {
      const startMs = performance.now();
      try {
        const r = await client.shouldRateLimit(
          { domain: DOMAIN, descriptors: [{ entries: [{ key: 'key_id', value: keyId }] }] },
          2_000,
        );
        const local = r.statuses[0]?.current_limit?.name === DEGRADED_STATUS_NAME;
        samples.push({
          startMs,
          endMs: performance.now(),
          source: local ? 'local' : 'redis',
          code: r.overall_code,
        });
      } catch {
        samples.push({ startMs, endMs: performance.now(), source: 'error', code: 'ERROR' });
      }
      await sleep(10);
    }
  };
  const loops = Array.from({ length: CALLERS }, () => loop());
  return {
    samples,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** What a steady load saw around a kill: split by when and where each check was answered. */
interface AfterTheKill {
  /** The first check started after the kill and counted in Redis. */
  readonly recovered: Sample;
  /** From the kill to `recovered`'s answer, ms. */
  readonly recoveryMs: number;
  /** Checks answered before the kill. */
  readonly before: Sample[];
  readonly failed: Sample[];
  readonly local: Sample[];
  /** Checks Redis counted and admitted (OK), the whole run. */
  readonly admittedByRedis: number;
}

/** When `x` was sent and answered, as `start..end` ms from the kill signal. */
function fromTheSignal(x: Sample, kill: Kill): string {
  return `${Math.round(x.startMs - kill.signalledMs)}..${Math.round(x.endMs - kill.signalledMs)} ms`;
}

/**
 * The checks of `local` answered outside the outage, each as `start..end` ms from the kill signal:
 * ended before the signal, or started after `recovered` was answered. Empty when every local answer
 * fell in the outage (the failure message then shows which did not, and when).
 */
function outsideTheOutage(local: readonly Sample[], kill: Kill, recovered: Sample): string[] {
  return local
    .filter((x) => x.endMs < kill.signalledMs || x.startMs > recovered.endMs)
    .map((x) => `${fromTheSignal(x, kill)} (recovered ${fromTheSignal(recovered, kill)})`);
}

/**
 * The checks of `samples` that Redis did not count, each as `<source> start..end` ms from the kill
 * signal: empty on a healthy run. For the checks before the kill, the times show whether they crowd
 * the signal (a late kill seen) or not (a stall of Redis beforehand).
 */
function notCountedInRedis(samples: readonly Sample[], kill: Kill): string[] {
  return samples.filter((x) => x.source !== 'redis').map((x) => `${x.source} ${fromTheSignal(x, kill)}`);
}

/** When a kill was signalled and when this process saw the exit, performance.now() (ms). */
interface Kill {
  readonly signalledMs: number;
  readonly exitedMs: number;
}

/**
 * Sends SIGKILL to `child` and resolves once it has exited. Recovery counts from the exit seen, not
 * from the signal: until the kernel reaps the process its sockets stay open, and a check sent in
 * between can still be answered by Redis, which would mark a recovery before the outage began. The
 * healthy time before the outage ends at the signal: on a loaded machine this process sees the exit
 * late, while the rate-limit server has already lost the connection and answers locally.
 */
async function killAndAwaitExit(child: ChildProcess): Promise<Kill> {
  if (child.exitCode !== null || child.signalCode !== null) throw new Error('the process had already exited');
  const exited = once(child, 'exit');
  const signalledMs = performance.now();
  child.kill('SIGKILL');
  await exited;
  return { signalledMs, exitedMs: performance.now() };
}

/**
 * Waits (up to `boundMs` + 10 s) for the first check started after the exit was seen to be
 * counted in Redis, lets the load run 2 s more, stops it, and splits its samples.
 *
 * @throws Error when no check is counted in Redis within that time
 */
async function afterTheKill(
  load: { samples: Sample[]; stop: () => Promise<void> },
  kill: Kill,
  boundMs: number,
): Promise<AfterTheKill> {
  const killMs = kill.exitedMs;
  const recovered = await waitFor(
    'a check counted in Redis after the kill',
    () => load.samples.find((x) => x.startMs > killMs && x.source === 'redis'),
    boundMs + 10_000,
    50,
  );
  await sleep(2_000);
  await load.stop();
  return {
    recovered,
    recoveryMs: recovered.endMs - killMs,
    before: load.samples.filter((x) => x.endMs < kill.signalledMs),
    failed: load.samples.filter((x) => x.source === 'error'),
    local: load.samples.filter((x) => x.source === 'local'),
    admittedByRedis: load.samples.filter((x) => x.source === 'redis' && x.code === 'OK').length,
  };
}

/** Flat `[field, value, ...]` of a SENTINEL reply as a record. */
function fields(reply: unknown): Record<string, string> {
  const list = reply as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i] ?? ''] = list[i + 1] ?? '';
  return out;
}

describe('Redis Sentinel', () => {
  /** What the first test started, for the second (slow) one; undefined: it did not get that far. */
  let sentinels:
    { master: string; replicaPort: number; primary: TestProcess; ask: Redis; s: TestServer } | undefined;
  afterAll(() => sentinels?.ask.disconnect());

  it('finds the primary through the sentinels and counts there', { timeout: 120_000 }, async () => {
    const master = 'counters';
    const ports = await pickFreePorts({ primary: 'tcp', replica: 'tcp', s1: 'tcp', s2: 'tcp', s3: 'tcp' });
    const primary = await redisServer(ports.primary);
    await redisServer(ports.replica, ['--replicaof', '127.0.0.1', String(ports.primary)]);
    const sentinelPorts = [ports.s1, ports.s2, ports.s3];
    for (const p of sentinelPorts) sentinel(p, ports.primary, master);
    const ask = new Redis(ports.s1, '127.0.0.1', { maxRetriesPerRequest: 1 });
    // Each sentinel must know the replica and the two other sentinels before a failover can happen.
    await waitFor(
      'the sentinels to see the replica and each other',
      async () => {
        const m = fields(await ask.call('SENTINEL', 'MASTER', master));
        return Number(m['num-slaves']) >= 1 && Number(m['num-other-sentinels']) >= 2 ? true : undefined;
      },
      30_000,
      200,
    );
    // A sentinel whose timer ticks come more than 2 s apart (a starved CI machine) enters TILT mode
    // and takes no failover decision for 30 s, past RECOVERY_BOUND_MS. The bound is about Sentinel
    // on a machine that keeps time, so the test's sentinels tolerate 10 s gaps (redis-sentinel 7.0:
    // SENTINEL DEBUG tilt-trigger, milliseconds).
    for (const p of sentinelPorts) {
      const one = new Redis(p, '127.0.0.1', { maxRetriesPerRequest: 1 });
      try {
        expect(await one.call('SENTINEL', 'DEBUG', 'tilt-trigger', '10000')).toBe('OK');
      } finally {
        one.disconnect();
      }
    }
    const s = await server('sentinel', [
      '--redis-sentinels',
      sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      '--redis-sentinel-master-name',
      master,
    ]);
    sentinels = { master, replicaPort: ports.replica, primary, ask, s };
    await freshMinute(10);
    const first = await check(DOMAIN, { key_id: 'warm' }, undefined, s.client);
    expect(first.response.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(first.headers['X-RateLimit-Remaining']).toBe('999999');
    const onPrimary = new Redis(ports.primary, '127.0.0.1');
    const warmKeys = counterKeys(DOMAIN, 'warm', currentWindows(Date.now()));
    expect(await onPrimary.get(warmKeys.minute)).toBe('1');
    onPrimary.disconnect();
  });

  it.skipIf(!SLOW)(
    'survives the primary killed under load: no failed check, recovery and lost counts within the documented bounds (slow)',
    { timeout: 120_000 },
    async () => {
      if (!sentinels) throw new Error('the test before this one did not start the sentinels');
      const { master, replicaPort, primary, ask, s } = sentinels;
      await freshMinute(45);
      const keyId = 'failover';
      const load = steadyLoad(s.client, keyId);
      await sleep(3_000);
      const kill = await killAndAwaitExit(primary.child);
      const { recovered, recoveryMs, before, failed, local, admittedByRedis } = await afterTheKill(
        load,
        kill,
        RECOVERY_BOUND_MS,
      );

      // The sentinels now name the replica as the primary; read the counts there.
      const addr = (await ask.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master)) as string[];
      expect(Number(addr[1])).toBe(replicaPort);
      const promoted = new Redis(replicaPort, '127.0.0.1');
      const firstMinute = currentWindows(Date.now() - 60_000).minute.index;
      const lastMinute = currentWindows(Date.now()).minute.index;
      let counted = 0;
      for (let m = firstMinute; m <= lastMinute; m++) {
        const key = counterKeys(DOMAIN, keyId, currentWindows(m * 60_000)).minute;
        counted += Number((await promoted.get(key)) ?? '0');
      }
      promoted.disconnect();
      const report = {
        checks: load.samples.length,
        failed: failed.length,
        answeredLocally: local.length,
        recoveryMs: Math.round(recoveryMs),
        recoveryBoundMs: RECOVERY_BOUND_MS,
        admittedByRedis,
        countedInRedis: counted,
        lost: admittedByRedis - counted,
      };
      console.log(`sentinel failover: ${JSON.stringify(report)}`);

      expect(before.length).toBeGreaterThan(100);
      expect(notCountedInRedis(before, kill)).toEqual([]);
      expect(failed).toEqual([]);
      expect(local.length).toBeGreaterThan(0);
      expect(recoveryMs).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
      // Every check answered locally was sent between the kill and the recovery.
      expect(outsideTheOutage(local, kill, recovered)).toEqual([]);
      expect(Math.abs(admittedByRedis - counted)).toBeLessThanOrEqual(COUNTS_BOUND);
      expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(1);
    },
  );
});

describe('a sentinel that names an unreachable primary', () => {
  it('answers from local counts with the headers at once, not after a hang, and says why', async () => {
    const master = 'nowhere';
    const ports = await pickFreePorts({ dead: 'tcp', s: 'tcp' });
    // Sentinel keeps naming a primary it cannot reach while no replica can take over.
    const conf = path.join(dir, `sentinel-${ports.s}.conf`);
    writeFileSync(
      conf,
      [
        `port ${ports.s}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${master} 127.0.0.1 ${ports.dead} 1`,
        '',
      ].join('\n'),
    );
    track(startProcess(path.join(TOOLS_BIN, 'redis-sentinel'), [conf]));
    await waitFor(
      'the sentinel to answer',
      async () => ((await redisPingProbe(`127.0.0.1:${ports.s}`)()) === true ? true : undefined),
      10_000,
      50,
    );
    const s = await server('sentinel-nowhere', [
      '--redis-sentinels',
      `127.0.0.1:${ports.s}`,
      '--redis-sentinel-master-name',
      master,
    ]);
    const startMs = performance.now();
    const a = await check(DOMAIN, { key_id: 'nowhere' }, undefined, s.client);
    // The Redis timeout is 500 ms; no connection means no wait at all.
    expect(performance.now() - startMs).toBeLessThan(1_000);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '1000000', 'X-RateLimit-Remaining': '999999' });
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      '',
      (v) => v > 0,
      'a connection error in the metric',
    );
    expect(s.output()).toContain('Redis connection error');
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(0);
    expect(s.child.exitCode).toBeNull();
  });
});

describe('sentinels that require a password (requirepass in sentinel.conf)', () => {
  const master = 'guarded';
  const SENTINEL_PASSWORD = 'sentinel-secret';
  let sentinelAddress = '';
  let primaryPort = 0;

  beforeAll(async () => {
    const ports = await pickFreePorts({ primary: 'tcp', s: 'tcp' });
    primaryPort = ports.primary;
    await redisServer(ports.primary);
    const conf = path.join(dir, `sentinel-${ports.s}.conf`);
    writeFileSync(
      conf,
      [
        `port ${ports.s}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `requirepass ${SENTINEL_PASSWORD}`,
        `sentinel monitor ${master} 127.0.0.1 ${ports.primary} 1`,
        '',
      ].join('\n'),
    );
    track(startProcess(path.join(TOOLS_BIN, 'redis-sentinel'), [conf]));
    sentinelAddress = `127.0.0.1:${ports.s}`;
    const ask = new Redis(ports.s, '127.0.0.1', { password: SENTINEL_PASSWORD, maxRetriesPerRequest: 1 });
    // It may try before the sentinel listens; waitFor asks again.
    ask.on('error', () => undefined);
    try {
      await waitFor(
        'the sentinel to name the primary',
        async () => {
          const addr = (await ask.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master)) as string[] | null;
          return addr?.[1] === String(ports.primary) ? true : undefined;
        },
        10_000,
        100,
      );
    } finally {
      ask.disconnect();
    }
  });

  it('with the password from the environment: finds the primary through the sentinel and counts there', async () => {
    const s = await server('sentinel-auth', [
      '--redis-sentinels',
      sentinelAddress,
      '--redis-sentinel-master-name',
      master,
      '--redis-sentinel-password',
      SENTINEL_PASSWORD,
    ]);
    await freshMinute(10);
    const a = await check(DOMAIN, { key_id: 'guarded' }, undefined, s.client);
    expect(a.response.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(a.headers['X-RateLimit-Remaining']).toBe('999999');
    const onPrimary = new Redis(primaryPort, '127.0.0.1');
    try {
      expect(await onPrimary.get(counterKeys(DOMAIN, 'guarded', currentWindows(Date.now())).minute)).toBe(
        '1',
      );
    } finally {
      onPrimary.disconnect();
    }
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(1);
  });

  it('with a wrong sentinel password: answers from local counts with the headers, says why, keeps running', async () => {
    const s = await server('sentinel-wrongpass', [
      '--redis-sentinels',
      sentinelAddress,
      '--redis-sentinel-master-name',
      master,
      '--redis-sentinel-password',
      'not-the-password',
    ]);
    const a = await check(DOMAIN, { key_id: 'unguarded' }, undefined, s.client);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '1000000', 'X-RateLimit-Remaining': '999999' });
    // ioredis reports a sentinel that refuses the password as unreachable (its AUTH reply is not
    // told apart from a timeout), so the reason is sentinel, not auth.
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="sentinel"',
      (v) => v > 0,
      'a sentinel connection error in the metric',
    );
    await sleep(2_000);
    expect(s.child.exitCode).toBeNull();
    const said = s
      .output()
      .split('\n')
      .find((l) => l.includes('no sentinel named a reachable primary'));
    // The hint names the flag that is wrong, not only the sentinels' addresses and the master name.
    expect(said).toContain('--redis-sentinel-password');
    expect(said).toContain('--redis-sentinel-master-name');
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(0);
  });

  it('with a wrong sentinel password in a file: the hint names the file flag; the file corrected, the same process finds the primary and counts there', async () => {
    const passwordFile = path.join(mkdtempSync(path.join(dir, 'sentinel-secret-')), 'password');
    writeFileSync(passwordFile, 'not-the-password\n');
    const s = await server('sentinel-file', [
      '--redis-sentinels',
      sentinelAddress,
      '--redis-sentinel-master-name',
      master,
      '--redis-sentinel-password-file',
      passwordFile,
    ]);
    await waitFor('the sentinel hint in the log', () =>
      s.output().includes('no sentinel named a reachable primary') ? true : undefined,
    );
    const said = s
      .output()
      .split('\n')
      .find((l) => l.includes('no sentinel named a reachable primary'));
    expect(said).toContain('--redis-sentinel-password-file');
    const pid = s.child.pid;
    // Written as a whole new file renamed over the old one (as an editor or a config tool would).
    writeFileSync(`${passwordFile}.new`, SENTINEL_PASSWORD);
    renameSync(`${passwordFile}.new`, passwordFile);
    await waitFor(
      'connected through the sentinel',
      async () =>
        (await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')) === 1 ? true : undefined,
      15_000,
      100,
    );
    expect(s.output()).toContain('reloaded the Redis credentials');
    await freshMinute(10);
    const a = await check(DOMAIN, { key_id: 'guarded-file' }, undefined, s.client);
    expect(a.response.statuses[0]?.current_limit?.name).toBeUndefined();
    const onPrimary = new Redis(primaryPort, '127.0.0.1');
    try {
      expect(
        await onPrimary.get(counterKeys(DOMAIN, 'guarded-file', currentWindows(Date.now())).minute),
      ).toBe('1');
    } finally {
      onPrimary.disconnect();
    }
    expect(s.child.pid).toBe(pid);
    expect(s.child.exitCode).toBeNull();
  });
});

describe.runIf(SLOW)('Redis Cluster', () => {
  it(
    "with one primary down, keys of the others' slots are counted in Redis and its own answered locally with the headers",
    { timeout: 120_000 },
    async () => {
      const ports = Object.values(await pickFreePorts({ a: 'tcp', b: 'tcp', c: 'tcp' }));
      const nodes: TestProcess[] = [];
      for (const p of ports) {
        const conf = path.join(mkdtempSync(path.join(dir, 'cluster-')), 'nodes.conf');
        nodes.push(await redisServer(p, await clusterNodeArgs(conf, 1000)));
      }
      await createRedisCluster(ports);
      const probe = new Redis(ports[0] ?? 0, '127.0.0.1');
      try {
        await waitFor('cluster_state:ok', async () =>
          (await probe.cluster('INFO')).includes('cluster_state:ok') ? true : undefined,
        );
        // Which port serves each slot.
        const ranges = await probe.cluster('SLOTS');
        const portOfSlot = (slot: number): number =>
          ranges.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1] ?? -1;
        const s = await server('cluster', [
          '--redis-url',
          `redis://127.0.0.1:${ports[0] ?? 0}`,
          '--redis-cluster',
          '--redis-cluster-nodes',
          ports
            .slice(1)
            .map((p) => `127.0.0.1:${p}`)
            .join(','),
        ]);
        await freshMinute(30);
        // One key id per primary; all four keys of one key id in one slot.
        const keyOf = new Map<number, string>();
        for (let i = 0; keyOf.size < ports.length; i++) {
          const keyId = `ha-key-${i}`;
          const k = counterKeys(DOMAIN, keyId, currentWindows(Date.now()));
          const slots = new Set([k.minute, k.day, k.rejected, k.ban].map((key) => calculateSlot(key)));
          expect(slots.size).toBe(1);
          const port = portOfSlot([...slots][0] ?? -1);
          if (!keyOf.has(port)) keyOf.set(port, keyId);
        }
        for (const keyId of keyOf.values()) {
          const a = await check(DOMAIN, { key_id: keyId }, undefined, s.client);
          expect(a.response.statuses[0]?.current_limit?.name).toBeUndefined();
        }
        const downPort = ports[2] ?? 0;
        const downKey = keyOf.get(downPort) ?? '';
        nodes[2]?.child.kill('SIGKILL');
        // The first check of the dead primary's key meets the lost connection or the timeout and
        // opens its breaker; from then on: 20 rounds of one check per key.
        await check(DOMAIN, { key_id: downKey }, undefined, s.client);
        const rounds = 20;
        const answers: { keyId: string; source: string; headers: Record<string, string> }[] = [];
        for (let r = 0; r < rounds; r++) {
          for (const keyId of keyOf.values()) {
            const a = await check(DOMAIN, { key_id: keyId }, undefined, s.client);
            answers.push({
              keyId,
              source: answeredWithoutRedis(a) ? 'local' : 'redis',
              headers: a.headers,
            });
          }
          await sleep(100);
        }
        const down = answers.filter((a) => a.keyId === downKey);
        const up = answers.filter((a) => a.keyId !== downKey);
        expect(up.map((a) => a.source)).toEqual(up.map(() => 'redis'));
        expect(down.map((a) => a.source)).toEqual(down.map(() => 'local'));
        expect(
          down.every(
            (a) =>
              a.headers['X-RateLimit-Limit'] === '1000000' &&
              a.headers['X-RateLimit-Remaining'] !== undefined,
          ),
        ).toBe(true);
        // The live primaries counted every check of their keys: 1 before the kill, `rounds` after.
        for (const [port, keyId] of keyOf) {
          if (port === downPort) continue;
          const node = new Redis(port, '127.0.0.1');
          expect(await node.get(counterKeys(DOMAIN, keyId, currentWindows(Date.now())).minute)).toBe(
            String(rounds + 1),
          );
          node.disconnect();
        }
        expect(await metricValue(s.metricsUrl, 'portico_ratelimit_degraded')).toBe(1);
      } finally {
        probe.disconnect();
      }
    },
  );
});

describe.runIf(SLOW)('Redis Cluster with replicas', () => {
  it(
    'survives the primary of a key killed under load: its replica takes over, no failed check, recovery and lost counts within the documented bounds',
    { timeout: 180_000 },
    async () => {
      const ports = Object.values(
        await pickFreePorts({ a: 'tcp', b: 'tcp', c: 'tcp', d: 'tcp', e: 'tcp', f: 'tcp' }),
      );
      const byPort = new Map<number, TestProcess>();
      for (const p of ports) {
        const conf = path.join(mkdtempSync(path.join(dir, 'cluster-r-')), 'nodes.conf');
        byPort.set(p, await redisServer(p, await clusterNodeArgs(conf, CLUSTER_NODE_TIMEOUT_MS)));
      }
      // Three primaries (the first three listed) and a replica of each.
      await createRedisCluster(ports, 1);
      const admins = new Map(ports.map((p) => [p, new Redis(p, '127.0.0.1', { maxRetriesPerRequest: 1 })]));
      const admin = (p: number): Redis => {
        const r = admins.get(p);
        if (r === undefined) throw new Error(`no node on ${p}`);
        return r;
      };
      for (const r of admins.values()) r.on('error', () => undefined);
      /** `CLUSTER NODES` as seen by the node on `port`: port, flags and master id of each node. */
      const nodesSeenBy = async (
        port: number,
      ): Promise<{ id: string; port: number; flags: string[]; masterId: string }[]> =>
        ((await admin(port).cluster('NODES')) as string)
          .trim()
          .split('\n')
          .map((line) => {
            const [id = '', addr = '', flags = '', masterId = ''] = line.split(' ');
            return { id, port: Number(addr.split('@')[0]?.split(':')[1]), flags: flags.split(','), masterId };
          });
      try {
        await waitFor(
          'cluster_state:ok, and each replica in sync with its primary',
          async () => {
            for (const p of ports) {
              if (!(await admin(p).cluster('INFO')).includes('cluster_state:ok')) return undefined;
              const info = await admin(p).info('replication');
              if (info.includes('role:slave') && !info.includes('master_link_status:up')) return undefined;
            }
            return true;
          },
          30_000,
          200,
        );
        const s = await server('cluster-replicas', [
          '--redis-url',
          `redis://127.0.0.1:${ports[0] ?? 0}`,
          '--redis-cluster',
          '--redis-cluster-nodes',
          ports
            .slice(1)
            .map((p) => `127.0.0.1:${p}`)
            .join(','),
        ]);
        const keyId = 'cluster-failover';
        const keys = counterKeys(DOMAIN, keyId, currentWindows(Date.now()));
        const slots = new Set([keys.minute, keys.day, keys.rejected, keys.ban].map((k) => calculateSlot(k)));
        expect(slots.size).toBe(1);
        const slot = [...slots][0] ?? -1;
        const ranges = await admin(ports[0] ?? 0).cluster('SLOTS');
        const primaryPort = ranges.find(([from, to]) => slot >= from && slot <= to)?.[2]?.[1] ?? -1;
        const nodes = await nodesSeenBy(primaryPort);
        const primaryId = nodes.find((n) => n.port === primaryPort)?.id ?? '';
        const replicaPort = nodes.find((n) => n.masterId === primaryId)?.port ?? -1;
        expect(replicaPort).toBeGreaterThan(0);
        const survivor = ports.find((p) => p !== primaryPort && p !== replicaPort) ?? -1;

        await freshMinute(45);
        const load = steadyLoad(s.client, keyId);
        await sleep(3_000);
        const primaryProcess = byPort.get(primaryPort);
        if (!primaryProcess) throw new Error(`no process started for the primary on port ${primaryPort}`);
        const kill = await killAndAwaitExit(primaryProcess.child);
        // When the survivors' view names the replica a primary (polled every 50 ms).
        const promotedMs = await waitFor(
          'the replica promoted',
          async () =>
            (await nodesSeenBy(survivor)).find((n) => n.port === replicaPort)?.flags.includes('master')
              ? performance.now()
              : undefined,
          CLUSTER_RECOVERY_BOUND_MS + 10_000,
          50,
        );
        const { recovered, recoveryMs, before, failed, local, admittedByRedis } = await afterTheKill(
          load,
          kill,
          CLUSTER_RECOVERY_BOUND_MS,
        );
        const firstMinute = currentWindows(Date.now() - 60_000).minute.index;
        const lastMinute = currentWindows(Date.now()).minute.index;
        let counted = 0;
        for (let m = firstMinute; m <= lastMinute; m++) {
          const key = counterKeys(DOMAIN, keyId, currentWindows(m * 60_000)).minute;
          counted += Number((await admin(replicaPort).get(key)) ?? '0');
        }
        const report = {
          checks: load.samples.length,
          failed: failed.length,
          answeredLocally: local.length,
          promotedMs: Math.round(promotedMs - kill.exitedMs),
          recoveryMs: Math.round(recoveryMs),
          recoveryBoundMs: CLUSTER_RECOVERY_BOUND_MS,
          admittedByRedis,
          countedInRedis: counted,
          lost: admittedByRedis - counted,
        };
        console.log(`cluster failover: ${JSON.stringify(report)}`);

        expect(before.length).toBeGreaterThan(100);
        expect(notCountedInRedis(before, kill)).toEqual([]);
        expect(failed).toEqual([]);
        expect(local.length).toBeGreaterThan(0);
        expect(recoveryMs).toBeLessThanOrEqual(CLUSTER_RECOVERY_BOUND_MS);
        expect(outsideTheOutage(local, kill, recovered)).toEqual([]);
        // After the recovery every check is counted in Redis again (none answered locally).
        expect(
          notCountedInRedis(
            load.samples.filter((x) => x.startMs > recovered.endMs),
            kill,
          ),
        ).toEqual([]);
        expect(Math.abs(admittedByRedis - counted)).toBeLessThanOrEqual(COUNTS_BOUND);
      } finally {
        for (const r of admins.values()) r.disconnect();
      }
    },
  );
});
