/**
 * What a running sandbox exposes: `<dir>/env` for shells (`source .sandbox/env`) and
 * `<dir>/state.json` for programs (the e2e tests read it through `readSandboxEnv`).
 */
import { readFile, rm, writeFile } from 'node:fs/promises';

import { SandboxNotFoundError } from './errors.js';
import { DATA_PLANE_ENV_VARIABLES, type DataPlaneEnv } from '../data-planes/sandbox-registry.js';
import type { SandboxDataPlane } from './data-plane.js';
import type { SandboxPaths } from './paths.js';

/**
 * The facts about a running sandbox. Paths are absolute; URLs have no trailing slash. The data
 * plane's own facts (e.g. `contourXdsAddr`) are its module's `envFacts` (data-planes/<name>/sandbox.ts).
 */
export type SandboxEnv = StackEnv & DataPlaneEnv;

/** The facts of the stack that every data plane shares. */
export interface StackEnv {
  /** The sandbox directory. */
  readonly sandboxDir: string;
  /** The directory of the tools the sandbox runs (scripts/install-tools.sh's bin directory). */
  readonly toolsBinDir: string;
  /** Admin kubeconfig of the cluster (the sandbox's own, or the user's with an external cluster). */
  readonly kubeconfig: string;
  /** The API server URL of the kubeconfig's current context. */
  readonly apiServerUrl: string;
  /** True when the sandbox uses the user's cluster (`PORTICO_SANDBOX_USE_KUBECONFIG=1`). */
  readonly externalCluster: boolean;
  /** etcd's client URL; absent with an external cluster. */
  readonly etcdUrl?: string;
  /** The CNAME target customers point their domains at; it resolves to 127.0.0.1. */
  readonly platformCnameTarget: string;
  /** `127.0.0.1:<port>` of the DNS server (UDP and TCP). */
  readonly dnsServer: string;
  /** pebble-challtestsrv's management API. */
  readonly dnsMgmtUrl: string;
  /** Pebble's ACME directory. */
  readonly acmeDirectoryUrl: string;
  /** Pebble's management API (`/roots/0` is the issuing root). */
  readonly acmeMgmtUrl: string;
  /** PEM file of the CA that makes Pebble's HTTPS endpoints trusted. */
  readonly acmeCaBundle: string;
  /** The operator's Prometheus endpoint. */
  readonly controllerMetricsUrl: string;
  /** The operator's readiness endpoint. */
  readonly controllerReadyzUrl: string;
  /** The port the operator's HTTP-01 challenge server listens on (127.0.0.1). */
  readonly http01Port: number;
  /** `redis://127.0.0.1:<port>` of the rate-limit counters. */
  readonly redisUrl: string;
  /** `127.0.0.1:<port>` of the rate-limit service's gRPC listener (Envoy's RLS protocol). */
  readonly ratelimitGrpcAddr: string;
  /** The rate-limit service's Prometheus endpoint. */
  readonly ratelimitMetricsUrl: string;
  /** The rate-limit service's readiness endpoint. */
  readonly ratelimitReadyzUrl: string;
  /**
   * The control plane that takes Portico's routes: `contour` (a real Contour; the operator waits
   * for its acknowledgement), `envoy-gateway` (a real Envoy Gateway; the operator in gateway mode
   * waits for it) or `none` (the operator runs with the acknowledgement off).
   */
  readonly dataPlane: SandboxDataPlane;
}

/** The shell variables of `<dir>/env`, in file order. */
export function envVariables(env: SandboxEnv): [string, string][] {
  const facts = new Map<string, unknown>(Object.entries(env));
  return [
    ['SANDBOX_DIR', env.sandboxDir],
    ['KUBECONFIG', env.kubeconfig],
    ['PLATFORM_CNAME_TARGET', env.platformCnameTarget],
    ['DNS_SERVER', env.dnsServer],
    ['DNS_MGMT_URL', env.dnsMgmtUrl],
    ['ACME_DIRECTORY_URL', env.acmeDirectoryUrl],
    ['ACME_MGMT_URL', env.acmeMgmtUrl],
    ['ACME_CA_BUNDLE', env.acmeCaBundle],
    ['CONTROLLER_METRICS_URL', env.controllerMetricsUrl],
    ['HTTP01_PORT', String(env.http01Port)],
    ['REDIS_URL', env.redisUrl],
    ['RATELIMIT_GRPC_ADDR', env.ratelimitGrpcAddr],
    ['RATELIMIT_METRICS_URL', env.ratelimitMetricsUrl],
    ['DATA_PLANE', env.dataPlane],
    ...DATA_PLANE_ENV_VARIABLES.flatMap(([fact, variable]): [string, string][] => {
      const value = facts.get(fact);
      return typeof value === 'string' ? [[variable, value]] : [];
    }),
  ];
}

/** Quotes `value` for a POSIX shell: single quotes, with embedded single quotes escaped. */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** Renders `<dir>/env`: one `export NAME='value'` line per variable. */
export function renderEnvFile(env: SandboxEnv): string {
  const lines = envVariables(env).map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  return `# Written by \`portico sandbox up\`. Use: source ${shellQuote(env.sandboxDir)}/env\n${lines.join('\n')}\n`;
}

/** Writes `<dir>/env` and `<dir>/state.json`. */
export async function writeSandboxEnv(paths: SandboxPaths, env: SandboxEnv): Promise<void> {
  await writeFile(paths.envFile, renderEnvFile(env));
  await writeFile(paths.stateFile, `${JSON.stringify(env, null, 2)}\n`);
}

/** Removes `<dir>/env` and `<dir>/state.json` (they describe a stack that no longer runs). */
export async function removeSandboxEnv(paths: SandboxPaths): Promise<void> {
  await Promise.all([rm(paths.envFile, { force: true }), rm(paths.stateFile, { force: true })]);
}

/**
 * Reads `<dir>/state.json`.
 *
 * @throws SandboxNotFoundError when it is missing or not valid JSON
 */
export async function readState(paths: SandboxPaths): Promise<SandboxEnv> {
  let text: string;
  try {
    text = await readFile(paths.stateFile, 'utf8');
  } catch {
    throw new SandboxNotFoundError(
      `no sandbox in ${paths.dir}: ${paths.stateFile} is missing (run: portico sandbox up)`,
    );
  }
  try {
    return JSON.parse(text) as SandboxEnv;
  } catch (err: unknown) {
    throw new SandboxNotFoundError(
      `${paths.stateFile} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
