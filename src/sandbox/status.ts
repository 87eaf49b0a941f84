/**
 * `sandboxStatus`: is each process of a sandbox running, and does it answer?
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

import { SANDBOX_DATA_PLANE_MODULES } from '../data-planes/sandbox-registry.js';
import { CONTROLLER } from './controller.js';
import { DNS_SERVER, dnsProbe } from './dns-server.js';
import { SandboxNotFoundError } from './errors.js';
import { ETCD } from './etcd.js';
import { apiServerReadyProbe, KUBE_APISERVER } from './kube-apiserver.js';
import { hasNode, nodeStatusChecks } from './kubelet.js';
import { sandboxPaths, type SandboxPaths } from './paths.js';
import { PEBBLE } from './pebble.js';
import { RATELIMIT_SERVER } from './ratelimit-server.js';
import { REDIS, redisPingProbe } from './redis.js';
import { isOurs, readPid } from './processes.js';
import { httpProbe } from './readiness.js';
import { readState, type SandboxEnv } from './state.js';

/** One component's state. */
export interface ComponentStatus {
  readonly name: string;
  /** The pid from its pid file; absent for the user's cluster and when there is no pid file. */
  readonly pid?: number;
  readonly ok: boolean;
  /** "ready", or what is wrong. */
  readonly detail: string;
  readonly logPath?: string;
}

/** The state of a sandbox directory. */
export interface SandboxStatus {
  /** The sandbox directory (absolute). */
  readonly dir: string;
  /** True when every component runs and answers. */
  readonly up: boolean;
  readonly components: readonly ComponentStatus[];
  /** Present when the directory holds a sandbox (`state.json`). */
  readonly env?: SandboxEnv;
  /** Why nothing could be checked, when `env` is absent. */
  readonly problem?: string;
}

interface Check {
  readonly name: string;
  /** False for the user's own cluster: the sandbox started no process for it. */
  readonly hasProcess: boolean;
  readonly probe: () => Promise<true | string>;
}

async function caBundleProbe(env: SandboxEnv): Promise<() => Promise<true | string>> {
  let ca: Buffer;
  try {
    ca = await readFile(env.acmeCaBundle);
  } catch {
    return () => Promise.resolve(`cannot read ${env.acmeCaBundle}`);
  }
  return httpProbe(env.acmeDirectoryUrl, { ca });
}

async function checksFor(env: SandboxEnv): Promise<Check[]> {
  const checks: Check[] = [];
  if (!env.externalCluster && env.etcdUrl !== undefined) {
    checks.push({ name: ETCD, hasProcess: true, probe: httpProbe(`${env.etcdUrl}/health`) });
  }
  checks.push(
    {
      name: env.externalCluster ? 'cluster' : KUBE_APISERVER,
      hasProcess: !env.externalCluster,
      probe: apiServerReadyProbe(env.kubeconfig),
    },
    {
      name: DNS_SERVER,
      hasProcess: true,
      probe: dnsProbe(env.dnsServer, env.platformCnameTarget, '127.0.0.1'),
    },
    { name: PEBBLE, hasProcess: true, probe: await caBundleProbe(env) },
    { name: CONTROLLER, hasProcess: true, probe: httpProbe(env.controllerReadyzUrl) },
    { name: REDIS, hasProcess: true, probe: redisPingProbe(new URL(env.redisUrl).host) },
    { name: RATELIMIT_SERVER, hasProcess: true, probe: httpProbe(env.ratelimitReadyzUrl) },
  );
  // Each data plane checks what it started (src/data-planes/<name>/sandbox.ts), from `<dir>/env`.
  for (const plane of SANDBOX_DATA_PLANE_MODULES) checks.push(...plane.checks(env));
  return checks;
}

async function runCheck(paths: SandboxPaths, check: Check): Promise<ComponentStatus> {
  const base = { name: check.name, ...(check.hasProcess ? { logPath: paths.log(check.name) } : {}) };
  let pid: number | undefined;
  if (check.hasProcess) {
    pid = await readPid(paths, check.name);
    if (pid === undefined) return { ...base, ok: false, detail: 'not running (no pid file)' };
    if (!(await isOurs(pid, paths.dir)))
      return { ...base, pid, ok: false, detail: `not running (pid ${pid})` };
  }
  const result = await check.probe();
  const withPid = pid === undefined ? base : { ...base, pid };
  return result === true
    ? { ...withPid, ok: true, detail: 'ready' }
    : { ...withPid, ok: false, detail: result };
}

/**
 * Checks every component of the sandbox in `dir`: its process runs (pid file, pid alive and started
 * by this sandbox) and it answers its readiness probe.
 *
 * @returns `up: false` with `problem` when `dir` holds no sandbox; never throws for a down sandbox
 */
export async function sandboxStatus(dir: string): Promise<SandboxStatus> {
  const paths = sandboxPaths(dir);
  let env: SandboxEnv;
  try {
    env = await readState(paths);
  } catch (err: unknown) {
    if (err instanceof SandboxNotFoundError) {
      return { dir: paths.dir, up: false, components: [], problem: err.message };
    }
    throw err;
  }
  const kubectl = { binary: path.join(env.toolsBinDir, 'kubectl'), kubeconfig: env.kubeconfig };
  const checks = [
    ...(await checksFor(env)),
    ...((await hasNode(paths)) ? nodeStatusChecks(paths, kubectl) : []),
  ];
  const components = await Promise.all(checks.map((check) => runCheck(paths, check)));
  return { dir: paths.dir, up: components.every((c) => c.ok), components, env };
}
