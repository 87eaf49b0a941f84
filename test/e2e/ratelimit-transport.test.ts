/**
 * The rate-limit server's transport (docs/ratelimits.md, "Transport"), with real processes:
 * `portico ratelimit-server` from dist/, certificates made by openssl, @grpc/grpc-js clients,
 * node:tls for the certificate a connection is served.
 *
 * - mTLS: a client with a certificate of the client CA is answered; one without a certificate, or with
 *   one of another CA, is refused in the handshake, and the server goes on serving;
 * - a certificate replaced on disk is served to new connections without a restart;
 * - grpc.health.v1.Health answers SERVING for "" and the RateLimitService;
 * - SIGTERM: a check in flight (waiting on a paused Redis) is answered, then the process exits 0;
 * - shadow mode (docs/ratelimits.md, "Shadow mode" and "Keys over their limit, answered from
 *   memory"): the 61st check of a 60/min plan is answered OK with the headers and counted as a
 *   would-be refusal; without it, a key over its limit is answered from memory (no Redis command)
 *   until the window ends.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect } from 'node:tls';
import { promisify } from 'node:util';
import { credentials, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompiledPolicy } from '../../src/ratelimit/config-schema.js';
import { createRateLimitClient } from '../../src/ratelimit/grpc.js';
import { SERVICE_NAME } from '../../src/ratelimit/protocol.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { unique, waitFor } from './support/cluster.js';
import {
  createNamespaceWithConfig,
  freshMinute,
  metricValue,
  startTestRedis,
  startTestServer,
  toAnswer,
  waitUntilLoaded,
  type TestProcess,
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
const CHECK = { domain: DOMAIN, descriptors: [{ entries: [{ key: 'key_id', value: 'k' }] }] };

const started: TestProcess[] = [];
const dir = mkdtempSync(path.join(tmpdir(), 'portico-rl-tls-'));
const file = (name: string): string => path.join(dir, name);
const read = (name: string): Buffer => readFileSync(file(name));

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

/** A CA (`<name>-ca.pem`/`-ca.key`) and a certificate it signs (`<leaf>.pem`/`.key`) for `san`. */
async function ca(name: string): Promise<void> {
  await openssl(
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'].concat([
      '-keyout',
      `${name}-ca.key`,
      '-out',
      `${name}-ca.pem`,
      '-days',
      '1',
      '-subj',
      `/CN=${name} CA`,
    ]),
  );
}
async function leaf(caName: string, leafName: string, cn: string): Promise<void> {
  await openssl(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'].concat([
      '-keyout',
      `${leafName}.key`,
      '-out',
      `${leafName}.csr`,
      '-subj',
      `/CN=${cn}`,
    ]),
  );
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${leafName}.csr`,
      '-CA',
      `${caName}-ca.pem`,
      '-CAkey',
      `${caName}-ca.key`,
    ].concat(['-CAcreateserial', '-out', `${leafName}.pem`, '-days', '1', '-extfile', `${leafName}.ext`]),
  );
}
async function leafWithSan(caName: string, leafName: string, cn: string, san: string): Promise<void> {
  await run('sh', ['-c', `printf 'subjectAltName=${san}\\n' > ${leafName}.ext`], { cwd: dir });
  await leaf(caName, leafName, cn);
}

/** The serial number of the certificate a new TLS connection to `port` is served. */
async function servedSerial(port: number): Promise<string> {
  const socket = connect({
    host: '127.0.0.1',
    port,
    servername: 'localhost',
    ca: read('server-ca.pem'),
    cert: read('client.pem'),
    key: read('client.key'),
    ALPNProtocols: ['h2'],
  });
  try {
    await once(socket, 'secureConnect');
    return socket.getPeerCertificate().serialNumber;
  } finally {
    socket.destroy();
  }
}

async function serialOf(pem: string): Promise<string> {
  const { stdout } = await run('openssl', ['x509', '-noout', '-serial', '-in', pem], { cwd: dir });
  return stdout
    .trim()
    .replace(/^serial=/, '')
    .toUpperCase();
}

beforeAll(async () => {
  await createNamespaceWithConfig(ns, [ENTRY]);
  await ca('server');
  await ca('client');
  await ca('rogue');
  await leafWithSan('server', 'server', 'portico-ratelimit', 'DNS:localhost,IP:127.0.0.1');
  await leafWithSan('server', 'server2', 'portico-ratelimit rotated', 'DNS:localhost,IP:127.0.0.1');
  await leafWithSan('client', 'client', 'envoy', 'DNS:envoy');
  await leafWithSan('rogue', 'rogue', 'intruder', 'DNS:intruder');
});

afterAll(async () => {
  for (const p of started.reverse()) await p.stop();
});

describe('the gRPC listener with mTLS', () => {
  it('answers a client of the client CA, refuses others in the handshake, and serves a rotated certificate', async () => {
    const { dead } = await pickFreePorts({ dead: 'tcp' });
    const s = await startTestServer([
      '--redis-url',
      `redis://127.0.0.1:${dead}`,
      '--config-namespace',
      ns,
      '--instance',
      'mtls',
      '--grpc-tls-cert-file',
      file('server.pem'),
      '--grpc-tls-key-file',
      file('server.key'),
      '--grpc-tls-client-ca-file',
      file('client-ca.pem'),
      '--grpc-tls-refresh-seconds',
      '1',
    ]);
    started.push(s);
    await waitUntilLoaded(ns, 'mtls', ENTRY);
    const port = Number(s.grpcAddr.split(':')[1]);
    const good = createRateLimitClient(
      s.grpcAddr,
      credentials.createSsl(read('server-ca.pem'), read('client.key'), read('client.pem')),
    );
    const noCert = createRateLimitClient(s.grpcAddr, credentials.createSsl(read('server-ca.pem')));
    const rogue = createRateLimitClient(
      s.grpcAddr,
      credentials.createSsl(read('server-ca.pem'), read('rogue.key'), read('rogue.pem')),
    );
    try {
      const answer = toAnswer(await good.shouldRateLimit(CHECK));
      expect(answer.code).toBe('OK');
      expect(answer.headers['X-RateLimit-Limit']).toBe('60');
      for (const refused of [noCert, rogue]) {
        const err = (await refused.shouldRateLimit(CHECK, 3_000).catch((e: unknown) => e)) as ServiceError;
        expect(err).toBeInstanceOf(Error);
        expect(err.code).toBe(14); // UNAVAILABLE: the handshake failed
      }
      // Still serving after the refusals.
      expect(toAnswer(await good.shouldRateLimit(CHECK)).headers['X-RateLimit-Remaining']).toBeDefined();

      // Rotation: the files are replaced (as the kubelet swaps a Secret volume's link).
      expect(await servedSerial(port)).toBe(await serialOf('server.pem'));
      renameSync(file('server2.pem'), file('server.pem'));
      renameSync(file('server2.key'), file('server.key'));
      const rotated = await serialOf('server.pem');
      await waitFor('the rotated certificate to be served', async () =>
        (await servedSerial(port)) === rotated ? true : undefined,
      );
      expect(s.child.exitCode).toBeNull();
    } finally {
      good.close();
      noCert.close();
      rogue.close();
    }
  });
});

interface HealthClient {
  Check(
    request: { service: string },
    callback: (err: ServiceError | null, response?: { status: string }) => void,
  ): void;
  close(): void;
}

// The checks run in their worker thread on Node and in the main thread on Bun (check-thread.ts,
// checksPlacement); PORTICO_RATELIMIT_CHECKS=main runs the second on Node.
describe.each([
  { placement: 'thread', where: 'their worker thread', env: {} },
  { placement: 'main', where: 'the main thread', env: { PORTICO_RATELIMIT_CHECKS: 'main' } },
])('grpc.health.v1.Health and SIGTERM, checks in $where', ({ placement, env }) => {
  it('answers SERVING; on SIGTERM answers the check in flight, then exits 0', async () => {
    const { port } = await pickFreePorts({ port: 'tcp' });
    const redis = await startTestRedis(port);
    started.push(redis);
    const s = await startTestServer(
      [
        '--redis-url',
        `redis://127.0.0.1:${port}`,
        '--redis-timeout-ms',
        '1000',
        '--config-namespace',
        ns,
        '--instance',
        `sigterm-${placement}`,
        '--log-level',
        'info',
      ],
      env,
    );
    started.push(s);
    await waitUntilLoaded(ns, `sigterm-${placement}`, ENTRY);
    const Health = makeGenericClientConstructor(healthService, 'Health');
    const health = new Health(s.grpcAddr, credentials.createInsecure()) as unknown as HealthClient;
    try {
      for (const name of ['', SERVICE_NAME]) {
        const status = await new Promise<string | undefined>((resolve, reject) => {
          health.Check({ service: name }, (err, response) => {
            if (err) reject(err);
            else resolve(response?.status);
          });
        });
        expect(status).toBe('SERVING');
      }
    } finally {
      health.close();
    }
    expect(toAnswer(await s.client.shouldRateLimit(CHECK)).code).toBe('OK');
    const pid = redis.child.pid;
    if (pid === undefined) throw new Error('redis-server has no pid');
    process.kill(pid, 'SIGSTOP');
    try {
      // The check waits for the paused Redis (up to 1 s); SIGTERM arrives meanwhile.
      const inFlight = s.client.shouldRateLimit(CHECK, 10_000);
      await new Promise((r) => setTimeout(r, 200));
      const exited = once(s.child, 'exit');
      s.child.kill('SIGTERM');
      const answer = toAnswer(await inFlight);
      expect(answer.code).toBe('OK');
      expect(answer.headers['X-RateLimit-Limit']).toBe('60');
      const [code] = (await exited) as [number | null];
      expect(code).toBe(0);
      expect(s.output()).toContain('"msg":"stopped"');
      expect(s.output()).toContain(`"checks":"${placement}"`);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });
});

describe('shadow mode and keys over their limit', () => {
  it('answers OK in shadow mode, headers kept, and counts the would-be refusal', async () => {
    const { port } = await pickFreePorts({ port: 'tcp' });
    const redis = await startTestRedis(port);
    started.push(redis);
    const s = await startTestServer([
      '--redis-url',
      `redis://127.0.0.1:${port}`,
      '--config-namespace',
      ns,
      '--instance',
      'shadow',
      '--shadow-mode',
    ]);
    started.push(s);
    await waitUntilLoaded(ns, 'shadow', ENTRY);
    await freshMinute(5);
    const request = { ...CHECK, hits_addend: 60 };
    expect(toAnswer(await s.client.shouldRateLimit(request)).code).toBe('OK');
    const would = toAnswer(await s.client.shouldRateLimit(CHECK));
    expect(would.code).toBe('OK');
    expect(would.response.statuses[0]?.code).toBe('OVER_LIMIT');
    expect(would.headers).toMatchObject({ 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '0' });
    expect(would.headers['Retry-After']).toBeUndefined();
    expect(
      await metricValue(s.metricsUrl, 'portico_ratelimit_shadow_refusals_total', 'reason="minute"'),
    ).toBe(1);
  });

  it('answers a key over its limit from memory, without a Redis command, until its window ends', async () => {
    const { port } = await pickFreePorts({ port: 'tcp' });
    const redis = await startTestRedis(port);
    started.push(redis);
    const s = await startTestServer([
      '--redis-url',
      `redis://127.0.0.1:${port}`,
      '--config-namespace',
      ns,
      '--instance',
      'cache',
    ]);
    started.push(s);
    await waitUntilLoaded(ns, 'cache', ENTRY);
    await freshMinute(5);
    await s.client.shouldRateLimit({ ...CHECK, hits_addend: 60 });
    const first = toAnswer(await s.client.shouldRateLimit(CHECK));
    expect(first.code).toBe('OVER_LIMIT');
    const commands = (): Promise<number> =>
      metricValue(s.metricsUrl, 'portico_ratelimit_redis_command_duration_seconds_count', 'command="check"');
    const sent = await commands();
    const again = [];
    for (let i = 0; i < 20; i++) again.push(toAnswer(await s.client.shouldRateLimit(CHECK)));
    expect(again.every((a) => a.code === 'OVER_LIMIT' && a.headers['X-RateLimit-Remaining'] === '0')).toBe(
      true,
    );
    expect(again[19]?.headers['X-RateLimit-Reset']).toBe(first.headers['X-RateLimit-Reset']);
    expect(await commands()).toBe(sent);
    expect(await metricValue(s.metricsUrl, 'portico_ratelimit_over_limit_cache_hits_total')).toBe(20);
  });
});
