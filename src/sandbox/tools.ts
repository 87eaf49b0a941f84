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
}

/** Which of the script's tool sets to build besides the sandbox's own. */
export interface ToolSets {
  /** helm, promtool and envoyproxy/ratelimit's client, which only the e2e tests run (`--test`). */
  readonly test?: boolean;
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
  const stdout = await runScript(script, sets.test === true ? ['--test'] : [], stderr);
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
  };
  for (const file of [
    tools.etcd,
    tools.kubeApiserver,
    tools.kubectl,
    tools.pebble,
    tools.pebbleChalltestsrv,
    tools.redisServer,
    tools.contour,
  ]) {
    try {
      await access(file, constants.X_OK);
    } catch {
      throw new ToolsInstallError(`${script} finished but ${file} is missing or not executable`);
    }
  }
  try {
    await access(tools.contourCrds, constants.R_OK);
  } catch {
    throw new ToolsInstallError(`${script} finished but ${tools.contourCrds} is missing or not readable`);
  }
  return tools;
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
