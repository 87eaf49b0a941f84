/**
 * Traefik in the e2e stack, and HTTP clients that reach it as a browser would.
 *
 * Lifecycle: the stack's default data plane is Contour (global-setup.ts), so a test file that needs
 * Traefik starts it with {@link startStackTraefik} in its `beforeAll` (the sandbox's own start,
 * src/data-planes/traefik/sandbox-process.ts; its pid file in the stack's directory, so `sandboxDown` stops it too) and
 * stops it in `afterAll`. It serves only Ingresses of the IngressClass `traefik`, which the stack's
 * Contour does not take, so the two never answer for one Ingress.
 *
 * Clients: every request goes to Traefik's loopback entrypoint with the hostname as SNI and Host,
 * trusting only Pebble's issuing root (its management API `/roots/0`): what a client that resolved the
 * hostname to the platform would see.
 */
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { connect, type PeerCertificate } from 'node:tls';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import path from 'node:path';

import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { readPid, stopProcess } from '../../../src/sandbox/processes.js';
import {
  TRAEFIK,
  backendEndpointSlice,
  installTraefikCrds,
  startTraefik,
  type StartedTraefik,
  type TraefikOptions,
  type TraefikPorts,
} from '../../../src/data-planes/traefik/sandbox-process.js';
import { getPebble, kube, sandbox } from './cluster.js';
import { stackKubectl } from './envoy-gateway.js';
import { freePort } from './stack-controller.js';

const paths = sandboxPaths(sandbox.sandboxDir);

/** Free loopback ports for Traefik's entrypoints. */
export async function freeTraefikPorts(): Promise<TraefikPorts> {
  return { web: await freePort(), websecure: await freePort(), ping: await freePort() };
}

/**
 * Installs Traefik's CRDs and IngressClass on the stack's API server and starts Traefik, on free
 * ports unless `ports` are given (a restart on the same addresses); `options.appendToLog` keeps the
 * earlier run's log (its access log) in `traefikLogPath()`.
 */
export async function startStackTraefik(
  options: TraefikOptions & { ports?: TraefikPorts; appendToLog?: boolean } = {},
): Promise<StartedTraefik> {
  await stopProcess(paths, TRAEFIK); // a leftover of an interrupted run
  const kubectl = stackKubectl();
  await installTraefikCrds(kubectl, paths, path.join(sandbox.toolsBinDir, 'traefik-crds.yaml'));
  const { ports, ...rest } = options;
  return startTraefik(
    paths,
    path.join(sandbox.toolsBinDir, 'traefik'),
    sandbox.kubeconfig,
    ports ?? (await freeTraefikPorts()),
    rest,
  );
}

/** The stack's Traefik's log: its own lines and its access log (`--accessLog`, common log format). */
export function traefikLogPath(): string {
  return path.join(paths.logsDir, `${TRAEFIK}.log`);
}

/**
 * Sends `signal` to the stack's Traefik process (`SIGSTOP` pauses it: connections are accepted by the
 * kernel and never answered; `SIGCONT` resumes it). Returns its pid.
 *
 * @throws Error when no Traefik of the stack runs
 */
export async function signalStackTraefik(signal: NodeJS.Signals): Promise<number> {
  const pid = await readPid(paths, TRAEFIK);
  if (pid === undefined) throw new Error(`the stack's Traefik has no pid file in ${paths.pidsDir}`);
  process.kill(pid, signal);
  return pid;
}

/** Stops the stack's Traefik (SIGTERM, SIGKILL after 5 s). */
export async function stopStackTraefik(): Promise<void> {
  await stopProcess(paths, TRAEFIK);
}

/** Pebble's issuing root, PEM: what a browser of the sandbox would trust. */
export async function pebbleRoot(): Promise<string> {
  return getPebble(`${sandbox.acmeMgmtUrl}/roots/0`);
}

/** `host:port` split. */
function hostPort(addr: string): { host: string; port: number } {
  const at = addr.lastIndexOf(':');
  return { host: addr.slice(0, at), port: Number(addr.slice(at + 1)) };
}

/** What a TLS handshake with `servername` presented. */
export interface Handshake {
  readonly certificate: PeerCertificate;
  /** True when the chain verified up to `ca` and names `servername`. */
  readonly authorized: boolean;
  readonly authorizationError?: string;
}

/**
 * One TLS handshake with `addr`, SNI `servername`, trusting `ca`; the connection is closed after it.
 * An untrusted certificate is reported (`authorized: false`), not thrown.
 *
 * @throws Error when the connection or handshake fails
 */
export function tlsHandshake(addr: string, servername: string, ca: string): Promise<Handshake> {
  const { host, port } = hostPort(addr);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, servername, ca, rejectUnauthorized: false }, () => {
      const certificate = socket.getPeerCertificate();
      const error = socket.authorizationError;
      socket.end();
      resolve({
        certificate,
        authorized: socket.authorized,
        ...(error ? { authorizationError: String(error) } : {}),
      });
    });
    socket.setTimeout(5000, () => socket.destroy(new Error(`TLS handshake with ${addr} timed out`)));
    socket.on('error', reject);
  });
}

/** An HTTPS answer. */
export interface HttpsAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/**
 * `GET http://<hostname><target>` sent to `addr` (Host `hostname`), plain HTTP, no redirect followed.
 *
 * @throws Error when the connection fails or no answer comes within 5 s
 */
export function httpGet(addr: string, hostname: string, target: string): Promise<HttpsAnswer> {
  const { host, port } = hostPort(addr);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host, port, method: 'GET', path: target, headers: { host: hostname }, agent: false, timeout: 5000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${addr} for ${hostname} within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * `method https://<hostname><target>` sent to `addr` (SNI and Host `hostname`), verifying the
 * certificate against `ca` and `hostname` as a browser would.
 *
 * @throws Error when the connection fails, the certificate is not trusted for `hostname`, or no answer
 *   comes within 5 s
 */
export function httpsGet(
  addr: string,
  hostname: string,
  target: string,
  ca: string,
  method = 'GET',
): Promise<HttpsAnswer> {
  const { host, port } = hostPort(addr);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host,
        port,
        method,
        path: target,
        servername: hostname,
        headers: { host: hostname },
        ca,
        agent: false,
        timeout: 5000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${addr} for ${hostname} within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * A project namespace of plan `plan` (label `portico.dev/plan`) whose Service `web` (port `http`
 * 80) has an EndpointSlice `web-1` at the sandbox's project backend on `127.0.0.1:backendPort`, so
 * Traefik routes its domains to a process that answers.
 */
export async function createProjectWithBackend(
  namespace: string,
  backendPort: number,
  plan = 'pro',
): Promise<void> {
  const { core, discovery } = kube();
  await core.createNamespace({
    body: { metadata: { name: namespace, labels: { 'portico.dev/plan': plan } } },
  });
  await core.createNamespacedService({
    namespace,
    body: { metadata: { name: 'web' }, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } },
  });
  await discovery.createNamespacedEndpointSlice({
    namespace,
    body: backendEndpointSlice(namespace, 'web', 'web-1', backendPort) as unknown as V1EndpointSlice,
  });
}
