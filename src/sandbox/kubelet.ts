/**
 * A node for the sandbox's cluster (`portico sandbox up --kubelet`): containerd and a kubelet that run
 * real Pods, with kube-scheduler and kube-controller-manager, so that `helm install` of the chart runs
 * Portico's Pods as it would on a cluster (docs/testing.md, "A node: --kubelet";
 * ../shared/recipes/kubelet-and-image.md).
 *
 * What it must never do on a shared machine, and how that is prevented:
 * - Change the host's kernel settings: the kubelet writes vm.overcommit_memory, vm.panic_on_oom,
 *   kernel.panic, kernel.panic_on_oops and kernel.keys.root_max{keys,bytes} when they differ from
 *   what it wants. containerd and the kubelet run together in a mount namespace of their own
 *   (`unshare -m --propagation private`) in which those /proc/sys files are bind-mounted over by
 *   regular files already holding the values it wants, so it writes nothing to the kernel. Both are
 *   in the same namespace since the volumes the kubelet mounts must be seen by runc.
 * - Change the host's firewall: `makeIPTablesUtilChains: false` (otherwise the kubelet adds chains,
 *   one dropping loopback traffic); no kube-proxy; no Pod network: the CNI configuration is the
 *   `loopback` plugin alone, so Pods that must reach the API server on 127.0.0.1 run with
 *   hostNetwork (the chart's `hostNetwork` value).
 *
 * Node identity: a client certificate CN=system:node:localhost, O=system:nodes from the cluster CA and
 * a ClusterRoleBinding to `system:node` (the API server runs RBAC without the Node authorizer);
 * `--hostname-override localhost`, so the API server's `kubectl logs` and `exec` reach it on loopback.
 *
 * The kubelet and containerd use some host paths whatever their flags: /var/lib/kubelet/device-plugins,
 * /run/containerd (the shims' sockets) and the cgroups `<controller>/kubepods`. One sandbox with a
 * node runs on a machine at a time; `stopNode` removes those paths (the ones that did not exist
 * before `startNode`), the cgroups, the Pods' processes and the node's state directory.
 */
import { spawn } from 'node:child_process';
import https from 'node:https';
import { access, constants, mkdir, readFile, readdir, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { CERT_FILES, type SandboxCertificates } from './certificates.js';
import { SandboxError, ToolsInstallError } from './errors.js';
import { writeKubeconfig } from './kubeconfig.js';
import { runKubectl, type Kubectl } from './kubectl.js';
import type { SandboxPaths } from './paths.js';
import { isAlive, isOurs, readPid, startDetached, stopProcess, type StopOutcome } from './processes.js';
import { waitUntilReady } from './readiness.js';

export const KUBELET = 'kubelet';
export const CONTAINERD = 'containerd';
export const KUBE_SCHEDULER = 'kube-scheduler';
export const KUBE_CONTROLLER_MANAGER = 'kube-controller-manager';
/** The node's processes, in the order stopNode stops them. */
export const NODE_PROCESSES = [KUBELET, CONTAINERD, KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER] as const;

/** The Node's name (`--hostname-override`); its client certificate is CN=system:node:localhost. */
export const NODE_NAME = 'localhost';
/** The pause image (scripts/install-tools.sh --kubelet builds it from test/tools/pause). */
export const PAUSE_IMAGE = 'localhost/portico-pause:3.10';
/** The containerd namespace the CRI plugin (and so the kubelet) uses. */
export const CRI_NAMESPACE = 'k8s.io';

/**
 * The kernel settings the kubelet sets when they differ (pkg/kubelet/cm setupKernelTunables), with
 * the values it wants: each file is bind-mounted over, inside the node's mount namespace, by a
 * regular file holding that value.
 */
const KERNEL_TUNABLES: Readonly<Record<string, string>> = {
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};

/** Host paths the kubelet or containerd create whatever their flags; removed by stopNode if new. */
const HOST_PATHS = ['/var/lib/kubelet', '/run/containerd', '/opt/containerd'] as const;

/** The cgroup the kubelet puts Pods under (cgroupsPerQOS, cgroupRoot "/"), in every hierarchy. */
const PODS_CGROUP = 'kubepods';
const CGROUP_ROOT = '/sys/fs/cgroup';

/** The binaries and files of the node (scripts/install-tools.sh --kubelet). */
export interface NodeTools {
  readonly kubelet: string;
  readonly kubeScheduler: string;
  readonly kubeControllerManager: string;
  readonly containerd: string;
  readonly containerdShim: string;
  readonly ctr: string;
  readonly runc: string;
  /** The pause image as a docker-archive. */
  readonly pauseImage: string;
}

/** The node's tools in the tools' bin directory. */
export function nodeTools(binDir: string): NodeTools {
  return {
    kubelet: path.join(binDir, 'kubelet'),
    kubeScheduler: path.join(binDir, 'kube-scheduler'),
    kubeControllerManager: path.join(binDir, 'kube-controller-manager'),
    containerd: path.join(binDir, 'containerd'),
    containerdShim: path.join(binDir, 'containerd-shim-runc-v2'),
    ctr: path.join(binDir, 'ctr'),
    runc: path.join(binDir, 'runc'),
    pauseImage: path.join(binDir, 'pause.tar'),
  };
}

/**
 * Checks that every tool of the node is there.
 *
 * @throws ToolsInstallError naming each one missing (the kubelet, containerd, runc or the pause image)
 */
export async function checkNodeTools(tools: NodeTools): Promise<void> {
  const missing: string[] = [];
  for (const [name, file] of Object.entries(tools) as [string, string][]) {
    try {
      await access(file, name === 'pauseImage' ? constants.R_OK : constants.X_OK);
    } catch {
      missing.push(`${name} (${file})`);
    }
  }
  if (missing.length > 0) {
    throw new ToolsInstallError(
      `the node's tools are missing: ${missing.join(', ')}; run scripts/install-tools.sh --kubelet`,
    );
  }
}

/** The node's files under `<dir>/node/`. */
export interface NodePaths {
  readonly dir: string;
  readonly containerdConfig: string;
  readonly containerdSocket: string;
  readonly cniConfDir: string;
  readonly kubeletConfig: string;
  readonly kubeletKubeconfig: string;
  readonly kubeletRootDir: string;
  readonly script: string;
  readonly tunablesDir: string;
  /** Which of HOST_PATHS existed before the node started (JSON). */
  readonly hostPathsFile: string;
}

/** The node's paths in the sandbox `paths`. */
export function nodePaths(paths: SandboxPaths): NodePaths {
  const dir = path.join(paths.dir, 'node');
  return {
    dir,
    containerdConfig: path.join(dir, 'containerd.toml'),
    containerdSocket: path.join(dir, 'containerd', 'containerd.sock'),
    cniConfDir: path.join(dir, 'cni'),
    kubeletConfig: path.join(dir, 'kubelet-config.yaml'),
    kubeletKubeconfig: path.join(dir, 'kubelet.kubeconfig'),
    kubeletRootDir: path.join(dir, 'kubelet'),
    script: path.join(dir, 'node.sh'),
    tunablesDir: path.join(dir, 'sysctl'),
    hostPathsFile: path.join(dir, 'host-paths.json'),
  };
}

/** The ports of the node's processes, all on 127.0.0.1. */
export interface NodePorts {
  readonly kubelet: number;
  readonly kubeletHealthz: number;
  readonly scheduler: number;
  readonly controllerManager: number;
}

/** containerd's configuration (version 2 format, containerd 1.6 and 1.7). */
export function containerdConfig(node: NodePaths, tools: NodeTools): string {
  const state = path.join(node.dir, 'containerd');
  return `version = 2
root = ${JSON.stringify(path.join(state, 'root'))}
state = ${JSON.stringify(path.join(state, 'state'))}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = ${JSON.stringify(node.containerdSocket)}

[ttrpc]
  address = ${JSON.stringify(`${node.containerdSocket}.ttrpc`)}

[plugins."io.containerd.internal.v1.opt"]
  path = ${JSON.stringify(path.join(state, 'opt'))}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${JSON.stringify(PAUSE_IMAGE)}
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = ${JSON.stringify(tools.runc)}
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = ${JSON.stringify(node.cniConfDir)}
`;
}

/** The CNI configuration: the loopback plugin alone (no bridge, no firewall rules, no addresses). */
export const LOOPBACK_CNI_CONFIG = `${JSON.stringify({
  cniVersion: '1.0.0',
  name: 'portico-loopback',
  plugins: [{ type: 'loopback' }],
})}\n`;

/** The KubeletConfiguration (kubelet.config.k8s.io/v1beta1), as JSON (which is YAML). */
export function kubeletConfig(paths: SandboxPaths, node: NodePaths, ports: NodePorts): string {
  return `${JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: '127.0.0.1',
      port: ports.kubelet,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: ports.kubeletHealthz,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: paths.cert(CERT_FILES.clusterCaCert) },
      },
      authorization: { mode: 'Webhook' },
      containerRuntimeEndpoint: `unix://${node.containerdSocket}`,
      // Kubernetes 1.35+ refuses cgroup v1 unless told; this machine kind mounts a v1/v2 hybrid.
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      failSwapOn: false,
      // Never touch the host's firewall or kernel settings (see the module's header).
      makeIPTablesUtilChains: false,
      protectKernelDefaults: false,
      podLogsDir: path.join(node.dir, 'pod-logs'),
      volumePluginDir: path.join(node.dir, 'volume-plugins'),
      // The test machine is shared and often full: evict only when nearly nothing is left, and
      // never collect images (they are imported, not pulled).
      evictionHard: {
        'memory.available': '100Mi',
        'nodefs.available': '1%',
        'nodefs.inodesFree': '1%',
        'imagefs.available': '1%',
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      maxPods: 30,
      serializeImagePulls: false,
      fileCheckFrequency: '5s',
      nodeStatusUpdateFrequency: '5s',
      syncFrequency: '10s',
      resolvConf: '/etc/resolv.conf',
    },
    null,
    2,
  )}\n`;
}

/**
 * The node's script, run as `unshare -m --propagation private bash node.sh`: bind-mounts the kernel
 * tunables, starts containerd (its own session, pid file `containerd`), imports the pause image,
 * then becomes the kubelet (pid file `kubelet`, the unshare's pid).
 */
export function nodeScript(
  paths: SandboxPaths,
  node: NodePaths,
  tools: NodeTools,
  containerdLog: string,
): string {
  const q = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;
  const mounts = Object.keys(KERNEL_TUNABLES)
    .map(
      (name) => `mount --bind ${q(path.join(node.tunablesDir, name.replaceAll('/', '.')))} /proc/sys/${name}`,
    )
    .join('\n');
  const kubeletArgs = [
    `--config=${node.kubeletConfig}`,
    `--kubeconfig=${node.kubeletKubeconfig}`,
    `--root-dir=${node.kubeletRootDir}`,
    `--cert-dir=${path.join(node.dir, 'kubelet-pki')}`,
    `--hostname-override=${NODE_NAME}`,
    '--v=1',
  ];
  return `#!/bin/bash
# Written by portico sandbox up --kubelet (src/sandbox/kubelet.ts); runs in a mount namespace of its own.
set -euo pipefail
# The kernel settings the kubelet would write, answered by regular files in this namespace alone.
${mounts}
# The shims go on PATH before anything else, so containerd starts this containerd-shim-runc-v2.
export PATH=${q(path.dirname(tools.containerdShim))}:$PATH
setsid ${q(tools.containerd)} --config ${q(node.containerdConfig)} >>${q(containerdLog)} 2>&1 &
echo $! >${q(paths.pid(CONTAINERD))}
for _ in $(seq 1 300); do [[ -S ${q(node.containerdSocket)} ]] && break; sleep 0.1; done
${q(tools.ctr)} --address ${q(node.containerdSocket)} -n ${CRI_NAMESPACE} images import --no-unpack=false ${q(tools.pauseImage)} >/dev/null
exec ${q(tools.kubelet)} ${kubeletArgs.map(q).join(' ')}
`;
}

/** Runs a command to completion; returns stdout. @throws SandboxError with its stderr */
function run(command: string, args: readonly string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', (err) => {
      reject(new SandboxError(`${command} ${args.join(' ')}: ${err.message}`));
    });
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else
        reject(
          new SandboxError(`${command} ${args.join(' ')} exited ${code ?? 'on a signal'}: ${stderr.trim()}`),
        );
    });
  });
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/** The cgroup directories named `kubepods` directly under each hierarchy (v1 and the v2 unified one). */
async function podCgroups(): Promise<string[]> {
  const found: string[] = [];
  let hierarchies: string[];
  try {
    hierarchies = await readdir(CGROUP_ROOT);
  } catch {
    return [];
  }
  for (const h of hierarchies) {
    const dir = path.join(CGROUP_ROOT, h, PODS_CGROUP);
    if (await exists(dir)) found.push(dir);
  }
  if (await exists(path.join(CGROUP_ROOT, PODS_CGROUP))) found.push(path.join(CGROUP_ROOT, PODS_CGROUP));
  return found;
}

/** The pids in a cgroup tree (cgroup.procs of it and every descendant). */
async function cgroupPids(dir: string): Promise<number[]> {
  const pids: number[] = [];
  const procs = await readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
  for (const line of procs.split('\n')) if (line.trim() !== '') pids.push(Number(line));
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isDirectory()) pids.push(...(await cgroupPids(path.join(dir, e.name))));
  return pids;
}

/** Removes a cgroup tree, deepest first (a cgroup is removed with rmdir once it has no process). */
async function removeCgroupTree(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isDirectory()) await removeCgroupTree(path.join(dir, e.name));
  await rmdir(dir).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  });
}

/**
 * Starts kube-scheduler, kube-controller-manager, containerd and the kubelet, and waits until the
 * Node is Ready.
 *
 * @param kubectl the admin's kubectl (binds the node's user to `system:node`)
 * @throws ToolsInstallError when a tool is missing; SandboxError when another node runs on this
 *   machine (its kubepods cgroup holds processes); ComponentStartError when one exits or the Node is
 *   not Ready within 120 s
 */
export async function startNode(
  paths: SandboxPaths,
  tools: NodeTools,
  kubectl: Kubectl,
  server: string,
  certs: Pick<SandboxCertificates, 'node' | 'clusterCa'>,
  ports: NodePorts,
): Promise<void> {
  await checkNodeTools(tools);
  for (const dir of await podCgroups()) {
    if ((await cgroupPids(dir)).length > 0) {
      throw new SandboxError(
        `another kubelet runs Pods on this machine (${dir} holds processes); one sandbox with --kubelet at a time`,
      );
    }
  }
  const node = nodePaths(paths);
  await rm(node.dir, { recursive: true, force: true });
  await mkdir(node.cniConfDir, { recursive: true });
  await mkdir(node.tunablesDir, { recursive: true });
  await mkdir(path.dirname(node.containerdSocket), { recursive: true });
  const before: Record<string, boolean> = {};
  for (const p of HOST_PATHS) before[p] = await exists(p);
  await writeFile(node.hostPathsFile, `${JSON.stringify(before)}\n`);
  for (const [name, value] of Object.entries(KERNEL_TUNABLES)) {
    await writeFile(path.join(node.tunablesDir, name.replaceAll('/', '.')), `${value}\n`);
  }
  await writeFile(node.containerdConfig, containerdConfig(node, tools));
  await writeFile(path.join(node.cniConfDir, '10-loopback.conflist'), LOOPBACK_CNI_CONFIG);
  await writeFile(node.kubeletConfig, kubeletConfig(paths, node, ports));
  await writeKubeconfig(node.kubeletKubeconfig, {
    server,
    caPem: certs.clusterCa.certPem,
    clientCertPem: certs.node.certPem,
    clientKeyPem: certs.node.keyPem,
  });
  await writeFile(node.script, nodeScript(paths, node, tools, paths.log(CONTAINERD)), { mode: 0o755 });
  await writeFile(paths.log(CONTAINERD), '');

  // The node's user gets what the Node authorizer would give it (the API server runs RBAC alone).
  await runKubectl(kubectl, ['apply', '-f', '-'], {
    input: JSON.stringify({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'portico-sandbox-node' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: `system:node:${NODE_NAME}` }],
    }),
  });

  const admin = kubectl.kubeconfig;
  const common = [
    `--kubeconfig=${admin}`,
    `--authentication-kubeconfig=${admin}`,
    `--authorization-kubeconfig=${admin}`,
    '--bind-address=127.0.0.1',
    '--leader-elect=false',
  ];
  const scheduler = await startDetached(paths, {
    name: KUBE_SCHEDULER,
    command: tools.kubeScheduler,
    args: [...common, `--secure-port=${ports.scheduler}`],
  });
  const controllerManager = await startDetached(paths, {
    name: KUBE_CONTROLLER_MANAGER,
    command: tools.kubeControllerManager,
    args: [
      ...common,
      `--secure-port=${ports.controllerManager}`,
      // The CA Pods trust the API server with (the kube-root-ca.crt ConfigMap of every namespace).
      `--root-ca-file=${paths.cert(CERT_FILES.clusterCaCert)}`,
      '--use-service-account-credentials=false',
      // No cloud, no Pod network: the controllers that would allocate CIDRs or routes stay off.
      '--controllers=*,-nodeipam',
    ],
  });
  const kubelet = await startDetached(paths, {
    name: KUBELET,
    command: 'unshare',
    args: ['--mount', '--propagation', 'private', 'bash', node.script],
  });
  await waitUntilReady(kubelet, nodeReadyProbe(kubectl), { timeoutMs: 120_000, intervalMs: 500 });
  await waitUntilReady(scheduler, healthzProbe(ports.scheduler), { timeoutMs: 60_000, intervalMs: 500 });
  // The controller manager works once its ServiceAccount controller made `default` (Pods need it).
  await waitUntilReady(controllerManager, defaultServiceAccountProbe(kubectl), {
    timeoutMs: 60_000,
    intervalMs: 500,
  });
}

/**
 * GET https://127.0.0.1:<port>/healthz of a component serving its own self-signed certificate (its
 * `--cert-dir`), so its certificate is not checked: the answer only tells that it runs.
 */
function healthzProbe(port: number): () => Promise<true | string> {
  return () =>
    new Promise((resolve) => {
      const req = https.get(
        { host: '127.0.0.1', port, path: '/healthz', rejectUnauthorized: false, timeout: 2000 },
        (res) => {
          res.resume();
          resolve(res.statusCode === 200 ? true : `GET /healthz answered ${res.statusCode ?? 0}`);
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer within 2 s')));
      req.on('error', (err) => {
        resolve(`GET https://127.0.0.1:${port}/healthz: ${err.message}`);
      });
    });
}

function defaultServiceAccountProbe(kubectl: Kubectl): () => Promise<true | string> {
  return async () => {
    try {
      await runKubectl(kubectl, ['get', 'serviceaccount', 'default', '-n', 'default'], { timeoutMs: 10_000 });
      return true;
    } catch (err: unknown) {
      return (err as Error).message;
    }
  };
}

/**
 * The node's components for `sandbox status`: each process runs, the Node is Ready, containerd's
 * socket is there, the controller manager made the `default` ServiceAccount.
 */
export function nodeStatusChecks(
  paths: SandboxPaths,
  kubectl: Kubectl,
): { name: string; hasProcess: true; probe: () => Promise<true | string> }[] {
  const socket = nodePaths(paths).containerdSocket;
  return [
    { name: KUBELET, hasProcess: true, probe: nodeReadyProbe(kubectl) },
    {
      name: CONTAINERD,
      hasProcess: true,
      probe: async () => ((await exists(socket)) ? true : `no socket ${socket}`),
    },
    { name: KUBE_SCHEDULER, hasProcess: true, probe: () => Promise.resolve(true) },
    { name: KUBE_CONTROLLER_MANAGER, hasProcess: true, probe: defaultServiceAccountProbe(kubectl) },
  ];
}

/** Whether the sandbox in `paths` has a node (`<dir>/node/` exists). */
export function hasNode(paths: SandboxPaths): Promise<boolean> {
  return exists(nodePaths(paths).dir);
}

function nodeReadyProbe(kubectl: Kubectl): () => Promise<true | string> {
  return async () => {
    try {
      const status = await runKubectl(
        kubectl,
        ['get', 'node', NODE_NAME, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'],
        { timeoutMs: 10_000 },
      );
      return status === 'True' ? true : `Node ${NODE_NAME} Ready is "${status}"`;
    } catch (err: unknown) {
      return (err as Error).message;
    }
  };
}

/** What stopNode did, for `sandbox down`'s report. */
export interface StoppedNode {
  /** The node's processes and what stopping each did, in stop order. */
  readonly processes: readonly { readonly name: string; readonly outcome: StopOutcome }[];
  /** Containers killed and removed through containerd. */
  readonly containers: number;
  /** Processes of the Pods' cgroups killed after containerd stopped (shims, leftovers). */
  readonly leftoverProcesses: number;
  /** Host paths and cgroups removed. */
  readonly removed: readonly string[];
}

/**
 * Stops the node of the sandbox in `paths` and removes what it left on the machine: the kubelet
 * first (so it restarts nothing), then every container through containerd, then containerd, then any
 * process still in the Pods' cgroups (SIGKILL), the `kubepods` cgroups, the host paths that did not
 * exist before `startNode`, and `<dir>/node/`. The mounts were private to the node's namespace and
 * went with its last process. Does nothing when the sandbox has no node.
 *
 * @throws SandboxError when a Pod cgroup cannot be removed (a process in it survived SIGKILL)
 */
export async function stopNode(
  paths: SandboxPaths,
  ctr: string | undefined,
): Promise<StoppedNode | undefined> {
  const node = nodePaths(paths);
  if (!(await exists(node.dir))) return undefined;
  const processes = [{ name: KUBELET, outcome: await stopProcess(paths, KUBELET) }];
  const containerdPid = await readPid(paths, CONTAINERD);
  const containers =
    ctr !== undefined && containerdPid !== undefined && (await isOurs(containerdPid, paths.dir))
      ? await removeContainers(ctr, node)
      : 0;
  for (const name of [CONTAINERD, KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER]) {
    processes.push({ name, outcome: await stopProcess(paths, name) });
  }
  const { leftoverProcesses, removed } = await removePodCgroups();
  removed.push(...(await removeHostPaths(node)));
  await rm(node.dir, { recursive: true, force: true });
  return { processes, containers, leftoverProcesses, removed };
}

/** Kills and deletes every container of the CRI namespace through containerd; returns how many. */
async function removeContainers(ctr: string, node: NodePaths): Promise<number> {
  const client = ['--address', node.containerdSocket, '-n', CRI_NAMESPACE];
  const ids = (await run(ctr, [...client, 'containers', 'list', '--quiet']).catch(() => ''))
    .split('\n')
    .filter((id) => id !== '');
  for (const id of ids) {
    await run(ctr, [...client, 'tasks', 'kill', '--signal', 'SIGKILL', id]).catch(() => '');
  }
  for (const id of ids) {
    for (let i = 0; i < 20 && !(await deleteTask(ctr, client, id)); i++) await sleep(100);
    await run(ctr, [...client, 'containers', 'delete', id]).catch(() => '');
  }
  return ids.length;
}

/** Deletes a container's task; true when it is gone (deleted, or there was none). */
function deleteTask(ctr: string, client: readonly string[], id: string): Promise<boolean> {
  return run(ctr, [...client, 'tasks', 'delete', '--force', id]).then(
    () => true,
    (err: unknown) => /not found/.test((err as Error).message),
  );
}

/** SIGKILLs what is left in the `kubepods` cgroups, then removes them. */
async function removePodCgroups(): Promise<{ leftoverProcesses: number; removed: string[] }> {
  let leftoverProcesses = 0;
  const removed: string[] = [];
  const cgroups = await podCgroups();
  for (const pid of (await Promise.all(cgroups.map(cgroupPids))).flat()) {
    try {
      process.kill(pid, 'SIGKILL');
      leftoverProcesses++;
    } catch {
      // gone already
    }
  }
  for (const dir of cgroups) {
    for (let i = 0; i < 50 && (await cgroupPids(dir)).some((pid) => isAlive(pid)); i++) await sleep(100);
    try {
      await removeCgroupTree(dir);
      removed.push(dir);
    } catch (err: unknown) {
      throw new SandboxError(`cannot remove the cgroup ${dir}: ${(err as Error).message}`);
    }
  }
  return { leftoverProcesses, removed };
}

/** Removes the host paths that did not exist before startNode; returns them. */
async function removeHostPaths(node: NodePaths): Promise<string[]> {
  const before = JSON.parse(await readFile(node.hostPathsFile, 'utf8').catch(() => '{}')) as Record<
    string,
    boolean
  >;
  const removed: string[] = [];
  for (const p of HOST_PATHS) {
    if (before[p] === false && (await exists(p))) {
      await rm(p, { recursive: true, force: true });
      removed.push(p);
    }
  }
  return removed;
}
