/**
 * The sandbox stack as a whole: `sandboxUp`, `sandboxDown`, `sandboxStatus`, `readSandboxEnv`.
 * This is the programmatic API (the e2e tests' globalSetup calls it); `cli.ts` is a thin shell over
 * it.
 *
 * Start order: tools → ports → certificates → [etcd → kube-apiserver] beside the DNS server, Pebble
 * and Redis (in parallel) → namespace and CRDs → Contour (with `dataPlane: 'contour'`) or Envoy
 * Gateway with its GatewayClass and Gateway (with `dataPlane: 'envoy-gateway'`) or the example
 * project's backend and Traefik (with `dataPlane: 'traefik'`, data-planes/traefik/sandbox-process.ts) → operator →
 * rate-limit server → env files → examples. Every start begins
 * from scratch: empty etcd, fresh certificates and ports. A failure before the env files are written
 * stops every process of the sandbox (logs stay), and is tried again with new ports (up to 3 starts)
 * when a component exited because its port was taken meanwhile; a failure of the examples leaves the stack running
 * for inspection.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { setUpChartDefaults } from './admission.js';
import {
  CERT_FILES,
  generateSandboxCertificates,
  writeSandboxCertificates,
  type SandboxCertificates,
} from './certificates.js';
import { ensureNamespace, installCrds } from './cluster.js';
import {
  SANDBOX_DATA_PLANE_MODULES,
  sandboxDataPlaneModule,
  type SandboxDataPlane,
} from '../data-planes/sandbox-registry.js';
import { CONTROLLER, startController } from './controller.js';
import { DNS_SERVER, startDnsServer, type DnsManagementClient } from './dns-server.js';
import { ComponentStartError, SandboxError } from './errors.js';
import { ETCD, startEtcd } from './etcd.js';
import { applyExamples, waitForCustomDomainsReady, waitForSubdomainsServing } from './examples.js';
import { SANDBOX_APPS_DOMAIN, startAppsZone } from './apps-zone.js';
import { apiServerReadyProbe, KUBE_APISERVER, startKubeApiserver } from './kube-apiserver.js';
import { clusterAccess } from './kubeconfig.js';
import { NODE_PROCESSES, nodeTools, startNode, stopNode } from './kubelet.js';
import type { Kubectl } from './kubectl.js';
import { ensureSandboxDirs, sandboxPaths, type SandboxPaths } from './paths.js';
import { PEBBLE, startPebble } from './pebble.js';
import { pickFreePorts } from './ports.js';
import { listPidNames, stopProcess, type StopOutcome } from './processes.js';
import { RATELIMIT_SERVER, startRateLimitServer } from './ratelimit-server.js';
import { REDIS, startRedis } from './redis.js';
import { readState, removeSandboxEnv, writeSandboxEnv, type SandboxEnv } from './state.js';
import { sandboxStatus } from './status.js';
import { installTools, toolFlags, type Tools, type ToolSets } from './tools.js';

export type { SandboxEnv } from './state.js';
export { sandboxStatus, type ComponentStatus, type SandboxStatus } from './status.js';

/** The CNAME target of the platform in the sandbox; its A record is 127.0.0.1. */
export const PLATFORM_CNAME_TARGET = 'sites.portico.test';
/** The namespace of the operator's own objects. */
export const OPERATOR_NAMESPACE = 'portico-system';
/** The ACME account e-mail of the sandbox's operator. */
export const ACME_EMAIL = 'ops@portico.test';

/** The repository this module belongs to (two levels above src/sandbox/ or dist/sandbox/). */
export const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Options of `sandboxUp`. */
export interface SandboxUpOptions {
  /** The sandbox directory (relative paths resolve against the working directory). */
  readonly dir: string;
  /** The repository holding scripts/, crds/, examples/ and dist/ (default: this package's root). */
  readonly repoRoot?: string;
  /** Apply examples/ and wait until its CustomDomains are Ready. */
  readonly applyExamples: boolean;
  /** Deadline for the examples to become Ready, in milliseconds (default 180 000). */
  readonly examplesTimeoutMs?: number;
  /** Receives progress lines (default: written to stderr). */
  readonly log?: (line: string) => void;
  /** The environment deciding on an external cluster (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /**
   * The control plane that takes Portico's routes (default `contour`): a real Contour, whose
   * acknowledgement the operator waits for; a real Envoy Gateway (`envoy-gateway`), the operator in
   * gateway mode; a real Traefik serving HTTPS itself (`traefik`); or `none` (the operator's acknowledgement is off, and Routed says the route is
   * unconfirmed).
   */
  readonly dataPlane?: SandboxDataPlane;
  /** Also build the tools only the tests run (install-tools.sh `--test`: helm, promtool, ...). */
  readonly testTools?: boolean;
  /**
   * Run as the chart's defaults do (default true; src/sandbox/admission.ts): the chart's
   * ValidatingAdmissionPolicies from deploy/portico-admission.yaml, the operator as the chart's
   * controller ServiceAccount with `--ingress-class portico`, and Contour serving that class alone
   * (classless Ingresses and HTTPProxies are ignored). false: no policies, the operator as the
   * admin with the cluster's default class, Contour serving every classless route.
   */
  readonly chartDefaults?: boolean;
  /**
   * Also run a node (src/sandbox/kubelet.ts) and the ServiceAccount admission plugin, so that `helm
   * install` of the chart runs Portico's Pods (install-tools.sh `--kubelet`); one per machine.
   */
  readonly kubelet?: boolean;
  /**
   * With `dataPlane: 'traefik'`: Traefik's `web` entrypoint redirects every plain HTTP request to
   * HTTPS (src/data-planes/traefik/sandbox-process.ts, `TraefikOptions.httpsRedirect`; `sandbox up --https-redirect`).
   * Ignored by the other data planes. Default false.
   */
  readonly httpsRedirect?: boolean;
  /**
   * With a data plane whose module says `appsDomain` (Contour, Traefik): run Knot for the platform's apps zone `apps.portico.test` and BIND
   * in front of it for Pebble (src/sandbox/apps-zone.ts), and the operator with `--apps-domain`, so
   * every example Project is served at its own subdomain with the wildcard certificate (default
   * false; `portico sandbox up` turns it on).
   */
  readonly appsDomain?: boolean;
}

const defaultLog = (line: string): void => {
  process.stderr.write(`sandbox: ${line}\n`);
};

/**
 * Reads the facts of the sandbox in `dir` (its `state.json`), without checking that it runs.
 *
 * @throws SandboxNotFoundError when `dir` holds no running-or-crashed sandbox
 */
export async function readSandboxEnv(dir: string): Promise<SandboxEnv> {
  return readState(sandboxPaths(dir));
}

/**
 * Brings the sandbox in `options.dir` up, or returns at once when it already is (every process
 * running and answering).
 *
 * @returns the sandbox's facts (also written to `<dir>/env` and `<dir>/state.json`)
 * @throws ToolsInstallError, ComponentStartError (names the component and its log),
 *   CommandFailedError (kubectl), ManagementApiError, ExamplesNotReadyError, SandboxError
 */
export async function sandboxUp(options: SandboxUpOptions): Promise<SandboxEnv> {
  const log = options.log ?? defaultLog;
  const paths = sandboxPaths(options.dir);
  await ensureSandboxDirs(paths);
  const status = await sandboxStatus(paths.dir);
  if (status.up && status.env !== undefined) {
    const asked = options.dataPlane ?? 'contour';
    const running = status.env.dataPlane;
    log(
      running === asked
        ? `already up in ${paths.dir}`
        : `already up in ${paths.dir} with data plane ${running}, not ${asked}: run \`portico sandbox down\` first to change it`,
    );
    return status.env;
  }
  if ((await listPidNames(paths)).length > 0) {
    const down = status.components.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    log(`restarting the partly running sandbox in ${paths.dir} (${down.join('; ')})`);
    await stopAll(paths);
  }
  await removeSandboxEnv(paths);
  const repoRoot = options.repoRoot ?? PACKAGE_ROOT;
  const step = stepper(log);
  let started: StartedStack | undefined;
  for (let attempt = 1; started === undefined; attempt++) {
    try {
      started = await startStack(paths, repoRoot, options, step);
    } catch (err: unknown) {
      log('start failed; stopping the processes started so far (their logs stay)');
      await stopAll(paths);
      if (attempt >= START_ATTEMPTS || !(await portWasTaken(err))) throw err;
      log(`${(err as Error).message}: a picked port was taken meanwhile; starting again with new ports`);
      await removeSandboxEnv(paths);
    }
  }
  if (options.applyExamples) {
    await upExamples(repoRoot, started, options.examplesTimeoutMs ?? 180_000, step);
  }
  return started.env;
}

/** How many times sandboxUp starts the stack when a port it picked was taken before its process bound it. */
const START_ATTEMPTS = 3;

/**
 * Whether `err` is a component that exited because its listening address was in use (its log says
 * so). The sandbox picks free ports (`pickFreePorts`) and releases them for the processes to bind;
 * another socket can take one meanwhile — seen with several stacks starting at once (the e2e shards
 * of scripts/test.sh): the rate-limit service's gRPC port, EADDRINUSE.
 */
async function portWasTaken(err: unknown): Promise<boolean> {
  if (!(err instanceof ComponentStartError) || err.logPath === undefined) return false;
  const log = await readFile(err.logPath, 'utf8').catch(() => '');
  return /address already in use|EADDRINUSE/.test(log);
}

/** The outcome of stopping one process. */
export interface StoppedProcess {
  readonly name: string;
  readonly outcome: StopOutcome;
}

/**
 * Stops every process of the sandbox in `dir` by its pid file (SIGTERM, SIGKILL after 5 s), removes
 * the pid files, `env` and `state.json`. Logs, certificates, kubeconfig and etcd data stay until
 * the next `sandboxUp`.
 *
 * @returns what happened to each process, in stop order
 */
export async function sandboxDown(dir: string): Promise<StoppedProcess[]> {
  const paths = sandboxPaths(dir);
  const stopped = await stopAll(paths);
  await removeSandboxEnv(paths);
  return stopped;
}

/**
 * Stop order: the node's processes (stopNode), the data planes' `stopFirst` processes (src/data-planes/<name>/sandbox.ts), then the
 * operator, storage last; names not listed go in between.
 */
const STOP_ORDER = [
  ...NODE_PROCESSES,
  ...SANDBOX_DATA_PLANE_MODULES.flatMap((m) => m.stopFirst),
  RATELIMIT_SERVER,
  CONTROLLER,
  PEBBLE,
  DNS_SERVER,
  REDIS,
  KUBE_APISERVER,
  ETCD,
];

async function stopAll(paths: SandboxPaths): Promise<StoppedProcess[]> {
  // The node's Pods, cgroups and host paths first, with the ctr of the sandbox's tools.
  const binDir = await readState(paths).then(
    (env) => env.toolsBinDir,
    () => undefined,
  );
  const node = await stopNode(paths, binDir === undefined ? 'ctr' : nodeTools(binDir).ctr);
  const names = await listPidNames(paths);
  const rank = (name: string): number => {
    const i = STOP_ORDER.indexOf(name);
    return i === -1 ? 0.5 : i;
  };
  const stopped: StoppedProcess[] = [...(node?.processes ?? [])];
  for (const name of names.sort((a, b) => rank(a) - rank(b))) {
    stopped.push({ name, outcome: await stopProcess(paths, name) });
  }
  return stopped;
}

/** Prefixes each progress line with the seconds since the step function was made. */
function stepper(log: (line: string) => void): (line: string) => void {
  const start = Date.now();
  return (line) => {
    log(`[${((Date.now() - start) / 1000).toFixed(1)}s] ${line}`);
  };
}

interface StartedStack {
  readonly env: SandboxEnv;
  readonly tools: Tools;
  readonly dns: DnsManagementClient;
  /** The examples to apply, when the data plane rewrote them (`traefik`); undefined: examples/. */
  readonly examplesDir: string | undefined;
  /** The operator runs with the sandbox's apps domain (src/sandbox/apps-zone.ts). */
  readonly appsDomain: boolean;
}

interface ClusterFacts {
  readonly kubeconfig: string;
  readonly apiServerUrl: string;
  readonly etcdUrl?: string;
}

const PORT_KINDS = {
  etcdClient: 'tcp',
  etcdPeer: 'tcp',
  apiServer: 'tcp',
  dns: 'tcp+udp',
  dnsManagement: 'tcp',
  acme: 'tcp',
  acmeManagement: 'tcp',
  http01: 'tcp',
  tlsAlpn01: 'tcp',
  metrics: 'tcp',
  redis: 'tcp',
  ratelimitGrpc: 'tcp',
  ratelimitMetrics: 'tcp',
  kubelet: 'tcp',
  kubeletHealthz: 'tcp',
  kubeScheduler: 'tcp',
  kubeControllerManager: 'tcp',
  appsKnot: 'tcp+udp',
  appsBind: 'tcp+udp',
} as const;

/** The key of a data plane's port `name` among the stack's picked ports. */
const dataPlanePort = (name: string): string => `dataPlane.${name}`;

async function startStack(
  paths: SandboxPaths,
  repoRoot: string,
  options: SandboxUpOptions,
  step: (line: string) => void,
): Promise<StartedStack> {
  const external = externalKubeconfig(options.env ?? process.env);
  const dataPlane = options.dataPlane ?? 'contour';
  const plane = sandboxDataPlaneModule(dataPlane);
  // The auto-generated subdomains, where the data plane serves them (its module says).
  const withAppsZone = options.appsDomain === true && plane.appsDomain;
  const toolSets: ToolSets = {
    test: options.testTools === true,
    kubelet: options.kubelet === true,
    ...(withAppsZone ? { knot: true } : {}),
    dataPlanes: options.testTools === true ? SANDBOX_DATA_PLANE_MODULES.map((m) => m.tools) : [plane.tools],
  };
  step(
    `installing tools (scripts/install-tools.sh${toolFlags(toolSets)
      .map((f) => ` ${f}`)
      .join('')})`,
  );
  const tools = await installTools(repoRoot, process.stderr, toolSets);
  const picked = await pickFreePorts<string>({
    ...PORT_KINDS,
    ...Object.fromEntries(Object.entries(plane.ports).map(([name, kind]) => [dataPlanePort(name), kind])),
  });
  const ports = picked as Record<keyof typeof PORT_KINDS, number>;
  step('generating certificates');
  const certs = await generateSandboxCertificates();
  await writeSandboxCertificates(paths, certs);

  step(
    external === undefined
      ? 'starting etcd then kube-apiserver, the DNS server, Pebble and Redis'
      : 'starting the DNS server, Pebble and Redis',
  );
  const dnsServer = `127.0.0.1:${ports.dns}`;
  const dnsStarted = startDnsServer(
    paths,
    tools.pebbleChalltestsrv,
    { dnsPort: ports.dns, managementPort: ports.dnsManagement },
    { host: PLATFORM_CNAME_TARGET, address: '127.0.0.1' },
  );
  // With the apps zone, Pebble resolves through BIND, which needs the DNS server up first.
  const appsZone = withAppsZone
    ? dnsStarted.then(() => {
        step(`starting Knot for ${SANDBOX_APPS_DOMAIN} and BIND in front of it for Pebble`);
        return startAppsZone(paths, tools.binDir, { knot: ports.appsKnot, bind: ports.appsBind }, dnsServer, {
          host: PLATFORM_CNAME_TARGET,
          address: '127.0.0.1',
        });
      })
    : Promise.resolve(undefined);
  const pebbleStarted = (async () => {
    const zone = withAppsZone ? await appsZone : undefined;
    return startPebble(paths, tools.pebble, certs.pebbleCa.certPem, {
      listenPort: ports.acme,
      managementPort: ports.acmeManagement,
      httpPort: ports.http01,
      tlsPort: ports.tlsAlpn01,
      dnsServer: zone === undefined ? dnsServer : `${zone.resolver.host}:${zone.resolver.port}`,
    });
  })();
  const [cluster, dns, pebble, redis, zone] = await settleAll([
    external === undefined
      ? startOwnCluster(paths, tools, certs, ports, options.kubelet === true)
      : checkExternalCluster(external),
    dnsStarted,
    pebbleStarted,
    startRedis(paths, tools.redisServer, ports.redis),
    appsZone,
  ] as const);

  const kubectl: Kubectl = { binary: tools.kubectl, kubeconfig: cluster.kubeconfig };
  step(`creating namespace ${OPERATOR_NAMESPACE}; installing CRDs`);
  await ensureNamespace(kubectl, OPERATOR_NAMESPACE);
  await installCrds(kubectl, path.join(repoRoot, 'crds'));
  const chartDefaults = options.chartDefaults ?? true;
  const chart = await setUpChartDefaults(
    chartDefaults,
    kubectl,
    paths,
    repoRoot,
    OPERATOR_NAMESPACE,
    step,
    zone === undefined ? undefined : SANDBOX_APPS_DOMAIN,
  );

  await startSandboxNode(options, { paths, tools, kubectl, cluster, certs, ports, step });

  const started = await plane.start({
    paths,
    repoRoot,
    tools,
    kubectl,
    step,
    ports: Object.fromEntries(
      Object.keys(plane.ports).map((name) => [name, picked[dataPlanePort(name)] ?? 0]),
    ),
    operatorNamespace: OPERATOR_NAMESPACE,
    chartDefaults,
    chart,
    httpsRedirect: options.httpsRedirect === true,
  });

  step('starting the operator (portico controller)');
  const acmeCaBundle = paths.cert(CERT_FILES.pebbleCaCert);
  const controller = await startController(paths, repoRoot, {
    kubeconfig: chart.controllerKubeconfig,
    platformCnameTarget: PLATFORM_CNAME_TARGET,
    dnsServer,
    acmeDirectoryUrl: pebble.directoryUrl,
    acmeEmail: ACME_EMAIL,
    acmeCaBundle,
    http01Port: ports.http01,
    metricsPort: ports.metrics,
    namespace: OPERATOR_NAMESPACE,
    ...started.controllerOptions,
    ...(zone === undefined
      ? {}
      : {
          appsDomain: {
            domain: SANDBOX_APPS_DOMAIN,
            server: `${zone.zoneServer.host}:${zone.zoneServer.port}`,
            keyName: zone.key.name,
            secret: zone.key.secret.toString('base64'),
          },
        }),
  });

  step('starting the rate-limit service (portico ratelimit-server)');
  const ratelimit = await startRateLimitServer(paths, repoRoot, {
    kubeconfig: cluster.kubeconfig,
    redisUrl: redis.url,
    grpcPort: ports.ratelimitGrpc,
    metricsPort: ports.ratelimitMetrics,
    namespace: OPERATOR_NAMESPACE,
  });

  const env: SandboxEnv = {
    sandboxDir: paths.dir,
    toolsBinDir: tools.binDir,
    ...cluster,
    externalCluster: external !== undefined,
    platformCnameTarget: PLATFORM_CNAME_TARGET,
    dnsServer,
    dnsMgmtUrl: dns.client.baseUrl,
    acmeDirectoryUrl: pebble.directoryUrl,
    acmeMgmtUrl: pebble.managementUrl,
    acmeCaBundle,
    controllerMetricsUrl: controller.metricsUrl,
    controllerReadyzUrl: controller.readyzUrl,
    http01Port: ports.http01,
    redisUrl: redis.url,
    ratelimitGrpcAddr: ratelimit.grpcAddr,
    ratelimitMetricsUrl: ratelimit.metricsUrl,
    ratelimitReadyzUrl: ratelimit.readyzUrl,
    dataPlane,
    ...started.env,
  };
  await writeSandboxEnv(paths, env);
  step(`stack up; wrote ${paths.envFile}`);
  return { env, tools, dns: dns.client, examplesDir: started.examplesDir, appsDomain: zone !== undefined };
}

/** With `options.kubelet`, starts the node (src/sandbox/kubelet.ts) against the sandbox's API server. */
async function startSandboxNode(
  options: SandboxUpOptions,
  s: {
    paths: SandboxPaths;
    tools: Tools;
    kubectl: Kubectl;
    cluster: ClusterFacts;
    certs: SandboxCertificates;
    ports: Record<keyof typeof PORT_KINDS, number>;
    step: (line: string) => void;
  },
): Promise<void> {
  if (options.kubelet !== true) return;
  s.step('starting the node: kube-scheduler, kube-controller-manager, containerd, the kubelet');
  await startNode(s.paths, nodeTools(s.tools.binDir), s.kubectl, s.cluster.apiServerUrl, s.certs, {
    kubelet: s.ports.kubelet,
    kubeletHealthz: s.ports.kubeletHealthz,
    scheduler: s.ports.kubeScheduler,
    controllerManager: s.ports.kubeControllerManager,
  });
  s.step(`Node localhost is Ready (kubelet on 127.0.0.1:${s.ports.kubelet})`);
}

/**
 * Awaits every promise, so that no start is still in flight when a failure is handled (and its
 * process escapes the cleanup), then returns their values or throws the first rejection.
 */
async function settleAll<T extends readonly unknown[]>(
  promises: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results = await Promise.allSettled(promises);
  for (const result of results) {
    if (result.status === 'rejected') throw result.reason;
  }
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/** The user's kubeconfig when `PORTICO_SANDBOX_USE_KUBECONFIG=1` and `KUBECONFIG` is set. */
function externalKubeconfig(env: NodeJS.ProcessEnv): string | undefined {
  const kubeconfig = env['KUBECONFIG'];
  if (env['PORTICO_SANDBOX_USE_KUBECONFIG'] !== '1' || kubeconfig === undefined || kubeconfig === '') {
    return undefined;
  }
  if (kubeconfig.includes(path.delimiter)) {
    throw new SandboxError(`KUBECONFIG lists several files (${kubeconfig}); point it at one for the sandbox`);
  }
  return path.resolve(kubeconfig);
}

/** Starts etcd, then kube-apiserver on it; writes `<dir>/kubeconfig`. */
async function startOwnCluster(
  paths: SandboxPaths,
  tools: Tools,
  certs: SandboxCertificates,
  ports: Record<keyof typeof PORT_KINDS, number>,
  serviceAccountAdmission: boolean,
): Promise<ClusterFacts> {
  const etcd = await startEtcd(paths, tools.etcd, { clientPort: ports.etcdClient, peerPort: ports.etcdPeer });
  const api = await startKubeApiserver(paths, tools.kubeApiserver, certs, {
    securePort: ports.apiServer,
    etcdUrl: etcd.clientUrl,
    serviceAccountAdmission,
  });
  return { kubeconfig: paths.kubeconfig, apiServerUrl: api.server, etcdUrl: etcd.clientUrl };
}

/** Checks that the user's cluster answers `/readyz`. */
async function checkExternalCluster(kubeconfig: string): Promise<ClusterFacts> {
  const ready = await apiServerReadyProbe(kubeconfig)();
  if (ready !== true) {
    throw new SandboxError(`the cluster of KUBECONFIG=${kubeconfig} is not ready: ${ready}`);
  }
  const access = await clusterAccess(kubeconfig);
  return { kubeconfig, apiServerUrl: access.server };
}

async function upExamples(
  repoRoot: string,
  stack: StartedStack,
  timeoutMs: number,
  step: (line: string) => void,
): Promise<void> {
  const kubectl: Kubectl = { binary: stack.tools.kubectl, kubeconfig: stack.env.kubeconfig };
  const examplesDir = stack.examplesDir ?? path.join(repoRoot, 'examples');
  step(`setting each example domain's CNAME to ${stack.env.platformCnameTarget}; applying ${examplesDir}`);
  const { domains, projects } = await applyExamples(
    examplesDir,
    kubectl,
    stack.dns,
    stack.env.platformCnameTarget,
  );
  // The Projects first: their CustomDomains exist only once the operator has created them.
  if (projects.length > 0) {
    step(`waiting up to ${timeoutMs / 1000} s for ${projects.length} Project(s) to be Ready`);
    await waitForCustomDomainsReady(kubectl, timeoutMs, step, 'projects');
  }
  step(`waiting up to ${timeoutMs / 1000} s for ${domains.length} CustomDomain(s) to be Ready`);
  await waitForCustomDomainsReady(kubectl, timeoutMs, step);
  if (projects.length > 0 && stack.appsDomain) {
    step(`waiting for every example Project to serve at its subdomain of ${SANDBOX_APPS_DOMAIN}`);
    await waitForSubdomainsServing(kubectl, timeoutMs, step);
  }
  step('every example Project and CustomDomain is Ready');
}
