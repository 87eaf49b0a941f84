/**
 * The `contour` flavor (issue 28, item 2) against the REAL Contour of the e2e stack: an operator of
 * this file's own runs with `--ingress-flavor contour` and the data-plane acknowledgement on; every
 * assertion about the data plane reads what Contour wrote (the HTTPProxy's status) or what it would
 * push to Envoy (`contour cli rds` against its xDS server). The test writes no status.
 *
 * The stack's Contour runs with `enableExternalNameService: true` (src/sandbox/contour.ts), so the
 * challenge route to the ExternalName Service `portico-acme-http01` is valid. Pebble validates
 * HTTP-01 on the operator's own port (no Envoy runs here), so issuance does not go through Contour.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIELD_MANAGER, type CustomDomain } from '../../src/api/customdomain.js';
import type { HTTPProxy } from '../../src/routing/contour.js';
import type { HTTPProxyWithStatus } from '../../src/routing/acknowledgement.js';
import {
  createCustomDomain,
  createProject,
  deleteCustomDomain,
  dns,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const CONTOUR_API = { group: 'projectcontour.io', version: 'v1', plural: 'httpproxies' } as const;
const HTTP01_SERVICE = 'portico-controller.portico-system.svc.cluster.local:8089';

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'contour-httpproxy', {
    '--ingress-flavor': 'contour',
    '--data-plane-acknowledgement': 'true',
    '--http01-service': HTTP01_SERVICE,
  });
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

function condition(cd: CustomDomain, type: string): { status?: string; reason?: string; message?: string } {
  return cd.status?.conditions?.find((c) => c.type === type) ?? {};
}

async function readProxy(namespace: string, name: string): Promise<HTTPProxy & HTTPProxyWithStatus> {
  return (await kube().custom.getNamespacedCustomObject({ ...CONTOUR_API, namespace, name })) as HTTPProxy &
    HTTPProxyWithStatus;
}

async function proxyGone(namespace: string, name: string): Promise<boolean> {
  try {
    await readProxy(namespace, name);
    return false;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return true;
    throw err;
  }
}

/** A project with DNS pointing at the platform; its Service `web` has port `http` (80). */
async function project(prefix: string): Promise<string> {
  const ns = unique(prefix);
  await createProject(ns);
  return ns;
}

async function servingDomain(ns: string, name: string, hostname: string): Promise<void> {
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  // By port name: an HTTPProxy port is a number, looked up in the Service.
  await createCustomDomain(ns, name, { hostname, service: { name: 'web', port: 'http' } });
}

// ---- Contour's xDS, as `contour cli rds` prints it ----

interface RedirectAction {
  host_redirect?: string;
  scheme_redirect?: string;
  https_redirect?: boolean;
  /** The enum's name; absent for MOVED_PERMANENTLY (301), proto3's zero value. */
  response_code?: string;
  strip_query?: boolean;
  path_redirect?: string;
  prefix_rewrite?: string;
}
interface XdsRoute {
  match?: { prefix?: string; path?: string; safe_regex?: { regex?: string } };
  route?: { cluster?: string };
  redirect?: RedirectAction;
}
interface XdsVirtualHost {
  name: string;
  domains: string[];
  routes?: XdsRoute[];
}
interface RouteConfiguration {
  name: string;
  virtual_hosts?: XdsVirtualHost[];
}

/** The contour binary of the stack's tools. */
function contourBinary(): string {
  const binary = (sandbox as { contourBinary?: string }).contourBinary;
  if (!binary) throw new Error('the e2e stack names no contour binary');
  return binary;
}

function contourXdsAddr(): string {
  const addr = (sandbox as { contourXdsAddr?: string }).contourXdsAddr;
  if (!addr) throw new Error('the e2e stack runs no Contour (no xDS address in its state)');
  return addr;
}

/** Splits `text` into its complete top-level JSON objects (the CLI prints them one after another). */
function jsonObjects(text: string): unknown[] {
  const found: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{') {
      if (depth === 0) start = i;
      depth++;
    } else if (ch === '}') {
      depth--;
      if (depth === 0 && start >= 0) found.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return found;
}

/**
 * The route configurations Contour serves now: `contour cli rds --contour <xds>` sends one
 * DiscoveryRequest and prints each DiscoveryResponse as JSON (cmd/contour/cli.go `watchstream`,
 * proto field names); the first response is read, then the CLI (which watches forever) is stopped.
 */
async function routeConfigurations(): Promise<RouteConfiguration[]> {
  const child = spawn(contourBinary(), ['cli', 'rds', '--contour', contourXdsAddr()], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  try {
    return await new Promise<RouteConfiguration[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`contour cli rds gave no response within 10 s; stderr: ${err}`));
      }, 10_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const response = jsonObjects(out).find(
          (o): o is { resources?: RouteConfiguration[] } =>
            typeof o === 'object' && o !== null && 'resources' in o && 'nonce' in o,
        );
        if (response) {
          clearTimeout(timer);
          resolve(response.resources ?? []);
        }
      });
      child.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`contour cli rds exited (${code}) before a response; stderr: ${err}`));
      });
    });
  } finally {
    child.kill('SIGTERM');
  }
}

/** Every virtual host of `hostname`, by the route configuration it is in. */
function virtualHostsOf(configs: RouteConfiguration[], hostname: string): [string, XdsVirtualHost][] {
  return configs.flatMap((config) =>
    (config.virtual_hosts ?? [])
      .filter((vh) => vh.domains.includes(hostname) || vh.name === hostname)
      .map((vh): [string, XdsVirtualHost] => [config.name, vh]),
  );
}

function routeFor(vh: XdsVirtualHost | undefined, prefix: string): XdsRoute | undefined {
  return vh?.routes?.find((r) => r.match?.prefix === prefix);
}

describe('--ingress-flavor contour, with a real Contour', () => {
  it('writes an HTTPProxy that Contour takes: Routed from its Valid condition, TLS once the Secret exists, Ready', async () => {
    const ns = await project('hp-serve');
    const hostname = `www.${ns}.example`;
    await servingDomain(ns, 'www', hostname);
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
    expect(condition(live, 'Routed')).toMatchObject({ status: 'True', reason: 'RoutesReady' });
    expect(condition(live, 'Routed').message).toContain(
      `HTTPProxy portico-www (Contour) routes ${hostname} to Service web:80. TLS from Secret www-tls.`,
    );
    expect(condition(live, 'Routed').message).toContain(
      'Contour took HTTPProxy portico-www (currentStatus valid).',
    );

    // What Contour wrote on the HTTPProxy Portico wrote.
    const proxy = await readProxy(ns, 'portico-www');
    expect(proxy.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'portico',
      'portico.dev/customdomain': 'www',
    });
    expect(proxy.spec.virtualhost).toEqual({ fqdn: hostname, tls: { secretName: 'www-tls' } });
    expect(proxy.spec.routes.at(-1)?.services).toEqual([{ name: 'web', port: 80 }]);
    expect(proxy.status?.currentStatus).toBe('valid');
    const valid = proxy.status?.conditions?.find((c) => c.type === 'Valid');
    expect(valid).toMatchObject({ status: 'True', observedGeneration: proxy.metadata.generation });

    // What Contour would push to Envoy: the HTTPS virtual host, and the challenge route on port 80.
    const hosts = virtualHostsOf(await routeConfigurations(), hostname);
    const https = hosts.find(([config]) => config === `https/${hostname}`)?.[1];
    expect(routeFor(https, '/')?.route?.cluster).toContain('web');
    const insecure = hosts.find(([config]) => config === 'ingress_http')?.[1];
    expect(routeFor(insecure, '/.well-known/acme-challenge/')?.route?.cluster).toContain(
      'portico-acme-http01',
    );
    // `/` on port 80 is Contour's upgrade to HTTPS (no permitInsecure on the serving route).
    expect(routeFor(insecure, '/')?.redirect).toEqual({ https_redirect: true });
  });

  it("is Routed=False with Contour's reason and message when another HTTPProxy takes the fqdn, and never touches that one", async () => {
    const ns = await project('hp-dup');
    const hostname = `www.${ns}.example`;
    await servingDomain(ns, 'www', hostname);
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);

    // Someone else's HTTPProxy (no Portico labels) for the same hostname.
    const theirs = {
      apiVersion: 'projectcontour.io/v1',
      kind: 'HTTPProxy',
      metadata: { name: 'theirs', namespace: ns, labels: { team: 'platform' } },
      spec: { virtualhost: { fqdn: hostname }, routes: [{ services: [{ name: 'web', port: 80 }] }] },
    };
    await kube().custom.createNamespacedCustomObject({ ...CONTOUR_API, namespace: ns, body: theirs });
    const asCreated = await readProxy(ns, 'theirs');
    const refused = await waitForCondition(ns, 'www', 'Routed', 'False', 'DuplicateVhost', 60_000);
    expect(condition(refused, 'Routed').message).toBe(
      `Contour marks HTTPProxy portico-www invalid: VirtualHostError (DuplicateVhost): fqdn "${hostname}" is used in multiple HTTPProxies: ${ns}/portico-www, ${ns}/theirs.`,
    );
    expect(condition(refused, 'Ready')).toMatchObject({ status: 'False', reason: 'DuplicateVhost' });
    const mine = await readProxy(ns, 'portico-www');
    expect(mine.status?.currentStatus).toBe('invalid');

    // Portico never wrote to the foreign object: its spec and labels are the test's, and no field of
    // it is managed by Portico's field manager.
    const after = await readProxy(ns, 'theirs');
    expect(after.spec).toEqual(asCreated.spec);
    expect(after.spec.virtualhost).toEqual({ fqdn: hostname });
    expect(after.metadata.labels).toEqual({ team: 'platform' });
    expect((after.metadata.managedFields ?? []).map((f) => f.manager)).not.toContain(FIELD_MANAGER);
    expect(after.status?.currentStatus).toBe('invalid');

    await kube().custom.deleteNamespacedCustomObject({ ...CONTOUR_API, namespace: ns, name: 'theirs' });
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 60_000);
  });

  it("says NameInUse for an HTTPProxy at its name that is not Portico's, and neither overwrites nor deletes it", async () => {
    const ns = await project('hp-name');
    const hostname = `www.${ns}.example`;
    const foreign = {
      apiVersion: 'projectcontour.io/v1',
      kind: 'HTTPProxy',
      metadata: { name: 'portico-www', namespace: ns },
      spec: {
        virtualhost: { fqdn: `other.${ns}.example` },
        routes: [{ services: [{ name: 'web', port: 80 }] }],
      },
    };
    await kube().custom.createNamespacedCustomObject({ ...CONTOUR_API, namespace: ns, body: foreign });
    const asCreated = await readProxy(ns, 'portico-www');
    await servingDomain(ns, 'www', hostname);
    const inUse = await waitForCondition(ns, 'www', 'Routed', 'False', 'NameInUse', 60_000);
    expect(condition(inUse, 'Routed').message).toContain(
      "HTTPProxy portico-www exists and is not Portico's (no app.kubernetes.io/managed-by=portico label)",
    );
    const kept = await readProxy(ns, 'portico-www');
    expect(kept.spec).toEqual(asCreated.spec);
    expect(kept.metadata.labels).toBeUndefined();
    expect((kept.metadata.managedFields ?? []).map((f) => f.manager)).not.toContain(FIELD_MANAGER);

    // Removal (the finalizer deletes routing first) leaves the foreign object alone.
    await deleteCustomDomain(ns, 'www');
    await waitFor('CustomDomain www to be gone', async () => {
      try {
        await getCustomDomain(ns, 'www');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
    const survived = await readProxy(ns, 'portico-www');
    expect(survived.metadata.uid).toBe(asCreated.metadata.uid);
    expect(survived.spec).toEqual(asCreated.spec);
  });

  it('redirects with the status and host Contour gives Envoy, and removal leaves nothing for the hostname in its xDS', async () => {
    const ns = await project('hp-redir');
    const target = `www.${ns}.example`;
    const old = `old.${ns}.example`;
    await servingDomain(ns, 'www', target);
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
    await dns.setCname(old, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'old', { hostname: old, redirect: { to: target, statusCode: 308 } });
    const live = await waitForCondition(ns, 'old', 'Ready', 'True', 'Live', 120_000);
    expect(condition(live, 'Routed').message).toContain(
      `HTTPProxy portico-old (Contour) answers ${old} with 308 Permanent Redirect to https://${target}, keeping path and query.`,
    );
    expect(condition(live, 'Routed').message).not.toContain('Note:');

    // Envoy's RedirectAction as Contour builds it, on HTTPS and (permitInsecure) on plain HTTP: the
    // target host, https, 308, and no path rewrite or strip_query (path and query kept).
    const hosts = virtualHostsOf(await routeConfigurations(), old);
    expect(hosts.map(([config]) => config).sort()).toEqual([`https/${old}`, 'ingress_http']);
    for (const [config, vh] of hosts) {
      expect(routeFor(vh, '/')?.redirect, config).toEqual({
        host_redirect: target,
        scheme_redirect: 'https',
        response_code: 'PERMANENT_REDIRECT',
      });
      expect(routeFor(vh, '/.well-known/acme-challenge/')?.route?.cluster, config).toContain(
        'portico-acme-http01',
      );
    }

    // Removal: the HTTPProxy goes first, and Contour stops serving the hostname.
    await deleteCustomDomain(ns, 'old');
    await waitFor('HTTPProxy portico-old to be deleted', async () =>
      (await proxyGone(ns, 'portico-old')) ? true : undefined,
    );
    const left = await waitFor(
      `no virtual host for ${old} in Contour's RDS`,
      async () => {
        const configs = await routeConfigurations();
        return virtualHostsOf(configs, old).length === 0 ? configs : undefined;
      },
      30_000,
    );
    expect(virtualHostsOf(left, target).length).toBeGreaterThan(0);
  });
});
