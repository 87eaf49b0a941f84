/**
 * The binaries of the real parts, built (once, cached outside the repository) by
 * `scripts/install-tools.sh`.
 */
import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';

import { ToolsInstallError } from './errors.js';

/**
 * A data plane's tools (its sandbox module's `tools`): built by its folder's `tools.sh`, which
 * scripts/install-tools.sh sources, and linked into the bin directory.
 */
export interface DataPlaneTools {
  /** The flag of install-tools.sh that asks for them (its tools.sh's `tool_flag`); undefined: always built. */
  readonly flag?: string;
  /** The binaries it links into the bin directory (checked executable). */
  readonly executables: readonly string[];
  /** The other files it links there, e.g. CRDs (checked readable). */
  readonly files: readonly string[];
}

/**
 * Absolute paths of the tools the sandbox runs; a data plane's own are in `binDir` by the names its
 * `DataPlaneTools` gives.
 */
export interface Tools {
  readonly binDir: string;
  readonly etcd: string;
  readonly kubeApiserver: string;
  readonly kubectl: string;
  readonly pebble: string;
  readonly pebbleChalltestsrv: string;
  /** Debian's redis-server, linked into the bin directory. */
  readonly redisServer: string;
}

/** Which of the script's tool sets to build besides the sandbox's own. */
export interface ToolSets {
  /**
   * helm, promtool, envoyproxy/ratelimit's client, which only the e2e tests run, and every data
   * plane's tools (`--test`).
   */
  readonly test?: boolean;
  /**
   * The data planes whose tools to build and check besides the stack's (each `DataPlaneTools`,
   * e.g. `--traefik` for `--data-plane traefik`); `test` builds every data plane's.
   */
  readonly dataPlanes?: readonly DataPlaneTools[];
  /**
   * The node (`--kubelet`): kubelet, kube-scheduler, kube-controller-manager, the pause image,
   * containerd and runc, for `sandbox up --kubelet` (src/sandbox/kubelet.ts checks them).
   */
  readonly kubelet?: boolean;
  /**
   * Knot DNS and BIND 9 from Debian's packages (`--knot`), for the apps zone of `sandbox up`
   * (src/sandbox/apps-zone.ts); `--test` installs them too.
   */
  readonly knot?: boolean;
}

/**
 * Runs `scripts/install-tools.sh` (fast when everything is cached; the first run builds from the Go
 * module proxy and takes many minutes) and returns the tools' paths. The script's progress (stderr)
 * is passed through to `stderr`.
 *
 * @param repoRoot the repository holding `scripts/install-tools.sh`
 * @param stderr where the script's progress goes
 * @param sets the script's optional tool sets to build too
 * @throws ToolsInstallError when the script fails, prints no bin directory, or a tool is missing
 */
export async function installTools(
  repoRoot: string,
  stderr: NodeJS.WritableStream,
  sets: ToolSets = {},
): Promise<Tools> {
  const script = path.join(repoRoot, 'scripts', 'install-tools.sh');
  const flags = toolFlags(sets);
  const stdout = await runScript(script, flags, stderr);
  const binDir = stdout.trim().split('\n').at(-1)?.trim() ?? '';
  if (binDir === '') throw new ToolsInstallError(`${script} printed no bin directory`);
  const tools: Tools = {
    binDir,
    etcd: path.join(binDir, 'etcd'),
    kubeApiserver: path.join(binDir, 'kube-apiserver'),
    kubectl: path.join(binDir, 'kubectl'),
    pebble: path.join(binDir, 'pebble'),
    pebbleChalltestsrv: path.join(binDir, 'pebble-challtestsrv'),
    redisServer: path.join(binDir, 'redis-server'),
  };
  await checkInstalled(script, tools, sets);
  return tools;
}

/**
 * Checks that the tools of the sets built are there: binaries executable, CRD files readable.
 *
 * @throws ToolsInstallError naming the first one missing
 */
async function checkInstalled(script: string, tools: Tools, sets: ToolSets): Promise<void> {
  const withKnot = sets.test === true || sets.knot === true;
  const inBin = (names: readonly string[]): string[] => names.map((n) => path.join(tools.binDir, n));
  for (const file of [
    tools.etcd,
    tools.kubeApiserver,
    tools.kubectl,
    tools.pebble,
    tools.pebbleChalltestsrv,
    tools.redisServer,
    ...(sets.dataPlanes ?? []).flatMap((d) => inBin(d.executables)),
    ...(withKnot ? inBin(['knotd', 'named']) : []),
  ]) {
    try {
      await access(file, constants.X_OK);
    } catch {
      throw new ToolsInstallError(`${script} finished but ${file} is missing or not executable`);
    }
  }
  for (const file of (sets.dataPlanes ?? []).flatMap((d) => inBin(d.files))) {
    try {
      await access(file, constants.R_OK);
    } catch {
      throw new ToolsInstallError(`${script} finished but ${file} is missing or not readable`);
    }
  }
}

/**
 * install-tools.sh's flags for `sets`: `--test` (every data plane's tools with it), each data plane's
 * own flag otherwise, `--kubelet`, `--knot`.
 */
export function toolFlags(sets: ToolSets): string[] {
  const dataPlaneFlags = (sets.dataPlanes ?? []).flatMap((d) => (d.flag === undefined ? [] : [d.flag]));
  return [
    ...(sets.test === true ? ['--test'] : dataPlaneFlags),
    ...(sets.kubelet === true ? ['--kubelet'] : []),
    ...(sets.knot === true ? ['--knot'] : []),
  ];
}

function runScript(script: string, args: readonly string[], stderr: NodeJS.WritableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.write(chunk));
    child.on('error', (err) => {
      reject(new ToolsInstallError(`cannot run ${script}: ${err.message}`));
    });
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new ToolsInstallError(`${script} exited with ${code ?? 'a signal'}; its output is above`));
    });
  });
}
