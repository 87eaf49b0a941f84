import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { generateSandboxCertificates, type SandboxCertificates } from '../sandbox/certificates.js';
import { listenOn } from '../../test/support/loopback-server.js';
import { loadKubeConfig, PooledKubeConfig } from './kubeconfig.js';

/** A small HTTPS "API server" that answers namespace GETs and counts its TLS connections. */
interface FakeApiServer {
  readonly server: Server;
  url: string;
  /** TLS handshakes completed so far. */
  connections: number;
  /** Connections not yet closed. */
  readonly open: Set<TLSSocket>;
  /** The Authorization header of each request, in order. */
  readonly authorizations: (string | undefined)[];
  /** The subject CN of the client certificate of each request ('' without one). */
  readonly clientCommonNames: string[];
}

const servers: FakeApiServer[] = [];
const configs: PooledKubeConfig[] = [];
let certs: SandboxCertificates;

beforeAll(async () => {
  certs = await generateSandboxCertificates();
});

afterEach(async () => {
  await Promise.all(configs.splice(0).map((kc) => kc.close()));
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.server.close(() => {
            resolve();
          });
          s.server.closeAllConnections();
        }),
    ),
  );
});

async function startServer(): Promise<FakeApiServer> {
  const server = createServer({
    key: certs.apiServer.keyPem,
    cert: certs.apiServer.certPem,
    ca: certs.clusterCa.certPem,
    requestCert: true,
    // Token clients send no certificate; the CN recorded below shows what a client sent.
    rejectUnauthorized: false,
  });
  // Longer than the test, so only the client closes idle connections.
  server.keepAliveTimeout = 60_000;
  const fake: FakeApiServer = {
    server,
    url: '',
    connections: 0,
    open: new Set(),
    authorizations: [],
    clientCommonNames: [],
  };
  server.on('secureConnection', (socket: TLSSocket) => {
    fake.connections++;
    fake.open.add(socket);
    socket.on('close', () => fake.open.delete(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket as TLSSocket;
    const commonName = socket.authorized ? socket.getPeerCertificate().subject.CN : '';
    fake.clientCommonNames.push(Array.isArray(commonName) ? commonName.join(',') : (commonName ?? ''));
    fake.authorizations.push(req.headers.authorization);
    const path = new URL(req.url ?? '/', 'https://localhost').pathname;
    const match = /^\/api\/v1\/namespaces(?:\/([^/]+))?$/.exec(path);
    if (req.method !== 'GET' || !match) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404 }));
      return;
    }
    const namespace = (name: string) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    const body =
      match[1] === undefined
        ? { apiVersion: 'v1', kind: 'NamespaceList', metadata: {}, items: [namespace('default')] }
        : namespace(match[1]);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  fake.url = `https://127.0.0.1:${String(await listenOn(server))}`;
  servers.push(fake);
  return fake;
}

const base64 = (pem: string) => Buffer.from(pem).toString('base64');

/** Kubeconfig options for `server`: the cluster CA, and the admin client certificate or a token. */
function options(server: FakeApiServer, user: { token: string } | 'admin' = 'admin'): object {
  const credentials =
    user === 'admin'
      ? { certData: base64(certs.admin.certPem), keyData: base64(certs.admin.keyPem) }
      : { token: user.token };
  return {
    clusters: [
      { name: 'test', server: server.url, caData: base64(certs.clusterCa.certPem), skipTLSVerify: false },
    ],
    users: [{ name: 'test', ...credentials }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  };
}

function pooled(server: FakeApiServer, user?: { token: string }): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromOptions(options(server, user));
  configs.push(kc);
  return kc;
}

async function readNamespaces(api: CoreV1Api, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const ns = await api.readNamespace({ name: `ns-${i}` });
    expect(ns.metadata?.name).toBe(`ns-${i}`);
  }
}

async function listNamespacesConcurrently(api: CoreV1Api, n: number): Promise<void> {
  const lists = await Promise.all(Array.from({ length: n }, () => api.listNamespace()));
  for (const list of lists) expect(list.items.map((ns) => ns.metadata?.name)).toEqual(['default']);
}

/**
 * undici hands a connection back to its pool a moment after fetch has delivered the response body,
 * so a request sent at once after another may find its connection still busy and open a second one
 * (a plain undici Agent does the same). A pool therefore holds up to about twice the concurrency.
 */
const RELEASE_RACE = 2;

describe('PooledKubeConfig', () => {
  it('reuses its connections for sequential requests, with the cluster CA and client certificate', async () => {
    const server = await startServer();
    const api = pooled(server).makeApiClient(CoreV1Api);

    await readNamespaces(api, 20);

    expect(server.connections).toBeLessThanOrEqual(RELEASE_RACE);
    expect(server.clientCommonNames).toEqual(Array<string>(20).fill('portico-admin'));
  });

  it('grows with the concurrency of requests, not with their number', async () => {
    const server = await startServer();
    const api = pooled(server).makeApiClient(CoreV1Api);

    await readNamespaces(api, 20);
    // 20 more, 4 at a time: at most 4 more connections in use at once.
    for (let batch = 0; batch < 5; batch++) await listNamespacesConcurrently(api, 4);
    expect(server.connections).toBeLessThanOrEqual(RELEASE_RACE + 4 * RELEASE_RACE);

    // A burst of 20 at once may need up to 20 connections; the same load again opens none.
    await listNamespacesConcurrently(api, 20);
    const afterBurst = server.connections;
    await listNamespacesConcurrently(api, 20);
    await readNamespaces(api, 20);
    expect(server.connections).toBe(afterBurst);
    expect(server.authorizations).toHaveLength(100);
  });

  it('shares the pool between API clients of the same config', async () => {
    const server = await startServer();
    const kc = pooled(server);

    for (let i = 0; i < 10; i++) await readNamespaces(kc.makeApiClient(CoreV1Api), 1);

    expect(server.connections).toBeLessThanOrEqual(RELEASE_RACE);
  });

  it('applies credentials per request: a new token is sent on the pooled connections', async () => {
    const server = await startServer();
    const kc = pooled(server, { token: 'first' });
    const api = kc.makeApiClient(CoreV1Api);

    await readNamespaces(api, 3);
    kc.loadFromOptions(options(server, { token: 'second' }));
    await readNamespaces(api, 3);

    expect(server.authorizations).toEqual([
      'Bearer first',
      'Bearer first',
      'Bearer first',
      'Bearer second',
      'Bearer second',
      'Bearer second',
    ]);
    expect(server.clientCommonNames).toEqual(Array<string>(6).fill(''));
    expect(server.connections).toBeLessThanOrEqual(RELEASE_RACE);
  });

  it('close() closes the pooled connections; a request after close opens a new pool', async () => {
    const server = await startServer();
    const kc = pooled(server);
    const api = kc.makeApiClient(CoreV1Api);
    await readNamespaces(api, 5);
    await listNamespacesConcurrently(api, 3);
    expect(server.open.size).toBeGreaterThan(0);
    const before = server.connections;

    await kc.close();
    await vi.waitFor(
      () => {
        expect(server.open.size).toBe(0);
      },
      { timeout: 2_000, interval: 10 },
    );

    await readNamespaces(api, 5);
    expect(server.connections - before).toBeGreaterThanOrEqual(1);
    expect(server.connections - before).toBeLessThanOrEqual(RELEASE_RACE);
    expect(server.open.size).toBe(server.connections - before);
  });

  it('close() without any request, or twice, resolves', async () => {
    const server = await startServer();
    const kc = pooled(server);
    await kc.close();
    await readNamespaces(kc.makeApiClient(CoreV1Api), 1);
    await kc.close();
    await kc.close();
    await vi.waitFor(
      () => {
        expect(server.open.size).toBe(0);
      },
      { timeout: 2_000, interval: 10 },
    );
  });
});

describe('KubeConfig of client-node (the behaviour PooledKubeConfig replaces)', () => {
  it('opens a TLS connection per request', async () => {
    const server = await startServer();
    const kc = new KubeConfig();
    kc.loadFromOptions(options(server));
    const api = kc.makeApiClient(CoreV1Api);

    await readNamespaces(api, 20);

    expect(server.connections).toBeGreaterThanOrEqual(20);
  });
});

describe('loadKubeConfig', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('loads a kubeconfig file into a PooledKubeConfig', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'portico-kubeconfig-'));
    try {
      const path = join(dir, 'kubeconfig');
      await writeFile(
        path,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '- name: c',
          '  cluster: { server: "https://127.0.0.1:6443" }',
          'users:',
          '- name: u',
          '  user: { token: abc }',
          'contexts:',
          '- name: ctx',
          '  context: { cluster: c, user: u, namespace: team-a }',
          'current-context: ctx',
          '',
        ].join('\n'),
      );
      const kc = loadKubeConfig(path);
      expect(kc).toBeInstanceOf(PooledKubeConfig);
      expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
      expect(kc.getCurrentUser()?.token).toBe('abc');
      expect(kc.getContextObject(kc.getCurrentContext())?.namespace).toBe('team-a');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('throws for a file that does not exist', () => {
    expect(() => loadKubeConfig(join(tmpdir(), 'portico-no-such-kubeconfig', 'config'))).toThrow();
  });

  it('uses the in-cluster service account without a path', () => {
    vi.stubEnv('KUBERNETES_SERVICE_HOST', '10.96.0.1');
    vi.stubEnv('KUBERNETES_SERVICE_PORT', '443');
    for (const path of [undefined, '']) {
      const kc = loadKubeConfig(path);
      expect(kc).toBeInstanceOf(PooledKubeConfig);
      expect(kc.getCurrentCluster()?.server).toBe('https://10.96.0.1:443');
      expect(kc.getCurrentUser()?.authProvider).toMatchObject({ name: 'tokenFile' });
    }
  });
});
