/**
 * `portico sandbox up|down|status`: the local stack of real parts (README.md, "Quick start" and
 * "Tests": kube-apiserver + etcd, Pebble, pebble-challtestsrv, Redis, Contour, the operator and the
 * rate-limit service). The sandbox directory is `.sandbox/` in the working directory, or
 * `PORTICO_SANDBOX_DIR`.
 *
 * Exit codes: 0 success (for `status`: everything up), 1 failure (for `status`: something down),
 * 2 usage error.
 */
import path from 'node:path';

import { parseArgs } from 'node:util';

import { SANDBOX_DATA_PLANES, type SandboxDataPlane } from './data-plane.js';
import { SandboxError } from './errors.js';
import { defaultSandboxDir } from './paths.js';
import { sandboxDown, sandboxStatus, sandboxUp } from './stack.js';
import { envVariables, type SandboxEnv } from './state.js';

const usage = `usage: portico sandbox <up|down|status> [flags]

  up [--no-examples] [--data-plane contour|envoy-gateway|traefik|none] [--https-redirect] [--kubelet]
                       start the stack (or see that it runs) and apply examples/; writes .sandbox/env.
                       --data-plane: the controller that takes the routes (default contour, a real
                       Contour whose acknowledgement Routed waits for; envoy-gateway: a real Envoy
                       Gateway, Portico in Gateway API mode; traefik: a real Traefik serving
                       HTTPS on INGRESS_HTTPS_ADDR in front of the example project's backend;
                       none: routes are unconfirmed)
                       --https-redirect: with --data-plane traefik, every plain HTTP request on
                       INGRESS_HTTP_ADDR answers with a redirect to HTTPS (Traefik's entrypoint
                       redirect: 301 to GET, 308 to other methods), as a platform that sends HTTP to
                       HTTPS runs it; the CA's HTTP-01 request follows it
                       --kubelet: also a node that runs Pods (containerd, a kubelet, kube-scheduler,
                       kube-controller-manager), for \`helm install\` of the chart; root only, one
                       per machine; it changes no kernel setting or firewall rule
  status               print each component; exit 0 when everything is up
  down                 stop every process the sandbox started (logs stay in .sandbox/logs/)

The sandbox directory is .sandbox/ in the working directory; PORTICO_SANDBOX_DIR overrides it.
With PORTICO_SANDBOX_USE_KUBECONFIG=1, the cluster of KUBECONFIG is used instead of a local one.
`;

const out = (line = ''): void => {
  process.stdout.write(`${line}\n`);
};

function printEnv(env: SandboxEnv): void {
  out(`  source ${path.join(env.sandboxDir, 'env')}`);
  for (const [name, value] of envVariables(env)) out(`  ${name}=${value}`);
}

async function up(dir: string, args: string[]): Promise<number> {
  let values: {
    'no-examples'?: boolean;
    'data-plane'?: string;
    'https-redirect'?: boolean;
    kubelet?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        'no-examples': { type: 'boolean' },
        'data-plane': { type: 'string' },
        'https-redirect': { type: 'boolean' },
        kubelet: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err: unknown) {
    process.stderr.write(`portico sandbox up: ${(err as Error).message}\n\n${usage}`);
    return 2;
  }
  const dataPlane = values['data-plane'] ?? 'contour';
  if (!(SANDBOX_DATA_PLANES as readonly string[]).includes(dataPlane)) {
    process.stderr.write(
      `portico sandbox up: --data-plane must be one of ${SANDBOX_DATA_PLANES.join(', ')}, not "${dataPlane}"\n\n${usage}`,
    );
    return 2;
  }
  const httpsRedirect = values['https-redirect'] === true;
  if (httpsRedirect && dataPlane !== 'traefik') {
    process.stderr.write(
      `portico sandbox up: --https-redirect needs --data-plane traefik (the only data plane here that serves HTTP itself), not "${dataPlane}"\n\n${usage}`,
    );
    return 2;
  }
  const started = Date.now();
  const env = await sandboxUp({
    dir,
    applyExamples: values['no-examples'] !== true,
    dataPlane: dataPlane as SandboxDataPlane,
    kubelet: values.kubelet === true,
    ...(httpsRedirect ? { httpsRedirect } : {}),
  });
  out(`sandbox ${env.sandboxDir}: up (this command took ${((Date.now() - started) / 1000).toFixed(1)} s)`);
  printEnv(env);
  return 0;
}

async function status(dir: string): Promise<number> {
  const result = await sandboxStatus(dir);
  if (result.env === undefined) {
    out(`sandbox ${result.dir}: down (${result.problem ?? 'no state'})`);
    return 1;
  }
  out(`sandbox ${result.dir}: ${result.up ? 'up' : 'DOWN'}`);
  const width = Math.max(...result.components.map((c) => c.name.length));
  for (const c of result.components) {
    const pid = c.pid === undefined ? '' : ` pid ${c.pid}`;
    const log = c.ok || c.logPath === undefined ? '' : ` (log: ${c.logPath})`;
    out(`  ${c.name.padEnd(width)}  ${c.ok ? 'ok  ' : 'DOWN'}${pid}  ${c.detail}${log}`);
  }
  if (result.up) printEnv(result.env);
  return result.up ? 0 : 1;
}

async function down(dir: string): Promise<number> {
  const stopped = await sandboxDown(dir);
  if (stopped.length === 0) out(`sandbox ${dir}: nothing to stop`);
  for (const s of stopped) out(`  ${s.name}: ${s.outcome}`);
  out(`sandbox ${dir}: down (logs kept in ${path.join(dir, 'logs')})`);
  return 0;
}

/**
 * Runs `portico sandbox <args>`.
 *
 * @returns the exit code
 */
export async function runSandbox(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  const dir = defaultSandboxDir(process.env, process.cwd());
  try {
    switch (command) {
      case 'up':
        return await up(dir, rest);
      case 'status':
        return await status(dir);
      case 'down':
        return await down(dir);
      case '-h':
      case '--help':
      case 'help':
        process.stdout.write(usage);
        return 0;
      default:
        process.stderr.write(
          `${command === undefined ? '' : `portico sandbox: unknown command "${command}"\n\n`}${usage}`,
        );
        return 2;
    }
  } catch (err: unknown) {
    if (!(err instanceof SandboxError)) throw err;
    process.stderr.write(`portico sandbox ${command ?? ''}: ${err.name}: ${err.message}\n`);
    return 1;
  }
}
