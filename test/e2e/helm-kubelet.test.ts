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
 * kubelet, containerd or image, or an image of other sources, fails the file with what to run (it
 * never passes without them).
 *
 * Two replicas electing one leader: with hostNetwork a replica's ports are the node's, so two
 * replicas of one Deployment cannot run on the one node; the second replica is a second release
 * (`portico-b`, other ports) in the same namespace, campaigning for the same Lease. Deleting the
 * leader's Pod moves the Lease to the other release's Pod (0.9 s here), every domain still Live.
 *
 * Not covered here (yet): the rate-limit server's Pod, `helm upgrade` and the memory limit (issue
 * #43, item 3).
 */
import { createHash } from 'node:crypto';
import { access, constants, readFile, readdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import { applyExamples } from '../../src/sandbox/examples.js';
import { checkNodeTools, nodePaths, nodeTools } from '../../src/sandbox/kubelet.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { stopProcess } from '../../src/sandbox/processes.js';
import { CONTROLLER } from '../../src/sandbox/controller.js';
import { OPERATOR_NAMESPACE, sandboxDown, sandboxUp, type SandboxEnv } from '../../src/sandbox/stack.js';
import { sandbox as sharedStack, waitFor } from './support/cluster.js';
import { CHART, REPO, run, runOk, toolsBin } from './support/helm.js';

const IMAGE_ARCHIVE =
  process.env.PORTICO_E2E_IMAGE_ARCHIVE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/images/portico-e2e.tar');
const BUILD_HINT = `scripts/build-image.sh --tag localhost/portico:e2e --output ${IMAGE_ARCHIVE}`;
const RELEASE = 'portico';
/** A second release of the controller on the same node (see the leader-election test). */
const SECOND_RELEASE = 'portico-b';
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
}

beforeAll(async () => {
  started = Date.now();
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

  const node = nodePaths(sandboxPaths(DIR));
  const ctr = nodeTools(bin).ctr;
  await runOk(ctr, ['--address', node.containerdSocket, '-n', 'k8s.io', 'images', 'import', IMAGE_ARCHIVE], {
    timeoutMs: 300_000,
  });
}, 900_000 + IMAGE_BUILD_WAIT_MS);

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

/** The chart's values for a release on the sandbox's node, its controller on `http01Port`. */
async function releaseValues(http01Port: number): Promise<Record<string, unknown>> {
  const apiPort = new URL(env.apiServerUrl).port;
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
      extraEnv: [
        // The API server listens on the node's loopback; the `kubernetes` Service has no route.
        { name: 'KUBERNETES_SERVICE_HOST', value: '127.0.0.1' },
        { name: 'KUBERNETES_SERVICE_PORT', value: apiPort },
        // The examples' hostnames are under .example (RFC 6761), as in the sandbox's operator.
        { name: 'PORTICO_ALLOW_SPECIAL_USE_HOSTNAMES', value: 'true' },
      ],
    },
  };
}

describe('helm install into a sandbox with a real kubelet', () => {
  it('registers Node localhost Ready with the kubelet and containerd that were built', async () => {
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

  it("helm install runs the controller Deployment Ready from the built image, as the chart's ServiceAccount", async () => {
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
    await helmInstall(RELEASE, await releaseValues(env.http01Port));

    const pods = JSON.parse(
      await kubectl([
        'get',
        'pods',
        '-n',
        OPERATOR_NAMESPACE,
        '-l',
        'app.kubernetes.io/component=controller',
        '-o',
        'json',
      ]),
    ) as {
      items: {
        spec: {
          serviceAccountName: string;
          hostNetwork?: boolean;
          volumes: { name: string; projected?: unknown }[];
        };
        status: { containerStatuses: { image: string; imageID: string; ready: boolean }[] };
      }[];
    };
    expect(pods.items).toHaveLength(1);
    const [pod] = pods.items;
    expect(pod?.spec.hostNetwork).toBe(true);
    expect(pod?.spec.serviceAccountName).toMatch(/controller/);
    // The ServiceAccount admission plugin mounted the token (kube-api-access-*).
    expect(
      pod?.spec.volumes.some((v) => v.name.startsWith('kube-api-access-') && v.projected !== undefined),
    ).toBe(true);
    const [container] = pod?.status.containerStatuses ?? [];
    expect(container?.ready).toBe(true);
    expect(container?.image).toBe(image.image);
    expect(container?.imageID).toBe(image.id);
  }, 420_000);

  it("makes the examples Live through the in-cluster operator (the sandbox's own operator stopped)", async () => {
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
        const phases = (
          await kubectl(['get', 'customdomains', '-A', '-o', 'jsonpath={.items[*].status.phase}'])
        ).split(' ');
        return phases.length === hostnames.length && phases.every((p) => p === 'Live') ? phases : undefined;
      },
      180_000,
      1000,
    );
    // The Pod's own log (read through the kubelet) names each domain it made Live.
    const logs = await kubectl(['logs', '-n', OPERATOR_NAMESPACE, `deployment/${RELEASE}-controller`]);
    for (const hostname of hostnames) expect(logs).toContain(hostname);
  }, 240_000);

  it("two controller releases on the one node (with hostNetwork a replica's ports are the node's, so a second replica is a second release) elect one leader, and deleting the leader's Pod moves the Lease with every domain still Live", async () => {
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
      (
        await kubectl([
          'get',
          'pods',
          '-n',
          OPERATOR_NAMESPACE,
          '-l',
          'app.kubernetes.io/component=controller',
          '--field-selector',
          'status.phase=Running',
          '-o',
          'jsonpath={.items[*].metadata.name}',
        ])
      )
        .split(' ')
        .filter((n) => n !== '');
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
    process.stderr.write(
      `helm-kubelet: the Lease moved ${movedSeconds.toFixed(1)} s after the leader's Pod was deleted\n`,
    );
    // Within the chart's leaseDurationSeconds (15) with the renew deadline's margin.
    expect(movedSeconds).toBeLessThan(25);
    const phases = (
      await kubectl(['get', 'customdomains', '-A', '-o', 'jsonpath={.items[*].status.phase}'])
    ).split(' ');
    expect(phases.length).toBeGreaterThan(0);
    expect(
      phases.every((p) => p === 'Live'),
      phases.join(' '),
    ).toBe(true);
  }, 420_000);

  it('sandbox down leaves no Pod process, cgroup, host path or kernel setting changed behind', async () => {
    const uninstalled = await run(`${bin}/helm`, [
      'uninstall',
      RELEASE,
      SECOND_RELEASE,
      '--namespace',
      OPERATOR_NAMESPACE,
      '--kubeconfig',
      env.kubeconfig,
      '--wait',
    ]);
    expect(uninstalled.code, uninstalled.stderr).toBe(0);
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
  }, 120_000);
});
