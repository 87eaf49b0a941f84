/**
 * Envoy Gateway v1.9.1, the Gateway API implementation of `--data-plane envoy-gateway`: the real
 * controller that takes Portico's HTTPRoutes and ListenerSets, writes their status, and translates
 * them into the Envoy configuration it would push over xDS (`egctl x translate` shows it for the same
 * objects). No Envoy runs here: its status writes and its translation are the evidence
 * (docs/routing.md, "Envoy Gateway").
 *
 * How it runs (facts of v1.9.1's source, github.com/envoyproxy/gateway):
 * - `envoy-gateway server --config-path <file>`, kind `EnvoyGateway` (api/v1alpha1
 *   envoygateway_types.go), provider `Kubernetes`, with `KUBECONFIG` pointing at the sandbox's API
 *   server and `ENVOY_GATEWAY_NAMESPACE` unset (its namespace is `envoy-gateway-system`).
 * - With the Kubernetes provider the xDS server reads its TLS files from `/certs/` (constants in
 *   internal/xds/runner/runner.go; no setting moves them) and does not start without them. The
 *   sandbox makes them with `envoy-gateway certgen --local --config-home <dir>` (its own files, no
 *   Secrets in the cluster) and runs the server in a private mount namespace (`unshare --mount`) where
 *   `<dir>/certs/envoy-gateway` is bind-mounted on `/certs`: each stack sees its own, and the host's
 *   `/certs` stays an empty directory. That needs root (CAP_SYS_ADMIN).
 * - Listeners: the admin API (`admin.address`, on a port the sandbox picks, 127.0.0.1) serves
 *   `/api/server_info` and `/api/config_dump`. The topology-injector webhook (:9443) and the Prometheus
 *   endpoint (:19001) are off by configuration; controller-runtime's metrics (:8080) and health probe
 *   (:8081) are off by link-time settings (tools.sh). Two cannot be moved: the xDS
 *   server binds 0.0.0.0:18000 (`bootstrap.DefaultXdsServerPort` and `XdsServerAddress`, constants);
 *   when another stack holds it, Envoy Gateway logs "failed to listen on address" and carries on
 *   (nothing here connects to it); the Wasm cache server (:18002) starts only with the
 *   `envoy-oidc-hmac` Secret, which local certgen does not create, so it stays off.
 * - Its infrastructure manager writes an Envoy Deployment and Service per Gateway into
 *   `envoy-gateway-system`; without a kubelet they never run, so the Gateway stays
 *   `Programmed=False` (`AddressNotAssigned`). Portico reads the HTTPRoute's and the ListenerSet's
 *   status, never the Gateway's `Programmed` (docs/routing.md, "Envoy Gateway").
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { stringify } from 'yaml';

import { ComponentStartError, SandboxError } from '../../sandbox/errors.js';
import { runKubectl, type Kubectl } from '../../sandbox/kubectl.js';
import type { SandboxPaths } from '../../sandbox/paths.js';
import { startDetached, type StartedProcess } from '../../sandbox/processes.js';
import { httpProbe, waitUntilReady } from '../../sandbox/readiness.js';

export const ENVOY_GATEWAY = 'envoy-gateway';
/** The version tools.sh builds (its ENVOY_GATEWAY_VERSION). */
export const ENVOY_GATEWAY_VERSION = 'v1.9.1';
/** The data plane's name in Portico's Routed messages (`--data-plane-name`). */
export const ENVOY_GATEWAY_NAME = 'Envoy Gateway';
/** Envoy Gateway's own namespace (its default `ENVOY_GATEWAY_NAMESPACE`). */
export const ENVOY_GATEWAY_NAMESPACE = 'envoy-gateway-system';
/** Envoy Gateway's default `gateway.controllerName`, which a GatewayClass names to be its. */
export const ENVOY_GATEWAY_CONTROLLER_NAME = 'gateway.envoyproxy.io/gatewayclass-controller';
/** Where the Kubernetes provider reads the xDS server's TLS files (a constant of v1.9.1). */
export const ENVOY_GATEWAY_CERTS_MOUNT = '/certs';

/** The GatewayClass and Gateway the sandbox creates for Portico's routes. */
export interface PlatformGateway {
  readonly gatewayClassName: string;
  readonly namespace: string;
  readonly name: string;
  /** The port of the Gateway's own HTTP listener. */
  readonly httpPort: number;
}

/** The sandbox's platform Gateway: `envoy-gateway-system/portico`, class `portico`, HTTP on 80. */
export const SANDBOX_GATEWAY: PlatformGateway = {
  gatewayClassName: 'portico',
  namespace: ENVOY_GATEWAY_NAMESPACE,
  name: 'portico',
  httpPort: 80,
};

/** `--gateway-parent-refs` of an operator routing to `gateway`: `namespace/name`. */
export function gatewayParentRefsArg(gateway: PlatformGateway): string {
  return `${gateway.namespace}/${gateway.name}`;
}

/**
 * The `EnvoyGateway` configuration file (`envoy-gateway server --config-path`): Kubernetes provider,
 * EnvoyPatchPolicy enabled (Portico wires its rate-limit service through one) with the runtime flag
 * `XDSNameSchemeV2` (stable listener names to patch), the admin API on 127.0.0.1:`adminPort`, no
 * Prometheus endpoint, no topology-injector webhook.
 *
 * @param adminPort the admin API's port (1-65535)
 * @throws SandboxError for a port outside 1-65535
 */
export function envoyGatewayConfig(adminPort: number): Record<string, unknown> {
  if (!Number.isInteger(adminPort) || adminPort < 1 || adminPort > 65535)
    throw new SandboxError(`Envoy Gateway's admin port ${adminPort} is not a port number (1-65535)`);
  return {
    apiVersion: 'gateway.envoyproxy.io/v1alpha1',
    kind: 'EnvoyGateway',
    gateway: { controllerName: ENVOY_GATEWAY_CONTROLLER_NAME },
    provider: {
      type: 'Kubernetes',
      kubernetes: {
        leaderElection: { disable: true },
        proxyTopologyInjector: { disabled: true },
      },
    },
    admin: { address: { host: '127.0.0.1', port: adminPort } },
    telemetry: { metrics: { prometheus: { disable: true } } },
    extensionApis: { enableEnvoyPatchPolicy: true },
    // Envoy listeners named `tcp-<port>`, whatever Gateway API listeners share the port: the names
    // Portico's rate-limit EnvoyPatchPolicy patches (routing/envoy-gateway-ratelimit.ts).
    runtimeFlags: { enabled: ['XDSNameSchemeV2'] },
    logging: { level: { default: 'info' } },
  };
}

/** The GatewayClass and the Gateway of `gateway`, as objects for `kubectl apply`. */
export function platformGatewayObjects(gateway: PlatformGateway): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'GatewayClass',
      metadata: { name: gateway.gatewayClassName },
      spec: { controllerName: ENVOY_GATEWAY_CONTROLLER_NAME },
    },
    {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name: gateway.name, namespace: gateway.namespace },
      spec: {
        gatewayClassName: gateway.gatewayClassName,
        // Each domain's ListenerSet lives in the domain's namespace (docs/routing.md).
        allowedListeners: { namespaces: { from: 'All' } },
        listeners: [
          {
            name: 'http',
            port: gateway.httpPort,
            protocol: 'HTTP',
            allowedRoutes: { namespaces: { from: 'All' } },
          },
        ],
      },
    },
  ];
}

/**
 * `kubectl apply --server-side --force-conflicts -f <crdsFile>` (Gateway API's experimental channel
 * and Envoy Gateway's own CRDs, from the module version of the binary), then waits until they are
 * Established.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function installEnvoyGatewayCrds(kubectl: Kubectl, crdsFile: string): Promise<void> {
  await runKubectl(kubectl, ['apply', '--server-side', '--force-conflicts', '-f', crdsFile], {
    timeoutMs: 180_000,
  });
  await runKubectl(kubectl, ['wait', '--for=condition=Established', '--timeout=60s', '-f', crdsFile]);
}

/**
 * Applies the GatewayClass and Gateway of `gateway` and waits (up to 60 s) until Envoy Gateway has
 * accepted both (their `Accepted` condition True).
 *
 * @throws CommandFailedError when kubectl fails or a condition is not met in time
 */
export async function applyPlatformGateway(
  kubectl: Kubectl,
  paths: SandboxPaths,
  gateway: PlatformGateway,
): Promise<void> {
  const file = path.join(paths.dir, 'envoy-gateway-platform.yaml');
  await writeFile(
    file,
    platformGatewayObjects(gateway)
      .map((o) => stringify(o))
      .join('---\n'),
  );
  await runKubectl(kubectl, ['apply', '--server-side', '--field-manager=portico-sandbox', '-f', file]);
  await runKubectl(kubectl, [
    'wait',
    '--for=condition=Accepted',
    '--timeout=60s',
    `gatewayclass/${gateway.gatewayClassName}`,
  ]);
  await runKubectl(kubectl, [
    'wait',
    '--for=condition=Accepted',
    '--timeout=60s',
    '-n',
    gateway.namespace,
    `gateway/${gateway.name}`,
  ]);
}

/** The directory of Envoy Gateway's files in a sandbox: config, certgen's output. */
export function envoyGatewayDir(paths: SandboxPaths): string {
  return path.join(paths.dir, ENVOY_GATEWAY);
}

/** Runs `binary args...` to completion; throws ComponentStartError with its output when it fails. */
function runToCompletion(binary: string, args: string[], logPath: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', (err) => {
      reject(new ComponentStartError(ENVOY_GATEWAY, `cannot run ${binary}: ${err.message}`, logPath));
    });
    child.on('close', (code) => {
      if (code === 0) resolve();
      else
        reject(
          new ComponentStartError(
            ENVOY_GATEWAY,
            `${path.basename(binary)} ${args.join(' ')} exited with ${code ?? 'a signal'}: ${output.trim().slice(-600)}`,
            logPath,
          ),
        );
    });
  });
}

/**
 * Applies the Secret `envoy` (kubernetes.io/tls: `ca.crt`, `tls.crt`, `tls.key`) from the
 * certificates `certgen --local` made for Envoy into Envoy Gateway's namespace, as `certgen` does in
 * a cluster (internal/provider/kubernetes/secrets.go `CertsToSecret`): Envoy Gateway's translation
 * refers to it for the Envoy it would run ("envoy TLS secret ... not found" otherwise). The other
 * Secrets certgen makes there are not needed: `envoy-gateway` is read from /certs, and without
 * `envoy-oidc-hmac` the Wasm cache server (a fixed port) stays off.
 *
 * @throws CommandFailedError when kubectl fails
 */
export async function applyEnvoyTlsSecret(kubectl: Kubectl, paths: SandboxPaths): Promise<void> {
  const dir = path.join(envoyGatewayDir(paths), 'certs', 'envoy');
  const [ca, crt, key] = await Promise.all(
    ['ca.crt', 'tls.crt', 'tls.key'].map(async (f) => (await readFile(path.join(dir, f))).toString('base64')),
  );
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'envoy', namespace: ENVOY_GATEWAY_NAMESPACE },
    type: 'kubernetes.io/tls',
    data: { 'ca.crt': ca, 'tls.crt': crt, 'tls.key': key },
  };
  await runKubectl(kubectl, ['apply', '--server-side', '--field-manager=portico-sandbox', '-f', '-'], {
    input: JSON.stringify(secret),
  });
}

/** A running Envoy Gateway. */
export interface StartedEnvoyGateway {
  readonly process: StartedProcess;
  /** `http://127.0.0.1:<port>` of its admin API (`/api/server_info`, `/api/config_dump`). */
  readonly adminUrl: string;
}

/**
 * Makes Envoy Gateway's control-plane certificates (`envoy-gateway certgen --local`), applies the
 * Secret `envoy` from them (namespace `envoy-gateway-system` must exist), writes its configuration,
 * starts `envoy-gateway server` in a private mount namespace with its certificates on `/certs`, and
 * waits until its admin API answers `/api/server_info`.
 *
 * @param binary the `envoy-gateway` binary (tools.sh, install-tools.sh --envoy-gateway)
 * @param kubectl the API server it watches and writes status to (its kubeconfig)
 * @param adminPort the admin API's port on 127.0.0.1
 * @throws ComponentStartError when not run as root (the mount namespace needs CAP_SYS_ADMIN), when
 *   certgen fails, or when the server exits or does not answer within 60 s; CommandFailedError when
 *   kubectl fails
 */
export async function startEnvoyGateway(
  paths: SandboxPaths,
  binary: string,
  kubectl: Kubectl,
  adminPort: number,
): Promise<StartedEnvoyGateway> {
  const logPath = paths.log(ENVOY_GATEWAY);
  if (process.getuid?.() !== 0)
    throw new ComponentStartError(
      ENVOY_GATEWAY,
      `Envoy Gateway ${ENVOY_GATEWAY_VERSION} reads its xDS certificates from ${ENVOY_GATEWAY_CERTS_MOUNT} (a constant with the Kubernetes provider); the sandbox mounts its own there in a private mount namespace, which needs root. Run the sandbox as root, or use --data-plane contour`,
    );
  const dir = envoyGatewayDir(paths);
  await mkdir(dir, { recursive: true });
  await runToCompletion(binary, ['certgen', '--local', '--config-home', dir], logPath);
  await applyEnvoyTlsSecret(kubectl, paths);
  const configPath = path.join(dir, 'envoy-gateway.yaml');
  await writeFile(configPath, stringify(envoyGatewayConfig(adminPort)));
  // The mount point; empty on the host, the stack's own certificates inside the namespace.
  await mkdir(ENVOY_GATEWAY_CERTS_MOUNT, { recursive: true });
  const proc = await startDetached(paths, {
    name: ENVOY_GATEWAY,
    command: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      'mount --bind "$1" "$2" && shift 2 && exec "$@"',
      ENVOY_GATEWAY,
      path.join(dir, 'certs', 'envoy-gateway'),
      ENVOY_GATEWAY_CERTS_MOUNT,
      binary,
      'server',
      '--config-path',
      configPath,
    ],
    env: { KUBECONFIG: kubectl.kubeconfig },
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await waitUntilReady(proc, httpProbe(`${adminUrl}/api/server_info`), {
    timeoutMs: 60_000,
    intervalMs: 250,
  });
  return { process: proc, adminUrl };
}
