/**
 * Contour, the ingress controller of the sandbox's default data plane (`--data-plane contour`): the
 * real controller that takes Portico's Ingresses, writes their `status.loadBalancer`, and builds the
 * Envoy configuration it would push over xDS (`contour cli lds|rds|cds|eds|sds` reads it). No Envoy
 * runs here: the controller's status writes and its xDS are the evidence (docs/routing.md,
 * "Contour").
 *
 * Contour runs against the sandbox's API server with the kubeconfig, without leader election,
 * serving xDS in plaintext on loopback (`--insecure`), and publishes 127.0.0.1 as every Ingress's
 * address (`--ingress-status-address`). Every port it binds is one the sandbox picked, so parallel
 * stacks never collide (its defaults, 8000, 8001 and 6060, are fixed).
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

import { stringify } from 'yaml';

import { DEFAULT_GATEWAY_DOMAIN } from '../../api/ratelimitpolicy.js';
import {
  extensionServiceApply,
  type ExtensionServiceOptions,
} from '../../controllers/ratelimitpolicy/attachment.js';
import { runKubectl, type Kubectl } from '../../sandbox/kubectl.js';
import type { SandboxPaths } from '../../sandbox/paths.js';
import { startDetached, type StartedProcess } from '../../sandbox/processes.js';
import { httpProbe, waitUntilReady } from '../../sandbox/readiness.js';

export const CONTOUR = 'contour';

/** The address Contour publishes in each Ingress's `status.loadBalancer.ingress`. */
export const CONTOUR_INGRESS_STATUS_ADDRESS = '127.0.0.1';

/**
 * The Kubernetes client's rate of Contour in the sandbox, in requests per second, and its burst.
 * Contour's own defaults (client-go's 5 QPS, burst 10) make it write Ingress status at about two a
 * second, so a burst of domains waits minutes for its acknowledgement (docs/routing.md, "Contour at
 * scale"). `PORTICO_SANDBOX_CONTOUR_CLIENT_QPS` and `PORTICO_SANDBOX_CONTOUR_CLIENT_BURST` override
 * them (a benchmark compares rates with them).
 */
export const CONTOUR_CLIENT_QPS = 100;
export const CONTOUR_CLIENT_BURST = 200;

/** Contour's client rate and burst: the environment's overrides, else the sandbox's defaults. */
export function contourClientRate(env: NodeJS.ProcessEnv): { qps: string; burst: string } {
  const pick = (name: string, fallback: number): string => {
    const value = env[name];
    return value !== undefined && /^\d+(\.\d+)?$/.test(value) ? value : String(fallback);
  };
  return {
    qps: pick('PORTICO_SANDBOX_CONTOUR_CLIENT_QPS', CONTOUR_CLIENT_QPS),
    burst: pick('PORTICO_SANDBOX_CONTOUR_CLIENT_BURST', CONTOUR_CLIENT_BURST),
  };
}

/** Ports Contour binds, all on 127.0.0.1. */
export interface ContourPorts {
  /** xDS gRPC (plaintext): what Envoy, and `contour cli`, connect to. */
  readonly xds: number;
  /** Prometheus `/metrics`. */
  readonly metrics: number;
  /** `/healthz`. */
  readonly health: number;
  /** The debug HTTP endpoint (`/debug/dag`, pprof). */
  readonly debug: number;
}

/**
 * The ExtensionService the operator writes with its default flags (`--ratelimit-extension-service`,
 * `--ratelimit-service`, `--ratelimit-gateway-timeout-ms`; docs/ratelimits.md, "Attaching to Contour").
 */
export function rateLimitExtensionService(namespace: string): ExtensionServiceOptions {
  return {
    namespace,
    name: 'portico-ratelimit',
    serviceName: 'portico-ratelimit',
    servicePort: 8081,
    timeoutMs: 1000,
  };
}

/**
 * Contour's configuration file (`contour serve --config-path`, pkg/config/parameters.go).
 * `enableExternalNameService`: Portico routes the ACME challenge path to an ExternalName Service
 * (docs/routing.md), which Contour refuses unless this is set. `rateLimitService`: Envoy's ratelimit
 * filter calls Portico's rate-limit service through the operator's ExtensionService, with the domain
 * the server's `--gateway-domain` expects, failing open, without Envoy's own draft-03 headers.
 *
 * @param operatorNamespace where the operator writes the ExtensionService
 */
export function contourConfig(operatorNamespace: string): Record<string, unknown> {
  const ext = rateLimitExtensionService(operatorNamespace);
  return {
    enableExternalNameService: true,
    rateLimitService: {
      extensionService: `${ext.namespace}/${ext.name}`,
      domain: DEFAULT_GATEWAY_DOMAIN,
      failOpen: true,
      enableXRateLimitHeaders: false,
    },
  };
}

/**
 * Applies, before Contour starts, the ExtensionService its `rateLimitService` names (Contour reads it
 * once at start and does not start without it: cmd/contour/serve.go `getExtensionSvcConfig`), under
 * the operator's field manager, which later applies the same; and a selectorless Service
 * `portico-ratelimit` (port 8081) for it to name, which the chart creates in a cluster (Contour leaves
 * an ExtensionService whose Service is missing out of its configuration). The sandbox's rate-limit
 * server listens on loopback, so the Service has no endpoints: no Envoy runs here.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function applyRateLimitExtension(
  kubectl: Kubectl,
  paths: SandboxPaths,
  operatorNamespace: string,
): Promise<void> {
  const ext = rateLimitExtensionService(operatorNamespace);
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: ext.serviceName, namespace: ext.namespace },
    spec: { ports: [{ name: 'grpc', port: ext.servicePort, protocol: 'TCP' }] },
  };
  const file = path.join(paths.dir, 'contour-ratelimit.yaml');
  await writeFile(file, [service, extensionServiceApply(ext)].map((o) => stringify(o)).join('---\n'));
  await runKubectl(kubectl, ['apply', '--server-side', '--field-manager=portico-controller', '-f', file]);
}

/**
 * `contour serve`'s flags in the sandbox. `ingressClassName`: serve only Ingresses and HTTPProxies
 * of that class (`--ingress-class-name`; Contour then ignores objects with no class), as a Contour
 * of Portico's own would (docs/routing.md, "A routing class of Portico's own"); undefined: Contour's
 * default, objects with no class or class `contour`.
 */
export function contourServeArgs(
  kubeconfig: string,
  configPath: string,
  ports: ContourPorts,
  rate: { qps: string; burst: string } = contourClientRate({}),
  ingressClassName?: string,
): string[] {
  return [
    'serve',
    ...(ingressClassName === undefined ? [] : ['--ingress-class-name', ingressClassName]),
    '--kubeconfig',
    kubeconfig,
    '--config-path',
    configPath,
    '--insecure',
    '--xds-address',
    '127.0.0.1',
    '--xds-port',
    String(ports.xds),
    '--http-address',
    '127.0.0.1',
    '--http-port',
    String(ports.metrics),
    '--health-address',
    '127.0.0.1',
    '--health-port',
    String(ports.health),
    '--debug-http-address',
    '127.0.0.1',
    '--debug-http-port',
    String(ports.debug),
    '--ingress-status-address',
    CONTOUR_INGRESS_STATUS_ADDRESS,
    '--disable-leader-election',
    '--kubernetes-client-qps',
    rate.qps,
    '--kubernetes-client-burst',
    rate.burst,
  ];
}

/**
 * `kubectl apply --server-side -f <crdsFile>` (Contour's CRDs, from the module version of the
 * binary), then waits until those CRDs are Established.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function installContourCrds(kubectl: Kubectl, crdsFile: string): Promise<void> {
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', crdsFile]);
  await runKubectl(kubectl, ['wait', '--for=condition=Established', '--timeout=60s', '-f', crdsFile]);
}

/** A running Contour. */
export interface StartedContour {
  readonly process: StartedProcess;
  /** `127.0.0.1:<port>` of its xDS server. */
  readonly xdsAddr: string;
  readonly metricsUrl: string;
  readonly healthUrl: string;
}

/** A second Contour beside the sandbox's, for one class (`startContour`'s last argument). */
export interface ContourInstance {
  /** Its process name (`<dir>/pids/<name>.pid`, `<dir>/logs/<name>.log`) and config file stem. */
  readonly name: string;
  /** `--ingress-class-name` (`contourServeArgs`). */
  readonly ingressClassName: string;
}

/**
 * Writes Contour's configuration file into the sandbox, starts `contour serve`, and waits until its
 * `/healthz` answers 200. Without `instance`, the sandbox's Contour (process `contour`, all
 * classless objects); with it, another one serving only `instance.ingressClassName`, stopped with
 * `stopProcess(paths, instance.name)`.
 *
 * @param binary the `contour` binary (tools.sh)
 * @throws ComponentStartError when it cannot start, exits, or is not healthy within 60 s
 */
export async function startContour(
  paths: SandboxPaths,
  binary: string,
  kubeconfig: string,
  ports: ContourPorts,
  operatorNamespace: string,
  instance?: ContourInstance,
): Promise<StartedContour> {
  const configPath =
    instance === undefined ? paths.contourConfig : path.join(paths.dir, `${instance.name}.yaml`);
  await writeFile(configPath, stringify(contourConfig(operatorNamespace)));
  const rate = contourClientRate(process.env);
  const proc = await startDetached(paths, {
    name: instance?.name ?? CONTOUR,
    command: binary,
    args: contourServeArgs(kubeconfig, configPath, ports, rate, instance?.ingressClassName),
  });
  const healthUrl = `http://127.0.0.1:${ports.health}/healthz`;
  await waitUntilReady(proc, httpProbe(healthUrl), { timeoutMs: 60_000, intervalMs: 250 });
  return {
    process: proc,
    xdsAddr: `127.0.0.1:${ports.xds}`,
    metricsUrl: `http://127.0.0.1:${ports.metrics}/metrics`,
    healthUrl,
  };
}
