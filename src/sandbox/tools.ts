/**
 * The binaries of the real parts, built (once, cached outside the repository) by
 * `scripts/install-tools.sh`.
 */
import { spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';

import { ToolsInstallError } from './errors.js';

/** Absolute paths of the tools the sandbox runs. */
export interface Tools {
  readonly binDir: string;
  readonly etcd: string;
  readonly kubeApiserver: string;
  readonly kubectl: string;
  readonly pebble: string;
  readonly pebbleChalltestsrv: string;
  /** Debian's redis-server, linked into the bin directory. */
  readonly redisServer: string;
  /** Contour, the ingress controller of `--data-plane contour`. */
  readonly contour: string;
  /** Contour's CRDs, from the module version the binary was built from. */
  readonly contourCrds: string;
  /**
   * Envoy Gateway (`envoy-gateway`), its CLI (`egctl`) and its CRDs with Gateway API's experimental
   * channel, from the module version the binaries were built from. Present (checked) only when built:
   * the `envoyGateway` or `test` tool set.
   */
  readonly envoyGateway: string;
  readonly egctl: string;
  readonly envoyGatewayCrds: string;
  /**
   * Traefik and its CRDs (Middleware, IngressRoute, ...), from the module version the binary was built
   * from. Present (checked) only when built: the `traefik` or `test` tool set.
   */
  readonly traefik: string;
  readonly traefikCrds: string;
}

/** Which of the script's tool sets to build besides the sandbox's own. */
export interface ToolSets {
  /**
   * helm, promtool, envoyproxy/ratelimit's client, which only the e2e tests run, and Envoy Gateway
   * (`--test`).
   */
  readonly test?: boolean;
  /** Envoy Gateway and egctl with their CRDs (`--envoy-gateway`), for `--data-plane envoy-gateway`. */
  readonly envoyGateway?: boolean;
  /** Traefik with its CRDs (`--traefik`), for `--data-plane traefik`. */
  readonly traefik?: boolean;
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
  const flags = [
    ...(sets.test === true ? ['--test'] : []),
    ...(sets.envoyGateway === true ? ['--envoy-gateway'] : []),
    ...(sets.traefik === true ? ['--traefik'] : []),
    ...(sets.kubelet === true ? ['--kubelet'] : []),
    ...(sets.knot === true ? ['--knot'] : []),
  ];
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
    contour: path.join(binDir, 'contour'),
    contourCrds: path.join(binDir, 'contour-crds.yaml'),
    envoyGateway: path.join(binDir, 'envoy-gateway'),
    egctl: path.join(binDir, 'egctl'),
    envoyGatewayCrds: path.join(binDir, 'envoy-gateway-crds.yaml'),
    traefik: path.join(binDir, 'traefik'),
    traefikCrds: path.join(binDir, 'traefik-crds.yaml'),
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
  const withEnvoyGateway = sets.test === true || sets.envoyGateway === true;
  const withTraefik = sets.test === true || sets.traefik === true;
  const withKnot = sets.test === true || sets.knot === true;
  for (const file of [
    tools.etcd,
    tools.kubeApiserver,
    tools.kubectl,
    tools.pebble,
    tools.pebbleChalltestsrv,
    tools.redisServer,
    tools.contour,
    ...(withEnvoyGateway ? [tools.envoyGateway, tools.egctl] : []),
    ...(withTraefik ? [tools.traefik] : []),
    ...(withKnot ? [path.join(tools.binDir, 'knotd'), path.join(tools.binDir, 'named')] : []),
  ]) {
    try {
      await access(file, constants.X_OK);
    } catch {
      throw new ToolsInstallError(`${script} finished but ${file} is missing or not executable`);
    }
  }
  for (const file of [
    tools.contourCrds,
    ...(withEnvoyGateway ? [tools.envoyGatewayCrds] : []),
    ...(withTraefik ? [tools.traefikCrds] : []),
  ]) {
    try {
      await access(file, constants.R_OK);
    } catch {
      throw new ToolsInstallError(`${script} finished but ${file} is missing or not readable`);
    }
  }
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
