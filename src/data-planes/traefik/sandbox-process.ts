/**
 * Traefik, the data plane of `portico sandbox up --data-plane traefik`: a real Traefik (built from the
 * Go module proxy by scripts/install-tools.sh) that terminates TLS with the certificates Portico
 * issues and proxies to the project's backend itself, so a request to a custom domain is answered
 * end to end on this machine (docs/routing.md, "Traefik").
 *
 * Traefik reads the sandbox's API server through `KUBECONFIG` (its Kubernetes providers use that file
 * when it is set and no in-cluster service account is found) with two providers: `kubernetesIngress`
 * for Portico's Ingresses of the IngressClass `traefik` (publishing 127.0.0.1 in each Ingress's
 * `status.loadBalancer`, which the operator's acknowledgement reads) and `kubernetesCRD` for the
 * redirect Middlewares the `traefik` flavor writes (src/data-planes/traefik/middleware.ts). Entrypoints `web` (HTTP)
 * and `websecure` (HTTPS) listen on free loopback ports; its ping endpoint, on a third one, is the
 * readiness probe. Update checks and anonymous usage reports are off: nothing leaves the machine.
 * Its access log (common log format, in its log file) keeps the User-Agent of each request.
 */
import { readFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { parseAllDocuments, stringify } from 'yaml';

import { runKubectl, type Kubectl } from '../../sandbox/kubectl.js';
import { manifestFiles } from '../../sandbox/examples.js';
import type { SandboxPaths } from '../../sandbox/paths.js';
import { startDetached, type StartedProcess } from '../../sandbox/processes.js';
import { httpProbe, waitUntilReady } from '../../sandbox/readiness.js';
import { SandboxError } from '../../sandbox/errors.js';

export const TRAEFIK = 'traefik';
/** The sandbox's process serving the example project's page (src/sandbox/project-backend.ts). */
export const PROJECT_BACKEND = 'project-backend';
/** The IngressClass Portico's Ingresses name and Traefik serves (`providers.kubernetesIngress.ingressClass`). */
export const TRAEFIK_INGRESS_CLASS = 'traefik';
/** `spec.controller` of an IngressClass Traefik takes (pkg/provider/kubernetes/ingress, v3.6). */
export const TRAEFIK_INGRESS_CONTROLLER = 'traefik.io/ingress-controller';
/** The address Traefik publishes in each Ingress's `status.loadBalancer.ingress`. */
export const TRAEFIK_INGRESS_STATUS_ADDRESS = '127.0.0.1';
/** The label the examples' hand-managed EndpointSlices carry (examples/01-shop-project.yaml). */
const SANDBOX_MANAGED_BY = 'sandbox.portico.dev';

/** Ports Traefik binds, all on 127.0.0.1. */
export interface TraefikPorts {
  /** Entrypoint `web`: plain HTTP. */
  readonly web: number;
  /** Entrypoint `websecure`: HTTPS, TLS on every router. */
  readonly websecure: number;
  /** Entrypoint `traefik`: `/ping` only (no dashboard, no API). */
  readonly ping: number;
}

/** How a platform has configured Traefik beyond the sandbox's defaults. */
export interface TraefikOptions {
  /**
   * Every plain HTTP request on `web` answered with a redirect to HTTPS on `websecure`: Traefik's
   * entrypoint redirect (`--entryPoints.web.http.redirections.entryPoint.to=websecure`, scheme
   * `https`; permanent by default, so 301 to GET and 308 to other methods), the setting a platform
   * running Traefik uses for "HTTP goes to HTTPS". The `Location` names `websecure`'s port (none when
   * it is 443). The CA's HTTP-01 request is redirected too and follows (RFC 8555 §8.3), as does the
   * operator's self-check (src/acme/self-check.ts). Default false: `web` serves the routes as they are.
   */
  readonly httpsRedirect?: boolean;
}

/** Traefik's flags for the entrypoint redirect of `TraefikOptions.httpsRedirect` (v3.6 static options). */
export const TRAEFIK_HTTPS_REDIRECT_ARGS: readonly string[] = [
  '--entryPoints.web.http.redirections.entryPoint.to=websecure',
  '--entryPoints.web.http.redirections.entryPoint.scheme=https',
];

/**
 * Traefik's static configuration as command-line flags (its static options, v3.6: `--entryPoints.*`,
 * `--providers.*`, `--ping`, `--global.*`).
 *
 * @param ingressClass the IngressClass whose Ingresses Traefik serves
 */
export function traefikArgs(
  ports: TraefikPorts,
  ingressClass: string = TRAEFIK_INGRESS_CLASS,
  options: TraefikOptions = {},
): string[] {
  return [
    '--global.checkNewVersion=false',
    '--global.sendAnonymousUsage=false',
    `--entryPoints.web.address=127.0.0.1:${ports.web}`,
    `--entryPoints.websecure.address=127.0.0.1:${ports.websecure}`,
    '--entryPoints.websecure.http.tls=true',
    `--entryPoints.traefik.address=127.0.0.1:${ports.ping}`,
    '--ping=true',
    '--ping.entryPoint=traefik',
    '--providers.kubernetesIngress=true',
    `--providers.kubernetesIngress.ingressClass=${ingressClass}`,
    `--providers.kubernetesIngress.ingressEndpoint.ip=${TRAEFIK_INGRESS_STATUS_ADDRESS}`,
    // The challenge path of a redirect domain names Portico's ExternalName Service (docs/routing.md).
    '--providers.kubernetesIngress.allowExternalNameServices=true',
    '--providers.kubernetesCRD=true',
    '--log.level=INFO',
    '--accessLog=true',
    // Traefik drops every request header from its access log by default: the User-Agent says who
    // asked (the CA's validation, the operator's self-check and serving check, a browser).
    '--accessLog.fields.headers.names.User-Agent=keep',
    // Requests its own routers answer (the entrypoint redirect of `httpsRedirect`) are logged too.
    '--accessLog.addInternals=true',
    ...(options.httpsRedirect === true ? TRAEFIK_HTTPS_REDIRECT_ARGS : []),
  ];
}

/**
 * The operator's flags for Traefik (src/controller/config-flags.ts): Ingresses of `ingressClass`
 * written in the `traefik` flavor (a Middleware per redirect), the data plane declared (so a flavor
 * Traefik ignores would say so: src/routing/data-planes.ts), Routed waiting for Traefik to publish
 * each Ingress's address, and, given Traefik's `websecure` address (`host:port`), the serving check
 * requesting each domain there (Ready names what it saw).
 */
export function traefikOperatorFlags(
  ingressClass: string = TRAEFIK_INGRESS_CLASS,
  servingCheckAddress?: string,
): Record<string, string> {
  return {
    '--ingress-flavor': 'traefik',
    '--data-plane': 'traefik',
    '--ingress-class': ingressClass,
    '--data-plane-acknowledgement': 'true',
    '--data-plane-name': 'Traefik',
    ...(servingCheckAddress === undefined ? {} : { '--serving-check-address': servingCheckAddress }),
  };
}

/** The IngressClass `name` that Traefik takes. */
export function traefikIngressClass(name: string = TRAEFIK_INGRESS_CLASS): Record<string, unknown> {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'IngressClass',
    metadata: { name },
    spec: { controller: TRAEFIK_INGRESS_CONTROLLER },
  };
}

/**
 * Applies Traefik's CRDs (from the module version of the binary; its CRD provider watches every one
 * of them) and waits until they are Established, then applies the IngressClass `ingressClass`.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function installTraefikCrds(
  kubectl: Kubectl,
  paths: SandboxPaths,
  crdsFile: string,
  ingressClass: string = TRAEFIK_INGRESS_CLASS,
): Promise<void> {
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', crdsFile]);
  await runKubectl(kubectl, ['wait', '--for=condition=Established', '--timeout=60s', '-f', crdsFile]);
  const file = path.join(paths.dir, `ingressclass-${ingressClass}.yaml`);
  await writeFile(file, stringify(traefikIngressClass(ingressClass)));
  await runKubectl(kubectl, ['apply', '--server-side', '-f', file]);
}

/** A running Traefik. */
export interface StartedTraefik {
  readonly process: StartedProcess;
  /** `127.0.0.1:<port>` of entrypoint `web` (HTTP). */
  readonly httpAddr: string;
  /** `127.0.0.1:<port>` of entrypoint `websecure` (HTTPS). */
  readonly httpsAddr: string;
  /** `/ping`, 200 once Traefik runs. */
  readonly pingUrl: string;
}

/**
 * Starts Traefik (process `name`, `<dir>/logs/<name>.log`) reading the cluster of `kubeconfig`, and
 * waits until its `/ping` answers 200. Stop it with `stopProcess(paths, name)`.
 *
 * @param binary the `traefik` binary (tools.sh, install-tools.sh `--traefik`)
 * @throws ComponentStartError when it cannot start, exits, or does not answer within 60 s
 */
export async function startTraefik(
  paths: SandboxPaths,
  binary: string,
  kubeconfig: string,
  ports: TraefikPorts,
  options: { name?: string; ingressClass?: string; appendToLog?: boolean } & TraefikOptions = {},
): Promise<StartedTraefik> {
  const proc = await startDetached(paths, {
    name: options.name ?? TRAEFIK,
    command: binary,
    args: traefikArgs(ports, options.ingressClass, options),
    ...(options.appendToLog === true ? { appendToLog: true } : {}),
    // Traefik's Kubernetes providers build an out-of-cluster client from KUBECONFIG when it is set.
    env: { KUBECONFIG: kubeconfig },
  });
  const pingUrl = `http://127.0.0.1:${ports.ping}/ping`;
  await waitUntilReady(proc, httpProbe(pingUrl), { timeoutMs: 60_000, intervalMs: 250 });
  return {
    process: proc,
    httpAddr: `127.0.0.1:${ports.web}`,
    httpsAddr: `127.0.0.1:${ports.websecure}`,
    pingUrl,
  };
}

/**
 * Starts the example project's backend (src/sandbox/project-backend.ts) on `127.0.0.1:port` as a
 * process of the sandbox, and waits until it answers.
 *
 * @param repoRoot the repository whose `dist/` is run
 * @throws ComponentStartError when it exits or does not answer within 30 s
 */
export async function startProjectBackendProcess(
  paths: SandboxPaths,
  repoRoot: string,
  port: number,
  project: string,
): Promise<{ process: StartedProcess; url: string }> {
  const proc = await startDetached(paths, {
    name: PROJECT_BACKEND,
    command: process.execPath,
    args: [path.join(repoRoot, 'dist', 'sandbox', 'project-backend.js'), String(port), project],
  });
  const url = `http://127.0.0.1:${port}/`;
  await waitUntilReady(proc, httpProbe(url), { timeoutMs: 30_000, intervalMs: 200 });
  return { process: proc, url };
}

/**
 * An EndpointSlice of Service `service` with one ready endpoint: the backend on `127.0.0.1:port`.
 *
 * Its `addressType` is `FQDN` with the address `127.0.0.1`: the API server refuses a loopback address
 * in an `IPv4` slice (core validation `ValidateEndpointIP`: "may not be in the loopback range"), while
 * `127.0.0.1` is a valid domain name of four labels. Traefik builds each server URL from the slice's
 * addresses as they are written (`http://127.0.0.1:<port>`, pkg/provider/kubernetes/ingress, v3.6), so
 * it reaches the backend; a kube-proxy or an Envoy would not, and the sandbox runs neither.
 */
export function backendEndpointSlice(
  namespace: string,
  service: string,
  name: string,
  port: number,
  portName = 'http',
): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace,
      labels: {
        'kubernetes.io/service-name': service,
        'endpointslice.kubernetes.io/managed-by': SANDBOX_MANAGED_BY,
      },
    },
    addressType: 'FQDN',
    ports: [{ name: portName, port, protocol: 'TCP' }],
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An EndpointSlice the sandbox manages by hand (examples/), or undefined for any other object. */
function sandboxManagedSlice(
  object: unknown,
): { namespace: string; service: string; name: string; portName: string } | undefined {
  if (!isRecord(object) || object['kind'] !== 'EndpointSlice') return undefined;
  const metadata = isRecord(object['metadata']) ? object['metadata'] : {};
  const labels = isRecord(metadata['labels']) ? metadata['labels'] : {};
  const { name, namespace } = metadata;
  const service = labels['kubernetes.io/service-name'];
  if (labels['endpointslice.kubernetes.io/managed-by'] !== SANDBOX_MANAGED_BY) return undefined;
  if (typeof name !== 'string' || typeof namespace !== 'string' || typeof service !== 'string')
    return undefined;
  const ports: unknown[] = Array.isArray(object['ports']) ? (object['ports'] as unknown[]) : [];
  const first = ports[0];
  const portName = isRecord(first) && typeof first['name'] === 'string' ? first['name'] : 'http';
  return { namespace, service, name, portName };
}

/**
 * Copies the manifests of `examplesDir` into `outDir`, each EndpointSlice the sandbox manages by hand
 * (label `endpointslice.kubernetes.io/managed-by: sandbox.portico.dev`) replaced by one that points at
 * the sandbox's backend on `127.0.0.1:backendPort` ({@link backendEndpointSlice}), same name, Service
 * and port name.
 *
 * @returns `outDir`, and the namespaces whose Service now has the backend behind it
 * @throws SandboxError on invalid YAML
 */
export async function examplesWithBackend(
  examplesDir: string,
  outDir: string,
  backendPort: number,
): Promise<{ dir: string; projects: string[] }> {
  await mkdir(outDir, { recursive: true });
  const projects: string[] = [];
  for (const file of await manifestFiles(examplesDir)) {
    const docs: string[] = [];
    for (const doc of parseAllDocuments(await readFile(file, 'utf8'))) {
      if (doc.errors.length > 0) throw new SandboxError(`${file}: invalid YAML: ${doc.errors[0]?.message}`);
      const slice = sandboxManagedSlice(doc.toJS());
      if (slice !== undefined) {
        docs.push(
          stringify(
            backendEndpointSlice(slice.namespace, slice.service, slice.name, backendPort, slice.portName),
          ),
        );
        projects.push(slice.namespace);
      } else {
        // A document after the first prints its own `---` marker: the join adds it back.
        docs.push(doc.toString().replace(/^---\n/, ''));
      }
    }
    await writeFile(path.join(outDir, path.basename(file)), docs.join('---\n'));
  }
  return { dir: outDir, projects: [...new Set(projects)] };
}

/** What `startTraefikDataPlane` started and wrote. */
export interface TraefikDataPlane {
  readonly traefik: StartedTraefik;
  /** The examples to apply: examples/ with the project's EndpointSlice pointing at the backend. */
  readonly examplesDir: string;
  /** `http://127.0.0.1:<port>/` of the project's backend. */
  readonly backendUrl: string;
}

/**
 * The sandbox's Traefik data plane: Traefik's CRDs and IngressClass, the example project's backend
 * (named after the examples' projects), examples/ rewritten to point at it in `<dir>/examples/`, and
 * Traefik itself.
 *
 * @throws CommandFailedError (kubectl), ComponentStartError, SandboxError (invalid examples)
 */
export async function startTraefikDataPlane(
  paths: SandboxPaths,
  repoRoot: string,
  tools: { readonly traefik: string; readonly traefikCrds: string },
  kubectl: Kubectl,
  step: (line: string) => void,
  ports: TraefikPorts & { readonly backend: number },
  options: { readonly ingressClass?: string } & TraefikOptions = {},
): Promise<TraefikDataPlane> {
  const { ingressClass = TRAEFIK_INGRESS_CLASS, httpsRedirect = false } = options;
  step(
    `installing Traefik's CRDs; starting the example project's backend and Traefik (HTTPS on 127.0.0.1:${ports.websecure}${httpsRedirect ? `; HTTP on ${ports.web} redirected to it` : ''})`,
  );
  await installTraefikCrds(kubectl, paths, tools.traefikCrds, ingressClass);
  const examples = await examplesWithBackend(
    path.join(repoRoot, 'examples'),
    path.join(paths.dir, 'examples'),
    ports.backend,
  );
  const backend = await startProjectBackendProcess(
    paths,
    repoRoot,
    ports.backend,
    examples.projects.join(', ') || 'the example project',
  );
  const traefik = await startTraefik(paths, tools.traefik, kubectl.kubeconfig, ports, {
    ingressClass,
    httpsRedirect,
  });
  return { traefik, examplesDir: examples.dir, backendUrl: backend.url };
}

/** The operator's options in the sandbox where Traefik runs (src/sandbox/controller.ts). */
export const TRAEFIK_CONTROLLER_OPTIONS = {
  dataPlane: 'traefik',
  dataPlaneName: 'Traefik',
  ingressFlavor: 'traefik',
  ingressClass: TRAEFIK_INGRESS_CLASS,
} as const;

/** The facts of `<dir>/env` about Traefik and the backend; none without them. */
export function traefikSandboxEnv(dataPlane: TraefikDataPlane | undefined): {
  ingressHttpAddr?: string;
  ingressHttpsAddr?: string;
  traefikPingUrl?: string;
  projectBackendUrl?: string;
} {
  if (dataPlane === undefined) return {};
  return {
    ingressHttpAddr: dataPlane.traefik.httpAddr,
    ingressHttpsAddr: dataPlane.traefik.httpsAddr,
    traefikPingUrl: dataPlane.traefik.pingUrl,
    projectBackendUrl: dataPlane.backendUrl,
  };
}
