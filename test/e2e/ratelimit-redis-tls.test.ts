/**
 * The rate-limit server on a Redis that requires TLS with client certificates and an ACL user
 * (Debian's redis-server with `tls-port`, `tls-auth-clients yes` and `user ... on >password`;
 * certificates made by openssl): with the CA, a client certificate and the password it counts in
 * Redis; with a wrong password, without a client certificate, with an expired one, or with a CA file
 * that did not sign Redis's certificate, it keeps running and answers from local counts with the
 * headers, and says why in a log line and `portico_ratelimit_redis_connection_errors_total`.
 * Sentinel over TLS: a redis-sentinel with only a `tls-port` and `tls-auth-clients yes`, reaching the
 * primary over TLS (`tls-replication yes`); with `--redis-sentinel-tls` the server finds the primary
 * through it and counts there; without, it answers locally and says the sentinels are the problem.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { counterKeys } from '../../src/ratelimit/redis-keys.js';
import { DEGRADED_STATUS_NAME } from '../../src/ratelimit/service.js';
import { currentWindows } from '../../src/ratelimit/windows.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
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

const run = promisify(execFile);
const ns = unique('rl-tls');
const DOMAIN = `${ns}/api`;
const ENTRY: CompiledPolicy = {
  domain: DOMAIN,
  uid: 'test',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
};
const USER = 'portico';
const PASSWORD = 'counter-secret';

const dir = mkdtempSync(path.join(tmpdir(), 'portico-redis-tls-'));
const file = (name: string): string => path.join(dir, name);
const started: TestProcess[] = [];
let tlsPort = 0;
let redisServer: TestProcess | undefined;

/** A CA, a server certificate for 127.0.0.1/localhost and a client certificate, all signed by it. */
async function makeCertificates(): Promise<void> {
  const script = [
    'set -e',
    'openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 1 -subj "/CN=redis test CA"',
    'for leaf in server client; do',
    '  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $leaf.key -out $leaf.csr -subj "/CN=$leaf"',
    'done',
    'printf "subjectAltName=IP:127.0.0.1,DNS:localhost\\n" > server.ext',
    'printf "extendedKeyUsage=clientAuth\\n" > client.ext',
    'for leaf in server client; do',
    '  openssl x509 -req -in $leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $leaf.pem -days 1 -extfile $leaf.ext',
    'done',
    // The same client key in a certificate whose notAfter has passed (a day before its notBefore).
    'openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out expired-client.pem -days -1 -extfile client.ext',
    // A CA that did not sign the server's certificate.
    'openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other-ca.key -out other-ca.pem -days 1 -subj "/CN=another CA"',
  ].join('\n');
  await run('sh', ['-c', script], { cwd: dir });
}

/** A rate-limit server of this test on the TLS Redis, with `extra` flags (a later flag wins). */
async function server(instance: string, extra: readonly string[]): Promise<TestServer> {
  const s = await startTestServer([
    '--config-namespace',
    ns,
    '--redis-timeout-ms',
    '200',
    '--instance',
    instance,
    '--redis-url',
    `rediss://127.0.0.1:${tlsPort}`,
    '--redis-tls-ca-file',
    file('ca.pem'),
    '--redis-username',
    USER,
    // A load report write that fails (the API server busy on a loaded machine) is retried at the
    // next heartbeat: 5 s here, not the default 30 s, so one failed write does not outlast the wait.
    '--heartbeat-interval-seconds',
    '5',
    ...extra,
  ]);
  started.push(s);
  try {
    await waitUntilLoaded(ns, instance, ENTRY);
  } catch (err: unknown) {
    throw new Error(`${String(err)}; the server's last output: ${s.output().slice(-3_000)}`, { cause: err });
  }
  return s;
}

beforeAll(async () => {
  await makeCertificates();
  tlsPort = (await pickFreePorts({ tls: 'tcp' })).tls;
  const conf = file('redis.conf');
  writeFileSync(
    conf,
    [
      'port 0',
      `tls-port ${tlsPort}`,
      'bind 127.0.0.1',
      `tls-cert-file ${file('server.pem')}`,
      `tls-key-file ${file('server.key')}`,
      `tls-ca-cert-file ${file('ca.pem')}`,
      'tls-auth-clients yes',
      'save ""',
      'appendonly no',
      `dir ${dir}`,
      'user default off',
      `user ${USER} on >${PASSWORD} ~* &* +@all`,
      '',
    ].join('\n'),
  );
  const redis = startProcess(path.join(TOOLS_BIN, 'redis-server'), [conf]);
  started.push(redis);
  redisServer = redis;
  await waitFor(
    'redis-server with TLS',
    () => (redis.output().includes('Ready to accept connections') ? true : undefined),
    10_000,
    50,
  );
  await createNamespaceWithConfig(ns, [ENTRY]);
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
});

/** What redis-server has logged so far (its refusals of a client's certificate say why). */
function redisSaid(): string {
  return redisServer?.output() ?? '';
}

/** A client of the test's own on the TLS Redis, as the ACL user. */
function testClient(): Redis {
  return new Redis({
    host: '127.0.0.1',
    port: tlsPort,
    username: USER,
    password: PASSWORD,
    tls: {
      ca: readFileSync(file('ca.pem')),
      cert: readFileSync(file('client.pem')),
      key: readFileSync(file('client.key')),
    },
  });
}

describe('Redis with TLS, client certificates and an ACL user', () => {
  it('counts in Redis with the CA, a client certificate and the password', async () => {
    const s = await server('tls-ok', [
      '--redis-tls-cert-file',
      file('client.pem'),
      '--redis-tls-key-file',
      file('client.key'),
      '--redis-password',
      PASSWORD,
    ]);
    await freshMinute(10);
    const a = await check(DOMAIN, { key_id: 'tls' }, undefined, s.client);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(a.headers['X-RateLimit-Remaining']).toBe('59');
    const redis = testClient();
    try {
      expect(await redis.get(counterKeys(DOMAIN, 'tls', currentWindows(Date.now())).minute)).toBe('1');
    } finally {
      redis.disconnect();
    }
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(1);
    expect(s.output()).toContain('connected to Redis');
  });

  it('with a wrong password: runs on, answers from local counts with the headers, says auth in the log and the metric', async () => {
    const s = await server('tls-wrongpass', [
      '--redis-tls-cert-file',
      file('client.pem'),
      '--redis-tls-key-file',
      file('client.key'),
      '--redis-password',
      'not-the-password',
    ]);
    const a = await check(DOMAIN, { key_id: 'wrongpass' }, undefined, s.client);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '59' });
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="auth"',
      (v) => v > 0,
      'an auth connection error in the metric',
    );
    // Still running some seconds later (ioredis retries; the process neither exits nor restarts).
    await sleep(3_000);
    expect(s.child.exitCode).toBeNull();
    const lines = s
      .output()
      .split('\n')
      .filter((l) => l.includes('Redis refused the username or password'));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    // Repeats of the same error are logged at most every 10 s.
    expect(lines.length).toBeLessThanOrEqual(2);
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(0);
  });

  it('without a client certificate: the handshake is refused, reported as tls, answered locally', async () => {
    const s = await server('tls-nocert', ['--redis-password', PASSWORD]);
    const a = await check(DOMAIN, { key_id: 'nocert' }, undefined, s.client);
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers['X-RateLimit-Limit']).toBe('60');
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="tls"',
      (v) => v > 0,
      'a tls connection error in the metric',
    );
    expect(s.output()).toContain('the TLS handshake with Redis failed');
    expect(s.child.exitCode).toBeNull();
  });

  it('with an expired client certificate: Redis refuses the handshake, reported as tls, answered locally, no crash', async () => {
    const s = await server('tls-expired', [
      '--redis-tls-cert-file',
      file('expired-client.pem'),
      '--redis-tls-key-file',
      file('client.key'),
      '--redis-password',
      PASSWORD,
    ]);
    const a = await check(DOMAIN, { key_id: 'expired' }, undefined, s.client);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers).toMatchObject({ 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '59' });
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="tls"',
      (v) => v > 0,
      'a tls connection error in the metric',
    );
    // Redis refuses the chain; the alert it sends names the cause, and Portico's log line carries it.
    expect(redisSaid()).toContain('certificate verify failed');
    const line = s
      .output()
      .split('\n')
      .find((l) => l.includes('the TLS handshake with Redis failed'));
    expect(line).toContain('alert certificate expired');
    await sleep(2_000);
    expect(s.child.exitCode).toBeNull();
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(0);
  });

  it("with a CA file that did not sign Redis's certificate: the server is not trusted, reported as tls with Node's reason, answered locally", async () => {
    const s = await server('tls-wrongca', [
      '--redis-tls-cert-file',
      file('client.pem'),
      '--redis-tls-key-file',
      file('client.key'),
      '--redis-password',
      PASSWORD,
      '--redis-tls-ca-file',
      file('other-ca.pem'),
    ]);
    const a = await check(DOMAIN, { key_id: 'wrongca' }, undefined, s.client);
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers['X-RateLimit-Limit']).toBe('60');
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="tls"',
      (v) => v > 0,
      'a tls connection error in the metric',
    );
    const line = s
      .output()
      .split('\n')
      .find((l) => l.includes('the TLS handshake with Redis failed'));
    // Node's words for a chain it cannot verify against the CA it was given: the chain Redis
    // presents ends in this file's test CA, a self-signed root that is not in other-ca.pem.
    expect(line).toContain('self-signed certificate in certificate chain');
    expect(s.child.exitCode).toBeNull();
  });
});

describe('Redis Sentinel over TLS (sentinels with tls-port and tls-auth-clients)', () => {
  const master = 'tls-counters';
  let sentinelTlsPort = 0;

  beforeAll(async () => {
    sentinelTlsPort = (await pickFreePorts({ sentinel: 'tcp' })).sentinel;
    const conf = file('sentinel.conf');
    writeFileSync(
      conf,
      [
        'port 0',
        `tls-port ${sentinelTlsPort}`,
        'bind 127.0.0.1',
        `tls-cert-file ${file('server.pem')}`,
        `tls-key-file ${file('server.key')}`,
        `tls-ca-cert-file ${file('ca.pem')}`,
        'tls-auth-clients yes',
        // The sentinel reaches the primary over TLS too (its tls-port only), as its ACL user.
        'tls-replication yes',
        `dir ${dir}`,
        `sentinel monitor ${master} 127.0.0.1 ${tlsPort} 1`,
        `sentinel auth-user ${master} ${USER}`,
        `sentinel auth-pass ${master} ${PASSWORD}`,
        '',
      ].join('\n'),
    );
    const sentinel = startProcess(path.join(TOOLS_BIN, 'redis-sentinel'), [conf]);
    started.push(sentinel);
    const ask = new Redis({
      host: '127.0.0.1',
      port: sentinelTlsPort,
      maxRetriesPerRequest: 1,
      tls: {
        ca: readFileSync(file('ca.pem')),
        cert: readFileSync(file('client.pem')),
        key: readFileSync(file('client.key')),
      },
    });
    ask.on('error', () => undefined);
    try {
      await waitFor(
        'the TLS sentinel to name the primary',
        async () => {
          const addr = (await ask.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', master)) as string[] | null;
          return addr?.[1] === String(tlsPort) ? true : undefined;
        },
        15_000,
        100,
      );
    } finally {
      ask.disconnect();
    }
  });

  /** A rate-limit server finding the TLS primary through the TLS sentinel, with `extra` flags. */
  async function sentinelServer(instance: string, extra: readonly string[]): Promise<TestServer> {
    const s = await startTestServer([
      '--config-namespace',
      ns,
      '--redis-timeout-ms',
      '200',
      '--instance',
      instance,
      '--redis-sentinels',
      `127.0.0.1:${sentinelTlsPort}`,
      '--redis-sentinel-master-name',
      master,
      '--redis-tls',
      '--redis-tls-ca-file',
      file('ca.pem'),
      '--redis-tls-cert-file',
      file('client.pem'),
      '--redis-tls-key-file',
      file('client.key'),
      '--redis-username',
      USER,
      '--redis-password',
      PASSWORD,
      ...extra,
    ]);
    started.push(s);
    await waitUntilLoaded(ns, instance, ENTRY);
    return s;
  }

  it('with --redis-sentinel-tls: asks the sentinel over TLS with the client certificate and counts on the TLS primary', async () => {
    const s = await sentinelServer('sentinel-tls', ['--redis-sentinel-tls']);
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connected',
      '',
      (v) => v === 1,
      'the server to connect through the sentinel',
    );
    await freshMinute(10);
    const a = await check(DOMAIN, { key_id: 'sentinel-tls' }, undefined, s.client);
    expect(a.response.statuses[0]?.current_limit?.name).toBeUndefined();
    expect(a.headers['X-RateLimit-Remaining']).toBe('59');
    const redis = testClient();
    try {
      expect(await redis.get(counterKeys(DOMAIN, 'sentinel-tls', currentWindows(Date.now())).minute)).toBe(
        '1',
      );
    } finally {
      redis.disconnect();
    }
  });

  it('without --redis-sentinel-tls (plaintext to the TLS sentinel): answered locally with the headers, reported as sentinel, no crash', async () => {
    const s = await sentinelServer('sentinel-plain', []);
    const a = await check(DOMAIN, { key_id: 'sentinel-plain' }, undefined, s.client);
    expect(a.code).toBe('OK');
    expect(a.response.statuses[0]?.current_limit?.name).toBe(DEGRADED_STATUS_NAME);
    expect(a.headers['X-RateLimit-Limit']).toBe('60');
    await waitForMetric(
      s.metricsUrl,
      'portico_ratelimit_redis_connection_errors_total',
      'reason="sentinel"',
      (v) => v > 0,
      'a sentinel connection error in the metric',
    );
    expect(s.output()).toContain('no sentinel named a reachable primary');
    expect(s.child.exitCode).toBeNull();
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_redis_connected')).toBe(0);
  });
});
