/**
 * The layout of a sandbox directory. One place names every file, so the modules that write them
 * and the commands that read them agree.
 *
 *   <dir>/env, state.json, kubeconfig, pebble.json, contour.yaml
 *   <dir>/certs/      generated keys and certificates (PEM)
 *   <dir>/etcd/       etcd's data directory
 *   <dir>/logs/<name>.log, <dir>/pids/<name>.pid
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';

/** Absolute paths of everything the sandbox keeps in its directory. */
export interface SandboxPaths {
  readonly dir: string;
  readonly certsDir: string;
  readonly logsDir: string;
  readonly pidsDir: string;
  readonly etcdDataDir: string;
  readonly kubeconfig: string;
  readonly pebbleConfig: string;
  /** Contour's configuration file (`contour serve --config-path`). */
  readonly contourConfig: string;
  readonly envFile: string;
  readonly stateFile: string;
  /** A certificate or key file under certs/. */
  cert(fileName: string): string;
  /** The log file of a process. */
  log(name: string): string;
  /** The pid file of a process. */
  pid(name: string): string;
}

/**
 * The sandbox directory: `PORTICO_SANDBOX_DIR` if set, else `.sandbox`, resolved against `cwd`.
 *
 * @param env the environment to read (normally `process.env`)
 * @param cwd the directory relative paths are resolved against
 */
export function defaultSandboxDir(env: NodeJS.ProcessEnv, cwd: string): string {
  const fromEnv = env['PORTICO_SANDBOX_DIR'];
  return path.resolve(cwd, fromEnv === undefined || fromEnv === '' ? '.sandbox' : fromEnv);
}

/** The paths of the sandbox in `dir` (resolved against the working directory if relative). */
export function sandboxPaths(dir: string): SandboxPaths {
  const root = path.resolve(dir);
  const certsDir = path.join(root, 'certs');
  const logsDir = path.join(root, 'logs');
  const pidsDir = path.join(root, 'pids');
  return {
    dir: root,
    certsDir,
    logsDir,
    pidsDir,
    etcdDataDir: path.join(root, 'etcd'),
    kubeconfig: path.join(root, 'kubeconfig'),
    pebbleConfig: path.join(root, 'pebble.json'),
    contourConfig: path.join(root, 'contour.yaml'),
    envFile: path.join(root, 'env'),
    stateFile: path.join(root, 'state.json'),
    cert: (fileName) => path.join(certsDir, fileName),
    log: (name) => path.join(logsDir, `${name}.log`),
    pid: (name) => path.join(pidsDir, `${name}.pid`),
  };
}

/** Creates the sandbox directory and its certs/, logs/ and pids/ subdirectories. */
export async function ensureSandboxDirs(paths: SandboxPaths): Promise<void> {
  await mkdir(paths.dir, { recursive: true });
  await Promise.all([
    mkdir(paths.certsDir, { recursive: true, mode: 0o700 }),
    mkdir(paths.logsDir, { recursive: true }),
    mkdir(paths.pidsDir, { recursive: true }),
  ]);
}
