/**
 * Reading what the stack's Contour would push to Envoy: its xDS, through `contour cli` (the client
 * Contour ships for this, built by scripts/install-tools.sh from the same module version as the
 * server). No Envoy runs here, so these resources are the evidence of what traffic would meet.
 *
 * `contour cli <lds|rds|cds|eds|sds>` opens a State-of-the-World stream, prints its request and each
 * DiscoveryResponse as multi-line protojson (proto field names), and keeps watching; `xdsResources`
 * reads the first response and stops the client.
 */
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';

import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { isAlive, readPid } from '../../../src/sandbox/processes.js';
import { CONTOUR } from '../../../src/data-planes/contour/sandbox-process.js';
import type { HTTPProxyWithStatus } from '../../../src/routing/acknowledgement.js';
import type { HTTPProxy } from '../../../src/data-planes/contour/httpproxy.js';
import { kube, sandbox, waitFor } from './cluster.js';

/** The xDS resource types `contour cli` reads. */
export type XdsKind = 'lds' | 'rds' | 'cds' | 'eds' | 'sds';

/** One xDS resource as protojson prints it: an `Any` with `@type` and the message's fields. */
export type XdsResource = Record<string, unknown> & { '@type': string; name?: string };

/** The stack's Contour xDS address; throws when the stack runs without Contour. */
export function contourXdsAddr(): string {
  if (sandbox.contourXdsAddr === undefined)
    throw new Error(`the e2e stack runs data plane "${sandbox.dataPlane}", not Contour`);
  return sandbox.contourXdsAddr;
}

/**
 * Splits `contour cli`'s stdout into its top-level JSON objects: protojson's multi-line output
 * closes each top-level object with a `}` alone on a line.
 */
export function splitTopLevelObjects(stdout: string): Record<string, unknown>[] {
  const objects: Record<string, unknown>[] = [];
  let current: string[] = [];
  for (const line of stdout.split('\n')) {
    if (current.length === 0 && line !== '{') continue;
    current.push(line);
    if (line === '}') {
      objects.push(JSON.parse(current.join('\n')) as Record<string, unknown>);
      current = [];
    }
  }
  return objects;
}

/**
 * The resources of the first DiscoveryResponse Contour sends for `kind` (every resource of that type
 * it holds).
 *
 * @param timeoutMs how long to wait for the response, in milliseconds
 * @param addr `host:port` of the Contour's xDS server (default: the stack's Contour)
 * @throws Error when no response arrives in time, or the client exits first (its stderr in the message)
 */
export async function xdsResources(
  kind: XdsKind,
  timeoutMs = 15_000,
  addr: string = contourXdsAddr(),
): Promise<XdsResource[]> {
  const contour = path.join(sandbox.toolsBinDir, 'contour');
  const child = spawn(contour, ['cli', kind, '--contour', addr], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  try {
    return await new Promise<XdsResource[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new Error(`contour cli ${kind}: no DiscoveryResponse within ${timeoutMs} ms; stderr: ${stderr}`),
        );
      }, timeoutMs);
      child.stdout.on('data', (chunk: string) => {
        stdout += chunk;
        // The client prints its request first (version_info "0", no nonce); a response has a nonce.
        const response = splitTopLevelObjects(stdout).find((o) => 'nonce' in o);
        if (response === undefined) return;
        clearTimeout(timer);
        resolve((response['resources'] ?? []) as XdsResource[]);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        reject(
          new Error(`contour cli ${kind} exited (${code ?? 'signal'}) before a response; stderr: ${stderr}`),
        );
      });
    });
  } finally {
    child.kill('SIGKILL');
  }
}

/** A listener's filter chain, as far as the tests read it. */
export interface FilterChain {
  filter_chain_match?: { server_names?: string[] };
  transport_socket?: {
    typed_config?: {
      common_tls_context?: { tls_certificate_sds_secret_configs?: { name: string }[] };
    };
  };
  filters?: { name: string; typed_config?: Record<string, unknown> }[];
}

/** The filter chains of listener `ingress_https` that match the SNI `hostname`. */
export async function httpsFilterChains(hostname: string): Promise<FilterChain[]> {
  const listeners = await xdsResources('lds');
  const https = listeners.find((l) => l.name === 'ingress_https') as
    { filter_chains?: FilterChain[] } | undefined;
  return (https?.filter_chains ?? []).filter((chain) =>
    chain.filter_chain_match?.server_names?.includes(hostname),
  );
}

/** The name of the SDS secret a filter chain's TLS context names. */
export function sdsSecretName(chain: FilterChain): string | undefined {
  return chain.transport_socket?.typed_config?.common_tls_context?.tls_certificate_sds_secret_configs?.[0]
    ?.name;
}

/** The serial number (uppercase hex, as Node prints it) of the leaf certificate in SDS secret `name`. */
export async function sdsCertificateSerial(name: string): Promise<string | undefined> {
  const secrets = await xdsResources('sds');
  const secret = secrets.find((s) => s.name === name) as
    { tls_certificate?: { certificate_chain?: { inline_bytes?: string } } } | undefined;
  const bytes = secret?.tls_certificate?.certificate_chain?.inline_bytes;
  if (bytes === undefined) return undefined;
  return new X509Certificate(Buffer.from(bytes, 'base64')).serialNumber;
}

/** An Envoy route, as far as the tests read it. */
export interface XdsRoute {
  match?: { prefix?: string; path?: string; path_separated_prefix?: string };
  route?: { cluster?: string; weighted_clusters?: { clusters?: { name: string }[] } };
  redirect?: {
    host_redirect?: string;
    scheme_redirect?: string;
    https_redirect?: boolean;
    response_code?: string;
  };
}

/**
 * The virtual hosts for `hostname` in every RouteConfiguration, with the configuration's name, of the
 * Contour at `addr` (default: the stack's).
 */
export async function virtualHostsFor(
  hostname: string,
  addr: string = contourXdsAddr(),
): Promise<{ routeConfig: string; routes: XdsRoute[]; rate_limits?: unknown[] }[]> {
  const configs = (await xdsResources('rds', 15_000, addr)) as (XdsResource & {
    virtual_hosts?: { domains?: string[]; routes?: XdsRoute[]; rate_limits?: unknown[] }[];
  })[];
  return configs.flatMap((config) =>
    (config.virtual_hosts ?? [])
      .filter((vh) => vh.domains?.includes(hostname) === true)
      .map((vh) => ({
        routeConfig: config.name ?? '',
        routes: vh.routes ?? [],
        ...(vh.rate_limits === undefined ? {} : { rate_limits: vh.rate_limits }),
      })),
  );
}

/** The stack's Contour process id; throws when it does not run. */
export async function contourPid(): Promise<number> {
  const pid = await readPid(sandboxPaths(sandbox.sandboxDir), CONTOUR);
  if (pid === undefined || !isAlive(pid)) throw new Error('the stack runs no Contour process');
  return pid;
}

/**
 * Pauses the stack's Contour (SIGSTOP: the process stays, its watches and writes stop, as a hung
 * controller would) for the duration of `body`, and resumes it after (SIGCONT), also when `body`
 * throws. Waits for its `/healthz` before returning.
 */
export async function withContourPaused<T>(body: () => Promise<T>): Promise<T> {
  const pid = await contourPid();
  process.kill(pid, 'SIGSTOP');
  try {
    return await body();
  } finally {
    process.kill(pid, 'SIGCONT');
    await waitFor('Contour to answer /healthz again', async () => {
      const res = await fetch(sandbox.contourHealthUrl ?? '').catch(() => undefined);
      return res?.status === 200 ? true : undefined;
    });
  }
}

/** The path a route matches, whichever of Envoy's match fields Contour used. */
export function matchedPath(route: XdsRoute): string | undefined {
  return route.match?.prefix ?? route.match?.path_separated_prefix ?? route.match?.path;
}

/** HTTPProxy `namespace/name` as the API server holds it, with the status Contour wrote. */
export async function readProxy(namespace: string, name: string): Promise<HTTPProxy & HTTPProxyWithStatus> {
  return (await kube().custom.getNamespacedCustomObject({
    group: 'projectcontour.io',
    version: 'v1',
    plural: 'httpproxies',
    namespace,
    name,
  })) as HTTPProxy & HTTPProxyWithStatus;
}

/** One version of an HTTPProxy as its watch delivered it. */
export interface ProxyVersion {
  generation: number | undefined;
  tls: boolean;
  currentStatus: string | undefined;
  /** The generation Contour's Valid condition was written for. */
  validFor: number | undefined;
}

/** Every version of HTTPProxy `name` in `namespace` from now on, as the API server's watch sends them. */
export async function watchProxy(
  namespace: string,
  name: string,
): Promise<{ seen: ProxyVersion[]; stop: () => void }> {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  const seen: ProxyVersion[] = [];
  const watch = await new Watch(kc).watch(
    `/apis/projectcontour.io/v1/namespaces/${namespace}/httpproxies`,
    { fieldSelector: `metadata.name=${name}` },
    (phase, obj: HTTPProxy & HTTPProxyWithStatus) => {
      if (phase !== 'ADDED' && phase !== 'MODIFIED') return;
      const valid = obj.status?.conditions?.find((c) => c.type === 'Valid');
      seen.push({
        generation: obj.metadata.generation,
        tls: obj.spec.virtualhost.tls !== undefined,
        currentStatus: obj.status?.currentStatus,
        validFor: valid?.observedGeneration,
      });
    },
    () => undefined,
  );
  return {
    seen,
    stop: () => {
      watch.abort();
    },
  };
}
