/**
 * `helm install` as a platform team runs it, into a cluster with a real node (#43 item 3): a sandbox
 * of this file's own with `kubelet: true` (containerd, a kubelet, kube-scheduler and
 * kube-controller-manager; src/sandbox/kubelet.ts), Portico's image built by scripts/build-image.sh
 * imported into containerd, the chart installed with `helm install` from charts/portico with the
 * image by its built tag (`pullPolicy: Never`) and `hostNetwork: true` (the API server listens on
 * the node's loopback; no Pod network). The controller Deployment becomes Ready from the image, as
 * the chart's ServiceAccount (its token mounted by the ServiceAccount admission plugin, RBAC from the
 * chart), and the examples' CustomDomains go Live through that in-cluster operator: the sandbox's
 * own operator process is stopped before the examples are applied, so nothing else reconciles them.
 *
 * The image: the docker-archive `scripts/build-image.sh --output FILE` writes, at
 * PORTICO_E2E_IMAGE_ARCHIVE (default ~/.cache/portico/images/portico-e2e.tar), with FILE.json
 * beside it; it must be built from this checkout's sources (FILE.json's sourcesSha256). A missing
 * kubelet, containerd or image, or an image of other sources, fails every test of the file with what
 * to run (each test throws it: none passes or is reported skipped without them).
 *
 * Two replicas electing one leader: with hostNetwork a replica's ports are the node's, so two
 * replicas of one Deployment cannot run on the one node; the second replica is a second release
 * (`portico-b`, other ports) in the same namespace, campaigning for the same Lease. Deleting the
 * leader's Pod moves the Lease to the other release's Pod (0.9 s here) while a watch of every
 * CustomDomain sees no Ready condition leave True. For the same reason each release rolls one Pod
 * at a time with `updateStrategy` maxSurge 0 (a surge Pod cannot take the node's ports).
 *
 * The rate-limit server: the first release also runs the rate-limit server Deployment (one replica,
 * free ports, the sandbox's Redis); the sandbox's own rate-limit server process is stopped too. The
 * test calls ShouldRateLimit on the Pod's gRPC port (hostNetwork) for the examples' policy.
 *
 * `helm upgrade` to a newer build: the same image under a new tag (`ctr images tag`), which changes
 * every Pod template and so rolls every Pod exactly as a new build does, without a second image
 * build (3-4 min on this machine) on the suite's path. Both releases are upgraded in turn under the
 * watch.
 *
 * The memory limit: a third release whose controller has a 256Mi limit and, test-only, a script
 * preloaded with NODE_OPTIONS=--require from a ConfigMap (no debug code in the image) that grows
 * the process past the limit once per Pod (its marker in the Pod's /tmp emptyDir, which outlives
 * the container). The kubelet reports OOMKilled, the container comes back in the same Pod, and the
 * domains stay Live with their certificate Secrets unwritten.
 *
 * `helm uninstall` with the chart's two CRD settings: the CRDs taken over with crds.install (keep,
 * the default) stay with every CustomDomain and certificate Secret unchanged; a release installed
 * with crds.keep=false deletes them on uninstall.
 */
import { createHash } from 'node:crypto';
import { access, constants, readFile, readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  VERSION,
  ownedNames,
  type CustomDomain,
} from '../../src/api/customdomain.js';
import { createRateLimitClient } from '../../src/ratelimit/grpc.js';
import { loadedGeneration, parseReports, policyToken } from '../../src/ratelimit/load-report.js';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import { applyExamples } from '../../src/sandbox/examples.js';
import { checkNodeTools, nodePaths, nodeTools } from '../../src/sandbox/kubelet.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { stopProcess } from '../../src/sandbox/processes.js';
import { CONTROLLER } from '../../src/sandbox/controller.js';
import { RATELIMIT_SERVER } from '../../src/sandbox/ratelimit-server.js';
import { OPERATOR_NAMESPACE, sandboxDown, sandboxUp, type SandboxEnv } from '../../src/sandbox/stack.js';
import { sandbox as sharedStack, waitFor } from './support/cluster.js';
import { CHART, REPO, run, runOk, toolsBin } from './support/helm.js';
import { freshMinute, toAnswer } from './ratelimit-helpers.js';

const IMAGE_ARCHIVE =
  process.env.PORTICO_E2E_IMAGE_ARCHIVE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/images/portico-e2e.tar');
const BUILD_HINT = `scripts/build-image.sh --tag localhost/portico:e2e --output ${IMAGE_ARCHIVE}`;
const RELEASE = 'portico';
/** A second release of the controller on the same node (see the leader-election test). */
const SECOND_RELEASE = 'portico-b';
/** A third release of the controller, whose Pod grows past its memory limit (see that test). */
const OOM_RELEASE = 'portico-oom';
/** The controller's leader-election Lease (src/controller/main.ts LEASE_NAME). */
const LEASE = 'portico-controller';
/** This file's own stack, beside the shared one (a node needs the ServiceAccount admission plugin). */
const DIR = `${sharedStack.sandboxDir}-kubelet`;

interface ImageFacts {
  readonly image: string;
  readonly id: string;
  readonly commit: string;
  readonly sourcesSha256: string;
}

/** The files the Dockerfile builds from (its context less .dockerignore), as build-image.sh hashes them. */
const SOURCES = [
  'Dockerfile',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'scripts/bundle.ts',
  'src',
  'proto',
];

/** scripts/build-image.sh's sources_sha256 of this checkout: each file's sha256sum line, sorted by path. */
async function sourcesSha256(): Promise<string> {
  const files: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(REPO, rel), { withFileTypes: true }).catch(() => undefined);
    if (entries === undefined) {
      if (!rel.endsWith('.test.ts')) files.push(rel);
      return;
    }
    for (const e of entries) await walk(`${rel}/${e.name}`);
  };
  for (const s of SOURCES) await walk(s);
  files.sort((a, b) => (Buffer.from(a) < Buffer.from(b) ? -1 : 1));
  const lines = await Promise.all(
    files.map(
      async (f) =>
        `${createHash('sha256')
          .update(await readFile(path.join(REPO, f)))
          .digest('hex')}  ${f}\n`,
    ),
  );
  return createHash('sha256').update(lines.join('')).digest('hex');
}

/** How long the file waits for the image build scripts/test.sh runs beside the tests (ms). */
const IMAGE_BUILD_WAIT_MS = 900_000;

/**
 * Waits for the image build that `npm test` (scripts/test.sh) runs beside the tests, when it runs
 * one: until PORTICO_E2E_IMAGE_BUILD_STATUS holds its exit status (polled every 2 s, at most
 * IMAGE_BUILD_WAIT_MS). Returns at once without that variable (a filtered run uses the archive as
 * it is). Throws with the end of the build's log (PORTICO_E2E_IMAGE_BUILD_LOG) when it failed, or
 * when it had not ended in time.
 */
async function imageBuildEnded(): Promise<void> {
  const statusFile = process.env.PORTICO_E2E_IMAGE_BUILD_STATUS;
  if (statusFile === undefined || statusFile === '') return;
  const logTail = async (): Promise<string> =>
    (await readFile(process.env.PORTICO_E2E_IMAGE_BUILD_LOG ?? '', 'utf8').catch(() => ''))
      .split('\n')
      .slice(-30)
      .join('\n');
  const deadline = Date.now() + IMAGE_BUILD_WAIT_MS;
  for (;;) {
    const status = await readFile(statusFile, 'utf8').catch(() => undefined);
    if (status !== undefined) {
      if (status.trim() === '0') return;
      throw new Error(
        `the image build beside the tests failed (exit ${status.trim()}): ${BUILD_HINT}\n${await logTail()}`,
      );
    }
    if (Date.now() > deadline) {
      throw new Error(
        `the image build beside the tests had not ended after ${IMAGE_BUILD_WAIT_MS / 60_000} min\n${await logTail()}`,
      );
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

let env: SandboxEnv;
let bin = '';
let image: ImageFacts;
let started = 0;

async function kubectl(args: readonly string[], input?: string): Promise<string> {
  return runOk(
    `${bin}/kubectl`,
    ['--kubeconfig', env.kubeconfig, ...args],
    input === undefined ? {} : { input },
  );
}

/** A free TCP port on loopback (the sandbox's own port picking). */
async function freePort(): Promise<number> {
  return (await pickFreePorts({ port: 'tcp' })).port;
}

/** `helm install <release>` of the chart into the node's stack with `values`, waiting for its Pods (5 min). */
async function helmInstall(release: string, values: unknown): Promise<void> {
  const installed = await run(
    `${bin}/helm`,
    [
      'install',
      release,
      CHART,
      '--namespace',
      OPERATOR_NAMESPACE,
      '--kubeconfig',
      env.kubeconfig,
      '--values',
      '-',
      '--wait',
      '--timeout',
      '5m',
    ],
    { input: JSON.stringify(values), timeoutMs: 360_000 },
  );
  expect(installed.code, installed.stderr).toBe(0);
  await rolledOut(release);
}

/**
 * Waits until every Deployment of `release` has rolled out (`kubectl rollout status`: each replica
 * of the current template available, no old one left), 3 min each. Helm's --wait is not enough
 * here: with maxUnavailable 1 it counts a Deployment of one replica ready with none available.
 */
async function rolledOut(release: string): Promise<void> {
  const names = (
    await kubectl([
      'get',
      'deployments',
      '-n',
      OPERATOR_NAMESPACE,
      '-l',
      `app.kubernetes.io/instance=${release}`,
      '-o',
      'jsonpath={.items[*].metadata.name}',
    ])
  )
    .split(' ')
    .filter((n) => n !== '');
  expect(names.length, `the Deployments of ${release}`).toBeGreaterThan(0);
  for (const name of names) {
    await runOk(
      `${bin}/kubectl`,
      [
        '--kubeconfig',
        env.kubeconfig,
        'rollout',
        'status',
        '-n',
        OPERATOR_NAMESPACE,
        `deployment/${name}`,
        '--timeout=180s',
      ],
      { timeoutMs: 200_000 },
    );
  }
}

/**
 * Why the node's stack could not be set up (the node's tools or the image missing, or the stack not
 * starting), or undefined once it is up. Each test of the file throws it, so each one fails and says
 * why; a beforeAll that threw would leave them reported as skipped.
 */
let setupFailure: Error | undefined = new Error('the node stack was not set up (beforeAll did not run)');

/** A test of the file: fails with setupFailure when the node's stack is not up. */
function nodeTest(name: string, fn: () => Promise<void>, timeoutMs?: number): void {
  it(
    name,
    async () => {
      if (setupFailure !== undefined) throw setupFailure;
      await fn();
    },
    timeoutMs,
  );
}

beforeAll(async () => {
  started = Date.now();
  try {
    await setUpNode();
    setupFailure = undefined;
  } catch (err) {
    setupFailure = err instanceof Error ? err : new Error(String(err));
  }
}, 900_000 + IMAGE_BUILD_WAIT_MS);

/**
 * Checks the node's tools and the image, starts this file's stack with a node, stops its own
 * operator and rate-limit server and imports the image into containerd.
 *
 * @throws ToolsInstallError when the node's tools are missing; Error when the image archive is
 *   missing or of other sources (each saying what to run), or when the stack does not start
 */
async function setUpNode(): Promise<void> {
  bin = await toolsBin();
  // Fails (never skips) when the node's tools or the image are missing, saying what to run.
  await checkNodeTools(nodeTools(bin));
  await imageBuildEnded();
  try {
    await access(IMAGE_ARCHIVE, constants.R_OK);
  } catch {
    throw new Error(`Portico's image archive ${IMAGE_ARCHIVE} is missing: build it with ${BUILD_HINT}`);
  }
  image = JSON.parse(await readFile(`${IMAGE_ARCHIVE}.json`, 'utf8')) as ImageFacts;
  const sources = await sourcesSha256();
  if (image.sourcesSha256 !== sources) {
    throw new Error(
      `${IMAGE_ARCHIVE} was built from other sources (commit ${image.commit}): build it again with ${BUILD_HINT}`,
    );
  }

  await sandboxDown(DIR).catch(() => []);
  kernelBefore = await kernelSettings();
  env = await sandboxUp({
    dir: DIR,
    applyExamples: false,
    dataPlane: 'none',
    chartDefaults: false,
    kubelet: true,
    log: () => undefined,
  });
  // The platform's operator comes from the chart: the sandbox's own process stops here, before any
  // CustomDomain exists (it reconciled none).
  await stopProcess(sandboxPaths(DIR), CONTROLLER);
  // Likewise the rate-limit server: the chart's Pod is the only one.
  await stopProcess(sandboxPaths(DIR), RATELIMIT_SERVER);

  const node = nodePaths(sandboxPaths(DIR));
  const ctr = nodeTools(bin).ctr;
  await runOk(ctr, ['--address', node.containerdSocket, '-n', 'k8s.io', 'images', 'import', IMAGE_ARCHIVE], {
    timeoutMs: 300_000,
  });
}

afterAll(async () => {
  // The last test brings the stack down and checks it; this is for a run that failed before it.
  if (process.env.PORTICO_E2E_KEEP !== '1') await sandboxDown(DIR).catch(() => []);
  process.stderr.write(`helm-kubelet: ${((Date.now() - started) / 1000).toFixed(0)} s in all\n`);
}, 300_000);

/** The kernel settings the kubelet would change, read before the node starts and after it stopped. */
const KERNEL_SETTINGS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
];
let kernelBefore: Record<string, string> = {};

async function kernelSettings(): Promise<Record<string, string>> {
  const values: Record<string, string> = {};
  for (const name of KERNEL_SETTINGS) values[name] = (await readFile(`/proc/sys/${name}`, 'utf8')).trim();
  return values;
}

/** The `kubepods` cgroups under /sys/fs/cgroup, in any hierarchy. */
async function podCgroups(): Promise<string[]> {
  const found: string[] = [];
  for (const h of await readdir('/sys/fs/cgroup')) {
    try {
      await access(`/sys/fs/cgroup/${h}/kubepods`);
      found.push(`/sys/fs/cgroup/${h}/kubepods`);
    } catch {
      // none in this hierarchy
    }
  }
  return found;
}

/** iptables-save's chains named KUBE-* (the kubelet's), or undefined when iptables-save is not installed. */
async function kubeChains(): Promise<string[] | undefined> {
  const saved = await run('iptables-save', []).catch(() => undefined);
  if (saved === undefined || saved.code !== 0) return undefined;
  return saved.stdout.split('\n').filter((l) => l.startsWith(':KUBE-'));
}

/** The API server on the node's loopback, for every Pod (the `kubernetes` Service has no route). */
function apiServerEnv(): { name: string; value: string }[] {
  return [
    { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
    { name: 'KUBERNETES_SERVICE_PORT', value: new URL(env.apiServerUrl).port },
  ];
}

/** One Pod at a time, the old one stopped first: a surge Pod cannot take the node's ports. */
const ONE_POD_AT_A_TIME = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } };

/** The rate-limit server's ports on the node (the first release runs it). */
let rateLimitPorts = { grpc: 0, metrics: 0 };

/** Values beyond those every release gets (see releaseValues). */
interface ReleaseOptions {
  /** Run the rate-limit server Deployment too, on rateLimitPorts. */
  readonly rateLimit?: boolean;
  /** The controller's memory limit (default the chart's). */
  readonly memoryLimit?: string;
  /** More controller values: volumes, mounts and environment, appended to the defaults. */
  readonly extraVolumes?: unknown[];
  readonly extraVolumeMounts?: unknown[];
  readonly extraEnv?: { name: string; value: string }[];
}

/** The chart's values for a release on the sandbox's node, its controller on `http01Port`. */
async function releaseValues(
  http01Port: number,
  options: ReleaseOptions = {},
): Promise<Record<string, unknown>> {
  const [repository, tag] = [
    image.image.slice(0, image.image.lastIndexOf(':')),
    image.image.slice(image.image.lastIndexOf(':') + 1),
  ];
  return {
    image: { repository, tag, pullPolicy: 'Never' },
    hostNetwork: true,
    platform: { cnameTarget: env.platformCnameTarget },
    dns: { resolvers: [env.dnsServer] },
    acme: {
      directoryUrl: env.acmeDirectoryUrl,
      email: 'ops@portico.test',
      caBundle: { configMapName: 'pebble-ca', key: 'ca.crt' },
      http01: { selfCheckPort: env.http01Port },
    },
    routing: { dataPlaneAcknowledgement: false },
    controller: {
      replicas: 1,
      ports: { http01: http01Port, metrics: await freePort() },
      updateStrategy: ONE_POD_AT_A_TIME,
      ...(options.memoryLimit === undefined
        ? {}
        : {
            resources: {
              requests: { cpu: '50m', memory: options.memoryLimit },
              limits: { memory: options.memoryLimit },
            },
          }),
      extraVolumes: options.extraVolumes ?? [],
      extraVolumeMounts: options.extraVolumeMounts ?? [],
      extraEnv: [
        ...apiServerEnv(),
        // The examples' hostnames are under .example (RFC 6761), as in the sandbox's operator.
        { name: 'PORTICO_ALLOW_SPECIAL_USE_HOSTNAMES', value: 'true' },
        ...(options.extraEnv ?? []),
      ],
    },
    ...(options.rateLimit === true
      ? {
          rateLimit: { enabled: true, redis: { url: env.redisUrl } },
          rateLimitServer: {
            replicas: 1,
            ports: rateLimitPorts,
            updateStrategy: ONE_POD_AT_A_TIME,
            extraEnv: apiServerEnv(),
          },
        }
      : {}),
  };
}

interface PodInfo {
  metadata: { name: string; uid: string; labels: Record<string, string> };
  spec: {
    containers: { image: string }[];
    serviceAccountName: string;
    hostNetwork?: boolean;
    volumes: { name: string; projected?: unknown }[];
  };
  status: {
    phase: string;
    containerStatuses?: {
      image: string;
      imageID: string;
      containerID?: string;
      ready: boolean;
      restartCount: number;
      lastState: { terminated?: { reason?: string; exitCode?: number } };
    }[];
  };
}

/** The Pods of `component` (controller or ratelimit), of one release when given. */
async function podsOf(component: string, release?: string): Promise<PodInfo[]> {
  const selector = [
    `app.kubernetes.io/component=${component}`,
    ...(release === undefined ? [] : [`app.kubernetes.io/instance=${release}`]),
  ].join(',');
  return (
    JSON.parse(await kubectl(['get', 'pods', '-n', OPERATOR_NAMESPACE, '-l', selector, '-o', 'json'])) as {
      items: PodInfo[];
    }
  ).items;
}

/** What a watch of every CustomDomain saw while `during` ran. */
interface ReadyWatch<T> {
  readonly result: T;
  /** Events delivered, the initial ADDED of each existing domain included. */
  readonly events: number;
  /** Each event whose domain was not Ready=True (or was deleted), as `PHASE ns/name: Ready=... reason`. */
  readonly notReady: string[];
}

/**
 * Runs `during` under a watch of every CustomDomain (the API server's watch, from before `during`
 * starts until it ends) and returns every event whose Ready condition was not True.
 *
 * @throws Error when the watch ended before `during` did (it would have missed events)
 */
async function watchReady<T>(during: () => Promise<T>): Promise<ReadyWatch<T>> {
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  let events = 0;
  const notReady: string[] = [];
  let stopping = false;
  let endedEarly: string | undefined;
  const request = await new Watch(kc).watch(
    `/apis/${GROUP}/${VERSION}/${CUSTOM_DOMAIN_PLURAL}`,
    {},
    (phase, obj: CustomDomain) => {
      events++;
      const ready = obj.status?.conditions?.find((c) => c.type === 'Ready');
      if (phase === 'DELETED' || ready?.status !== 'True') {
        notReady.push(
          `${phase} ${obj.metadata.namespace ?? ''}/${obj.metadata.name}: Ready=${ready?.status ?? '-'} ${ready?.reason ?? ''}`,
        );
      }
    },
    (err) => {
      if (!stopping) endedEarly = err instanceof Error ? err.message : 'closed by the API server';
    },
  );
  try {
    const result = await during();
    if (endedEarly !== undefined) throw new Error(`the CustomDomain watch ended early: ${endedEarly}`);
    return { result, events, notReady };
  } finally {
    stopping = true;
    request.abort();
  }
}

/** Every CustomDomain's phase. */
async function phases(): Promise<string[]> {
  return (await kubectl(['get', 'customdomains', '-A', '-o', 'jsonpath={.items[*].status.phase}']))
    .split(' ')
    .filter((p) => p !== '');
}

/** Each CustomDomain's certificate Secret (`<name>-tls`): its uid, resourceVersion and certificate's sha256. */
async function certificateSecrets(): Promise<Record<string, string>> {
  const domains = (
    JSON.parse(await kubectl(['get', 'customdomains', '-A', '-o', 'json'])) as { items: CustomDomain[] }
  ).items;
  const secrets: Record<string, string> = {};
  for (const d of domains) {
    const name = ownedNames(d).secret;
    const secret = JSON.parse(
      await kubectl(['get', 'secret', '-n', d.metadata.namespace ?? '', name, '-o', 'json']),
    ) as { metadata: { uid: string; resourceVersion: string }; data: Record<string, string> };
    secrets[`${d.metadata.namespace ?? ''}/${name}`] = [
      secret.metadata.uid,
      secret.metadata.resourceVersion,
      createHash('sha256')
        .update(secret.data['tls.crt'] ?? '')
        .digest('hex'),
    ].join(' ');
  }
  return secrets;
}

/** `helm <args>` on the node's stack, in the operator namespace; fails the test on a non-zero exit. */
async function helmOk(args: readonly string[], input?: string): Promise<string> {
  const result = await run(
    `${bin}/helm`,
    [...args, '--namespace', OPERATOR_NAMESPACE, '--kubeconfig', env.kubeconfig],
    input === undefined ? { timeoutMs: 360_000 } : { input, timeoutMs: 360_000 },
  );
  expect(result.code, `helm ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.stdout + result.stderr;
}

/** The rate-limit server's answer, from its Pod's gRPC port, for one key of the examples' policy. */
async function checkFromPod(keyId: string, hits?: number): Promise<ReturnType<typeof toAnswer>> {
  const client = createRateLimitClient(`127.0.0.1:${rateLimitPorts.grpc}`);
  try {
    return toAnswer(
      await client.shouldRateLimit({
        domain: 'shop/shop-api',
        descriptors: [
          {
            entries: [
              { key: 'key_id', value: keyId },
              { key: 'plan', value: 'free' },
            ],
          },
        ],
        ...(hits === undefined ? {} : { hits_addend: hits }),
      }),
    );
  } finally {
    client.close();
  }
}

describe('helm install into a sandbox with a real kubelet', () => {
  nodeTest('registers Node localhost Ready with the kubelet and containerd that were built', async () => {
    const node = JSON.parse(await kubectl(['get', 'node', 'localhost', '-o', 'json'])) as {
      status: {
        conditions: { type: string; status: string }[];
        nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string };
      };
    };
    expect(node.status.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(node.status.nodeInfo.kubeletVersion).toBe('v1.37.2');
    expect(node.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\//);
  });

  nodeTest(
    "helm install runs the controller and rate-limit server Deployments Ready from the built image, as the chart's ServiceAccounts",
    async () => {
      const pebbleCa = await readFile(env.acmeCaBundle, 'utf8');
      await kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'pebble-ca', namespace: OPERATOR_NAMESPACE },
          data: { 'ca.crt': pebbleCa },
        }),
      );
      rateLimitPorts = await pickFreePorts({ grpc: 'tcp', metrics: 'tcp' });
      await helmInstall(RELEASE, await releaseValues(env.http01Port, { rateLimit: true }));

      for (const component of ['controller', 'ratelimit']) {
        const pods = await podsOf(component);
        expect(pods, component).toHaveLength(1);
        const [pod] = pods;
        expect(pod?.spec.hostNetwork).toBe(true);
        expect(pod?.spec.serviceAccountName).toBe(`${RELEASE}-${component}`);
        // The ServiceAccount admission plugin mounted the token (kube-api-access-*).
        expect(
          pod?.spec.volumes.some((v) => v.name.startsWith('kube-api-access-') && v.projected !== undefined),
        ).toBe(true);
        const [container] = pod?.status.containerStatuses ?? [];
        expect(container?.ready, component).toBe(true);
        expect(container?.image).toBe(image.image);
        expect(container?.imageID).toBe(image.id);
      }
    },
    420_000,
  );

  nodeTest(
    "makes the examples Live through the in-cluster operator (the sandbox's own operator stopped)",
    async () => {
      const examples = await applyExamples(
        path.join(REPO, 'examples'),
        { binary: `${bin}/kubectl`, kubeconfig: env.kubeconfig },
        new DnsManagementClient(env.dnsMgmtUrl),
        env.platformCnameTarget,
      );
      // The examples' CustomDomains and those the in-cluster operator makes for the examples' Projects.
      const hostnames = [
        ...examples.domains.map((d) => d.hostname),
        ...examples.projects.flatMap((p) => p.hostnames),
      ];
      expect(hostnames.length).toBeGreaterThan(0);
      await waitFor(
        'every example CustomDomain Live',
        async () => {
          const now = await phases();
          return now.length === hostnames.length && now.every((p) => p === 'Live') ? now : undefined;
        },
        180_000,
        1000,
      );
      // The Pod's own log (read through the kubelet) names each domain it made Live.
      const logs = await kubectl(['logs', '-n', OPERATOR_NAMESPACE, `deployment/${RELEASE}-controller`]);
      for (const hostname of hostnames) expect(logs).toContain(hostname);
    },
    240_000,
  );

  nodeTest(
    "the rate-limit server's Pod loads the examples' policy and answers ShouldRateLimit from its gRPC port, counting in Redis",
    async () => {
      const [pod] = await podsOf('ratelimit');
      const policy = JSON.parse(
        await kubectl(['get', 'ratelimitpolicy', '-n', 'shop', 'shop-api', '-o', 'json']),
      ) as { metadata: { uid: string; generation: number } };
      // The Pod's own load report (keyed by its name, POD_NAME) says it enforces the policy's generation.
      await waitFor(
        "the rate-limit server Pod's load report",
        async () => {
          const data = (
            JSON.parse(
              await kubectl([
                'get',
                'configmap',
                '-n',
                OPERATOR_NAMESPACE,
                'portico-ratelimit-status',
                '-o',
                'json',
              ]),
            ) as { data?: Record<string, string> }
          ).data;
          const report = parseReports(data).find((r) => r.instance === pod?.metadata.name);
          if (report === undefined) return undefined;
          const generation = loadedGeneration(
            report,
            'shop/shop-api',
            policy.metadata.uid,
            policyToken(policy.metadata.uid),
          );
          return generation === policy.metadata.generation ? true : undefined;
        },
        60_000,
        1000,
      );
      // The free plan's 60 a minute, spent in one minute: 59 then 1 left, then refused.
      await freshMinute(10);
      const keyId = `kubelet-${Date.now().toString(36)}`;
      const first = await checkFromPod(keyId, 59);
      expect(first.code).toBe('OK');
      expect(first.headers['X-RateLimit-Limit']).toBe('60');
      expect(first.headers['X-RateLimit-Remaining']).toBe('1');
      expect((await checkFromPod(keyId)).code).toBe('OK');
      const refused = await checkFromPod(keyId);
      expect(refused.code).toBe('OVER_LIMIT');
      expect(refused.headers['X-RateLimit-Remaining']).toBe('0');
    },
    120_000,
  );

  nodeTest(
    "two controller releases on the one node (with hostNetwork a replica's ports are the node's, so a second replica is a second release) elect one leader, and deleting the leader's Pod moves the Lease while a watch sees no Ready domain drop",
    async () => {
      await helmInstall(SECOND_RELEASE, await releaseValues(await freePort()));
      const holder = async (): Promise<string> =>
        (
          await kubectl([
            'get',
            'lease',
            LEASE,
            '-n',
            OPERATOR_NAMESPACE,
            '-o',
            'jsonpath={.spec.holderIdentity}',
          ])
        ).trim();
      /** The running controller Pods' names. */
      const pods = async (): Promise<string[]> =>
        (await podsOf('controller')).filter((p) => p.status.phase === 'Running').map((p) => p.metadata.name);
      /** The Pod whose own log (read through the kubelet) says it became leader as `identity`. */
      const podLeadingAs = async (identity: string): Promise<string | undefined> => {
        for (const name of await pods()) {
          const log = await kubectl(['logs', '-n', OPERATOR_NAMESPACE, name]);
          if (
            log.split('\n').some((l) => l.includes(`"identity":"${identity}"`) && l.includes('became leader'))
          )
            return name;
        }
        return undefined;
      };
      const running = await pods();
      expect(running).toHaveLength(2);
      const leaderId = await holder();
      const leaderPod = await waitFor("the Lease holder's Pod", () => podLeadingAs(leaderId), 30_000, 1000);
      const otherPod = running.find((p) => p !== leaderPod);
      expect(otherPod).toBeDefined();

      const watched = await watchReady(async () => {
        const deleted = Date.now();
        await kubectl(['delete', 'pod', '-n', OPERATOR_NAMESPACE, leaderPod ?? '', '--wait=false']);
        const newId = await waitFor(
          'the Lease to move',
          async () => {
            const h = await holder();
            return h !== leaderId && h !== '' ? h : undefined;
          },
          30_000,
          200,
        );
        const movedSeconds = (Date.now() - deleted) / 1000;
        // The surviving replica took it, not the deleted one's replacement.
        expect(await waitFor("the new holder's Pod", () => podLeadingAs(newId), 30_000, 1000)).toBe(otherPod);
        // Through the replacement's start as well: both Deployments rolled out again.
        for (const release of [RELEASE, SECOND_RELEASE]) await rolledOut(release);
        return movedSeconds;
      });
      process.stderr.write(
        `helm-kubelet: the Lease moved ${watched.result.toFixed(1)} s after the leader's Pod was deleted; ${watched.events} CustomDomain events watched\n`,
      );
      // Within the chart's leaseDurationSeconds (15) with the renew deadline's margin.
      expect(watched.result).toBeLessThan(25);
      const now = await phases();
      expect(watched.events).toBeGreaterThanOrEqual(now.length);
      expect(watched.notReady).toEqual([]);
      expect(
        now.every((p) => p === 'Live'),
        now.join(' '),
      ).toBe(true);
    },
    420_000,
  );

  nodeTest(
    'helm upgrade to a newer build (the image under a new tag) rolls every Pod while a watch sees no Ready domain drop, and the new rate-limit Pod answers',
    async () => {
      const node = nodePaths(sandboxPaths(DIR));
      const newer = `${image.image}-next`;
      await runOk(nodeTools(bin).ctr, [
        '--address',
        node.containerdSocket,
        '-n',
        'k8s.io',
        'images',
        'tag',
        '--force',
        image.image,
        newer,
      ]);
      const before = new Set(
        [...(await podsOf('controller')), ...(await podsOf('ratelimit'))].map((p) => p.metadata.uid),
      );
      const watched = await watchReady(async () => {
        for (const release of [RELEASE, SECOND_RELEASE]) {
          await helmOk([
            'upgrade',
            release,
            CHART,
            '--reuse-values',
            '--set',
            `image.tag=${newer.slice(newer.lastIndexOf(':') + 1)}`,
            '--wait',
            '--timeout',
            '5m',
          ]);
          await rolledOut(release);
        }
      });
      expect(watched.notReady).toEqual([]);
      expect(watched.events).toBeGreaterThan(0);
      const after = await waitFor(
        'the old Pods to be gone',
        async () => {
          const pods = [...(await podsOf('controller')), ...(await podsOf('ratelimit'))];
          return pods.length === 3 ? pods : undefined;
        },
        60_000,
        1000,
      );
      expect(after).toHaveLength(3);
      for (const pod of after) {
        expect(before.has(pod.metadata.uid), pod.metadata.name).toBe(false);
        const [container] = pod.status.containerStatuses ?? [];
        // The Pod's spec names the new tag; containerd reports one of the image's tags in
        // status.image, so the image run is checked by its ID (the same image, under both tags).
        expect(pod.spec.containers[0]?.image, pod.metadata.name).toBe(newer);
        expect(container?.imageID).toBe(image.id);
        expect(container?.ready, pod.metadata.name).toBe(true);
      }
      const now = await phases();
      expect(
        now.every((p) => p === 'Live'),
        now.join(' '),
      ).toBe(true);
      await waitFor(
        'the new rate-limit Pod to answer',
        async () =>
          (await checkFromPod(`kubelet-next-${Date.now()}`).catch(() => undefined))?.code === 'OK'
            ? true
            : undefined,
        60_000,
        1000,
      );
    },
    720_000,
  );

  nodeTest(
    'a controller Pod growing past its memory limit is OOMKilled by the kubelet and comes back in the same Pod, the domains Live and their certificates not issued again',
    async () => {
      // Test-only: grows the process by 16 MiB every 50 ms, once per Pod (the marker is in the Pod's
      // /tmp emptyDir, which outlives the container), 5 s after it starts.
      await kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'portico-e2e-allocate', namespace: OPERATOR_NAMESPACE },
          data: {
            'allocate.cjs': [
              "const fs = require('node:fs');",
              "const marker = '/tmp/portico-e2e-allocated';",
              'if (!fs.existsSync(marker)) {',
              '  setTimeout(() => {',
              '    fs.writeFileSync(marker, String(Date.now()));',
              '    const held = [];',
              '    setInterval(() => held.push(Buffer.alloc(16 << 20, 1)), 50);',
              '  }, 5000);',
              '}',
              '',
            ].join('\n'),
          },
        }),
      );
      const secretsBefore = await certificateSecrets();
      expect(Object.keys(secretsBefore).length).toBeGreaterThan(0);
      const watched = await watchReady(async () => {
        await helmInstall(
          OOM_RELEASE,
          await releaseValues(await freePort(), {
            memoryLimit: '256Mi',
            extraVolumes: [{ name: 'allocate', configMap: { name: 'portico-e2e-allocate' } }],
            extraVolumeMounts: [{ name: 'allocate', mountPath: '/etc/portico-e2e', readOnly: true }],
            // The chart's own NODE_OPTIONS comes first; this later entry wins (the kubelet's rule).
            extraEnv: [
              {
                name: 'NODE_OPTIONS',
                value:
                  '--max-old-space-size=256 --max-semi-space-size=4 --require=/etc/portico-e2e/allocate.cjs',
              },
            ],
          }),
        );
        return waitFor(
          'the OOMKilled container to be Ready again',
          async () => {
            const [pod] = await podsOf('controller', OOM_RELEASE);
            const [c] = pod?.status.containerStatuses ?? [];
            return c !== undefined && c.restartCount >= 1 && c.ready ? pod : undefined;
          },
          180_000,
          1000,
        );
      });
      const pod = watched.result;
      const [container] = pod.status.containerStatuses ?? [];
      expect(container?.lastState.terminated?.reason).toBe('OOMKilled');
      expect(container?.lastState.terminated?.exitCode).toBe(137);
      // Once: the restarted container runs on (the marker outlived the container), in the same Pod.
      expect(container?.restartCount).toBe(1);
      // The limit is the kernel's: the running container's memory cgroup holds the values' 256Mi.
      const containerId = (container?.containerID ?? '').replace(/^containerd:\/\//, '');
      const limitFile = `/sys/fs/cgroup/memory/kubepods/burstable/pod${pod.metadata.uid}/${containerId}/memory.limit_in_bytes`;
      expect((await readFile(limitFile, 'utf8')).trim()).toBe(String(256 * 1024 * 1024));

      expect(watched.notReady).toEqual([]);
      const now = await phases();
      expect(
        now.every((p) => p === 'Live'),
        now.join(' '),
      ).toBe(true);
      // No certificate was written again: every Secret has the same uid, resourceVersion and certificate.
      expect(await certificateSecrets()).toEqual(secretsBefore);
    },
    420_000,
  );

  nodeTest(
    'helm uninstall keeps the CRDs (crds.install with crds.keep, the default), the CustomDomains and their certificate Secrets; with crds.keep=false it deletes the CRDs',
    async () => {
      const crdNames = (await kubectl(['get', 'crd', '-o', 'jsonpath={.items[*].metadata.name}']))
        .split(' ')
        .filter((n) => n.endsWith(`.${GROUP}`));
      expect(crdNames.length).toBeGreaterThan(0);
      const uids = async (kind: string, all: boolean): Promise<string> =>
        kubectl(['get', kind, ...(all ? ['-A'] : []), '-o', 'jsonpath={.items[*].metadata.uid}']);
      const crdUids = await kubectl(['get', 'crd', ...crdNames, '-o', 'jsonpath={.items[*].metadata.uid}']);
      const domainUids = await uids('customdomains', true);
      const secretsBefore = await certificateSecrets();
      // The sandbox applied the CRDs with kubectl: hand them to the first release (docs/install.md,
      // "Letting the chart upgrade the CRDs") and let it render them with crds.install.
      await kubectl(['label', 'crd', ...crdNames, 'app.kubernetes.io/managed-by=Helm', '--overwrite']);
      await kubectl([
        'annotate',
        'crd',
        ...crdNames,
        `meta.helm.sh/release-name=${RELEASE}`,
        `meta.helm.sh/release-namespace=${OPERATOR_NAMESPACE}`,
        '--overwrite',
      ]);
      await helmOk([
        'upgrade',
        RELEASE,
        CHART,
        '--reuse-values',
        '--set',
        'crds.install=true',
        '--wait',
        '--timeout',
        '5m',
      ]);
      await rolledOut(RELEASE);

      const uninstalled = await helmOk(['uninstall', RELEASE, SECOND_RELEASE, OOM_RELEASE, '--wait']);
      expect(uninstalled).toContain('kept due to the resource policy');
      await waitFor(
        'the Pods to be gone',
        async () =>
          (await podsOf('controller')).length + (await podsOf('ratelimit')).length === 0 ? true : undefined,
        120_000,
        1000,
      );
      expect(await kubectl(['get', 'crd', ...crdNames, '-o', 'jsonpath={.items[*].metadata.uid}'])).toBe(
        crdUids,
      );
      expect(await uids('customdomains', true)).toBe(domainUids);
      expect(await certificateSecrets()).toEqual(secretsBefore);
      // The ACME account key, which the controller made, not Helm.
      expect(
        await kubectl(['get', 'secret', '-n', OPERATOR_NAMESPACE, 'portico-acme-account', '-o', 'name']),
      ).toContain('portico-acme-account');

      // crds.keep=false: a new install takes the kept CRDs over (they carry its name), and its
      // uninstall deletes them (with every object of their kinds; the domains' finalizer holds them
      // Terminating once no controller runs).
      await helmInstall(RELEASE, {
        ...(await releaseValues(env.http01Port)),
        crds: { install: true, keep: false },
      });
      // No --wait: the CRDs stay Terminating while the domains' finalizer holds them.
      expect(await helmOk(['uninstall', RELEASE])).not.toContain('kept due to the resource policy');
      for (const name of crdNames) {
        const left = await run(`${bin}/kubectl`, [
          '--kubeconfig',
          env.kubeconfig,
          'get',
          'crd',
          name,
          '-o',
          'jsonpath={.metadata.deletionTimestamp}',
        ]);
        expect(left.code !== 0 ? left.stderr : left.stdout, name).toMatch(/NotFound|^\d{4}-/);
      }
    },
    600_000,
  );

  nodeTest(
    'sandbox down leaves no Pod process, cgroup, host path or kernel setting changed behind',
    async () => {
      const chains = await kubeChains();
      await sandboxDown(DIR);
      expect(await podCgroups()).toEqual([]);
      for (const p of [
        '/run/containerd',
        '/var/lib/kubelet',
        '/opt/containerd',
        nodePaths(sandboxPaths(DIR)).dir,
      ]) {
        await expect(access(p), p).rejects.toThrow();
      }
      const shims = await run('pgrep', ['-f', nodePaths(sandboxPaths(DIR)).containerdSocket]);
      expect(shims.stdout.trim()).toBe('');
      expect(await kernelSettings()).toEqual(kernelBefore);
      if (chains !== undefined) expect(chains).toEqual([]);
    },
    120_000,
  );
});
