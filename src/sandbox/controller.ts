/**
 * The operator itself, `portico controller`, run from the repository's build (`dist/`) with the
 * Node binary running the sandbox.
 */
import { access } from 'node:fs/promises';
import path from 'node:path';

import { DATA_PLANE_MODULES } from '../data-planes/registry.js';
import type { DataPlane } from '../routing/data-planes.js';
import { ComponentStartError } from './errors.js';
import type { SandboxPaths } from './paths.js';
import { CHART_MALLOC_ENV, startDetached, type StartedProcess } from './processes.js';
import { httpProbe, waitUntilReady } from './readiness.js';

export const CONTROLLER = 'portico-controller';

/** The operator's configuration in the sandbox. */
export interface ControllerOptions {
  readonly kubeconfig: string;
  readonly platformCnameTarget: string;
  /** `127.0.0.1:<port>` of the sandbox's DNS server. */
  readonly dnsServer: string;
  readonly acmeDirectoryUrl: string;
  readonly acmeEmail: string;
  /** PEM bundle that makes Pebble's HTTPS endpoints trusted (passed as NODE_EXTRA_CA_CERTS). */
  readonly acmeCaBundle: string;
  /** Port of the HTTP-01 challenge server (and of its self-check). */
  readonly http01Port: number;
  /** Port of `/metrics`, `/healthz`, `/readyz`. */
  readonly metricsPort: number;
  /** Namespace of the operator's own objects (leader-election lease, ACME account key). */
  readonly namespace: string;
  /**
   * Wait for the data plane to take each route (true when the sandbox runs Contour); false where
   * nothing takes them, and Routed and Ready then say the route is unconfirmed.
   */
  readonly dataPlaneAcknowledgement: boolean;
  /**
   * `--data-plane`: the data plane that takes the routes, so that a flavor it ignores is
   * `Routed=False` (src/routing/data-planes.ts); undefined: not declared.
   */
  readonly dataPlane?: DataPlane;
  /** The data plane's name in the Routed messages (`--data-plane-name`), e.g. `Contour`. */
  readonly dataPlaneName?: string;
  /**
   * The data planes whose RateLimitPolicy attachment is on (each module's `--<name>-attachment`,
   * e.g. `--contour-attachment` where Contour runs, `--envoy-gateway-attachment` where Envoy Gateway
   * runs); every other data plane's flag is passed as false.
   */
  readonly rateLimitAttachments: readonly DataPlane[];
  /**
   * Gateway API mode (`--routing-mode gateway`): the HTTPRoutes' parent Gateway, `namespace/name`
   * (`--gateway-parent-refs`); undefined routes with Ingress.
   */
  readonly gatewayParentRefs?: string;
  /**
   * `--ingress-flavor` (ingress mode): `contour` where Contour runs as the chart does, `traefik` where
   * Traefik runs; undefined: the default (`nginx`).
   */
  readonly ingressFlavor?: string;
  /**
   * `--ingress-class`: the class of every Ingress and HTTPProxy it writes, a class of Portico's own
   * (docs/routing.md, "A routing class of Portico's own"); undefined leaves the cluster default.
   */
  readonly ingressClass?: string | undefined;
  /**
   * `--serving-check-address`: the data plane's HTTPS `host:port`, where one serves (Traefik's
   * `websecure` entrypoint); Ready then names what the check saw. Undefined: no serving check, and
   * Ready names the acknowledgement it rests on (docs/routing.md, "Serving check").
   */
  readonly servingCheckAddress?: string | undefined;
  /**
   * The apps domain (`--apps-domain`) and the RFC 2136 server and TSIG key of its zone
   * (src/sandbox/apps-zone.ts); undefined: no auto-generated subdomains.
   */
  readonly appsDomain?: {
    readonly domain: string;
    /** `host:port` of Knot. */
    readonly server: string;
    readonly keyName: string;
    /** base64. */
    readonly secret: string;
  };
}

/** `portico controller`'s flags. */
/** The sandbox operator's ACME order budget per window (docs/customdomains.md, "The CA's budget"). */
const SANDBOX_ORDERS_PER_WINDOW = '100000';

/** The chart's default controller.heapMiB. */
const SANDBOX_HEAP_MIB = '256';

/** The chart's default controller.memoryTargetMiB. */
const SANDBOX_MEMORY_TARGET_MIB = '240';

export function controllerArgs(options: ControllerOptions): string[] {
  const apps = options.appsDomain;
  return [
    '--kubeconfig',
    options.kubeconfig,
    '--platform-cname-target',
    options.platformCnameTarget,
    '--dns-server',
    options.dnsServer,
    '--acme-directory-url',
    options.acmeDirectoryUrl,
    '--acme-email',
    options.acmeEmail,
    '--http01-listen-address',
    `127.0.0.1:${options.http01Port}`,
    '--http01-self-check-port',
    String(options.http01Port),
    '--metrics-listen-address',
    `127.0.0.1:${options.metricsPort}`,
    '--namespace',
    options.namespace,
    // With Contour in the sandbox, Routed waits for Contour's acknowledgement (docs/routing.md,
    // "Data-plane acknowledgement"); with `--data-plane none` nothing takes the routes, and Routed
    // and Ready say the route is written but unconfirmed.
    '--data-plane-acknowledgement',
    String(options.dataPlaneAcknowledgement),
    ...(options.dataPlane === undefined ? [] : ['--data-plane', options.dataPlane]),
    ...(options.dataPlaneName === undefined ? [] : ['--data-plane-name', options.dataPlaneName]),
    // RateLimitPolicy targetRefs into the data plane that runs (Contour's HTTPProxies and the
    // ExtensionService, docs/ratelimits.md, "Attaching to Contour"; an EnvoyPatchPolicy per Gateway,
    // docs/routing.md, "Envoy Gateway"): every data plane's flag, on only for those named.
    ...DATA_PLANE_MODULES.flatMap((m) =>
      m.rateLimitAttachment === undefined
        ? []
        : [m.rateLimitAttachment.flag, String(options.rateLimitAttachments.includes(m.name))],
    ),
    // With Envoy Gateway in the sandbox: an HTTPRoute and a ListenerSet per domain on its Gateway
    // (docs/routing.md, "Envoy Gateway").
    ...(options.gatewayParentRefs === undefined
      ? []
      : ['--routing-mode', 'gateway', '--gateway-parent-refs', options.gatewayParentRefs]),
    // With Traefik in the sandbox: Ingresses of its class, redirects as Traefik Middlewares
    // (docs/routing.md, "Traefik").
    ...(options.ingressFlavor === undefined ? [] : ['--ingress-flavor', options.ingressFlavor]),
    ...(options.ingressClass === undefined ? [] : ['--ingress-class', options.ingressClass]),
    // Where a data plane really serves (Traefik), the serving check requests each domain from it.
    ...(options.servingCheckAddress === undefined
      ? []
      : ['--serving-check-address', options.servingCheckAddress]),
    // The auto-generated subdomains (src/sandbox/apps-zone.ts); the TSIG secret goes in the
    // environment, as the chart passes it.
    ...(apps === undefined
      ? []
      : ['--apps-domain', apps.domain, '--dns01-server', apps.server, '--dns01-tsig-key-name', apps.keyName]),
  ];
}

/** The whitespace-separated words of an environment variable's value; none when it is unset. */
function wordsOf(value: string | undefined): string[] {
  return (value ?? '').split(/\s+/).filter((word) => word !== '');
}

async function assertBuilt(repoRoot: string): Promise<string> {
  const cli = path.join(repoRoot, 'dist', 'cli.js');
  for (const file of [cli, path.join(repoRoot, 'dist', 'controller', 'main.js')]) {
    try {
      await access(file);
    } catch {
      throw new ComponentStartError(CONTROLLER, `${file} does not exist: build first (npm run build)`);
    }
  }
  return cli;
}

/**
 * Starts `node <repo>/dist/cli.js controller ...` and waits until its `/readyz` answers 200.
 *
 * @param repoRoot the repository whose `dist/` is run
 * @returns the process and the `/metrics` URL
 * @throws ComponentStartError when the build is missing, or the operator exits or is not ready
 *   within 60 s
 */
export async function startController(
  paths: SandboxPaths,
  repoRoot: string,
  options: ControllerOptions,
): Promise<{ process: StartedProcess; metricsUrl: string; readyzUrl: string }> {
  const cli = await assertBuilt(repoRoot);
  // PORTICO_SANDBOX_NODE_WRAPPER runs Node under another program, e.g. a script that runs `exec
  // heaptrack -o /tmp/ht/operator.$$ "$@"` (native allocations from the start, one file per
  // process; attaching later can kill the process; docs/benchmarks.md). The pid the sandbox
  // records is then the wrapper's: its process group still holds Node, so stopping works, but RSS
  // read from that pid is the wrapper's, not the operator's.
  const [wrapper, ...wrapperArgs] = wordsOf(process.env.PORTICO_SANDBOX_NODE_WRAPPER);
  const proc = await startDetached(paths, {
    name: CONTROLLER,
    command: wrapper ?? process.execPath,
    // The V8 heap bounds the chart sets (controller.heapMiB), so the sandbox and its benchmarks
    // run the operator as a cluster does; PORTICO_SANDBOX_HEAP_MIB overrides the limit.
    // PORTICO_SANDBOX_NODE_ARGS adds Node options NODE_OPTIONS refuses, e.g. `--cpu-prof
    // --cpu-prof-dir=/tmp/profiles` (a CPU profile of each operator process, written as it exits).
    args: [
      ...(wrapper === undefined ? [] : [...wrapperArgs, process.execPath]),
      `--max-old-space-size=${process.env.PORTICO_SANDBOX_HEAP_MIB ?? SANDBOX_HEAP_MIB}`,
      '--max-semi-space-size=4',
      ...wordsOf(process.env.PORTICO_SANDBOX_NODE_ARGS),
      cli,
      'controller',
      ...controllerArgs(options),
    ],
    env: {
      NODE_EXTRA_CA_CERTS: options.acmeCaBundle,
      // As the chart runs it (charts/portico/templates/controller-deployment.yaml); a variable of
      // the caller's environment wins.
      ...Object.fromEntries(
        Object.entries(CHART_MALLOC_ENV).map(([name, value]) => [name, process.env[name] ?? value]),
      ),
      PORTICO_MEMORY_TARGET_MIB: process.env.PORTICO_MEMORY_TARGET_MIB ?? SANDBOX_MEMORY_TARGET_MIB,
      // The sandbox's and the tests' hostnames are under .example and .test (RFC 6761), which a
      // platform never lets customers claim (domain/claimable.ts).
      PORTICO_ALLOW_SPECIAL_USE_HOSTNAMES: 'true',
      ...(options.appsDomain === undefined ? {} : { PORTICO_DNS01_TSIG_SECRET: options.appsDomain.secret }),
      // Pebble has no order limit, and a benchmark or a long test run places more orders than
      // Let's Encrypt's 300 per 3 hours: the sandbox's budget is wide unless the caller sets one.
      PORTICO_ACME_ORDERS_PER_WINDOW: process.env.PORTICO_ACME_ORDERS_PER_WINDOW ?? SANDBOX_ORDERS_PER_WINDOW,
    },
  });
  const base = `http://127.0.0.1:${options.metricsPort}`;
  await waitUntilReady(proc, httpProbe(`${base}/readyz`), { timeoutMs: 60_000, intervalMs: 250 });
  return { process: proc, metricsUrl: `${base}/metrics`, readyzUrl: `${base}/readyz` };
}
