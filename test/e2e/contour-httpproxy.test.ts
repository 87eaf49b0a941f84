/**
 * The `contour` flavor (docs/routing.md, "Contour (HTTPProxy)") against the REAL Contour of the e2e
 * stack: an operator of this file's own runs with `--ingress-flavor contour --data-plane contour`
 * and the data-plane acknowledgement on (the last test: the nginx flavor, whose redirects Contour
 * ignores, "Data planes and flavors"); every assertion about the data plane reads what Contour wrote (the
 * HTTPProxy's status) or what it would push to Envoy (`contour cli rds` against its xDS server).
 * The test writes no status.
 *
 * The stack's Contour runs with `enableExternalNameService: true` (src/data-planes/contour/sandbox-process.ts), so the
 * challenge route to the ExternalName Service `portico-acme-http01` is valid. Pebble validates
 * HTTP-01 on the operator's own port (no Envoy runs here), so issuance does not go through Contour.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIELD_MANAGER, type CustomDomain } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  deleteCustomDomain,
  dns,
  domainCondition,
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
import {
  contourXdsAddr,
  matchedPath,
  virtualHostsFor,
  xdsResources,
  type XdsRoute,
  readProxy,
  watchProxy,
} from './support/contour.js';

const CONTOUR_API = { group: 'projectcontour.io', version: 'v1', plural: 'httpproxies' } as const;
const HTTP01_SERVICE = 'portico-controller.portico-system.svc.cluster.local:8089';

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  contourXdsAddr(); // throws unless the stack runs Contour
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'contour-httpproxy', {
    '--ingress-flavor': 'contour',
    '--data-plane': 'contour',
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

/**
 * The virtual hosts of `hostname` in Contour's RDS once there are `count` of them (Contour builds its
 * xDS snapshot a moment after it writes status: its DAG rebuild is held off briefly after a change).
 */
async function xdsHostsOf(
  hostname: string,
  count: number,
): Promise<Awaited<ReturnType<typeof virtualHostsFor>>> {
  return waitFor(`${count} virtual hosts for ${hostname} in Contour's RDS`, async () => {
    const hosts = await virtualHostsFor(hostname);
    if (hosts.length >= count) return hosts;
    const all = await xdsResources('rds');
    throw new Error(
      `RDS has ${hosts.map((h) => h.routeConfig).join(', ') || 'nothing'} for it; all: ${JSON.stringify(all).slice(0, 3000)}`,
    );
  });
}

/** The route of `prefix` among `routes`. */
function routeFor(routes: readonly XdsRoute[] | undefined, prefix: string): XdsRoute | undefined {
  return routes?.find((r) => r.match?.prefix === prefix);
}

/** The routes of the virtual host in RouteConfiguration `config`, among `hosts` (virtualHostsFor). */
function routesIn(
  hosts: Awaited<ReturnType<typeof virtualHostsFor>>,
  config: string,
): XdsRoute[] | undefined {
  return hosts.find((h) => h.routeConfig === config)?.routes;
}

describe('--ingress-flavor contour, with a real Contour', () => {
  it('writes an HTTPProxy that Contour takes: Routed from its Valid condition, TLS once the Secret exists, Ready', async () => {
    const ns = await project('hp-serve');
    const hostname = `www.${ns}.example`;
    const watched = await watchProxy(ns, 'portico-www');
    let live: CustomDomain;
    try {
      await servingDomain(ns, 'www', hostname);
      await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
      // Ready can come one reconcile before the HTTPProxy's TLS block: the reconcile that stores the
      // certificate plans the route from the Secret cache, which may not hold the new Secret yet
      // (phases/routing.ts, #tlsSecretReady), so its Routed message still says the TLS is to come.
      // Known and left for the serving check to close; wait for the version with TLS.
      live = await waitFor(
        'Ready with the HTTPProxy carrying TLS',
        async () => {
          const cd = await getCustomDomain(ns, 'www');
          const routed = domainCondition(cd, 'Routed');
          const ready = domainCondition(cd, 'Ready');
          return ready?.status === 'True' && routed?.message?.includes(' TLS from Secret www-tls.') === true
            ? cd
            : undefined;
        },
        30_000,
      );
      // The watch's events can trail the status read above; give the TLS version time to arrive
      // (the assertion below fails if it never does).
      await waitFor(
        'the watch to see the HTTPProxy with TLS',
        () => (watched.seen.some((v) => v.tls && (v.generation ?? 0) > 1) ? true : undefined),
        10_000,
      ).catch(() => undefined);
    } finally {
      watched.stop();
    }
    // Written before the certificate existed without a TLS block (Contour would refuse the whole
    // HTTPProxy for a missing Secret), then with it; Contour never called a version invalid.
    const [first] = watched.seen;
    expect(first).toMatchObject({ generation: 1, tls: false });
    expect(watched.seen.some((v) => v.tls && (v.generation ?? 0) > 1)).toBe(true);
    expect(watched.seen.map((v) => v.currentStatus)).not.toContain('invalid');
    expect(domainCondition(live, 'Routed')).toMatchObject({ status: 'True', reason: 'RoutesReady' });
    expect(domainCondition(live, 'Routed').message).toContain(
      `HTTPProxy portico-www (Contour) routes ${hostname} to Service web:80. TLS from Secret www-tls.`,
    );
    expect(domainCondition(live, 'Routed').message).toContain(
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
    const hosts = await xdsHostsOf(hostname, 2);
    expect(routeFor(routesIn(hosts, `https/${hostname}`), '/')?.route?.cluster).toContain(`${ns}/web/80`);
    const insecure = routesIn(hosts, 'ingress_http');
    expect(routeFor(insecure, '/.well-known/acme-challenge/')?.route?.cluster).toContain(
      `${ns}/portico-acme-http01/8089`,
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
    expect(domainCondition(refused, 'Routed').message).toBe(
      `Contour marks HTTPProxy portico-www invalid: VirtualHostError (DuplicateVhost): fqdn "${hostname}" is used in multiple HTTPProxies: ${ns}/portico-www, ${ns}/theirs.`,
    );
    expect(domainCondition(refused, 'Ready')).toMatchObject({ status: 'False', reason: 'DuplicateVhost' });
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
    expect(domainCondition(inUse, 'Routed').message).toContain(
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
    const moved = `moved.${ns}.example`;
    await servingDomain(ns, 'www', target);
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
    await dns.setCname(old, sandbox.platformCnameTarget);
    await dns.setCname(moved, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'old', { hostname: old, redirect: { to: target, statusCode: 308 } });
    // The spec's default status (no statusCode): 301.
    await createCustomDomain(ns, 'moved', { hostname: moved, redirect: { to: target } });
    const live = await waitForCondition(ns, 'old', 'Ready', 'True', 'Live', 120_000);
    const movedLive = await waitForCondition(ns, 'moved', 'Ready', 'True', 'Live', 120_000);
    expect(domainCondition(movedLive, 'Routed').message).toContain(
      `HTTPProxy portico-moved (Contour) answers ${moved} with 301 Moved Permanently to https://${target}, keeping path and query.`,
    );
    // Contour's CRD defaults statusCode to 302, so the 301 must be written; Envoy's RedirectAction
    // has MOVED_PERMANENTLY (301) as its enum's zero value, which proto3 JSON (contour cli) leaves
    // out: a redirect with no response_code is a 301 (envoy/config/route/v3/route_components.proto).
    expect((await readProxy(ns, 'portico-moved')).spec.routes.at(-1)?.requestRedirectPolicy).toEqual({
      scheme: 'https',
      hostname: target,
      statusCode: 301,
    });
    const movedHosts = await xdsHostsOf(moved, 2);
    expect(movedHosts.map((h) => h.routeConfig).sort()).toEqual([`https/${moved}`, 'ingress_http']);
    for (const { routeConfig, routes } of movedHosts) {
      const redirect = routeFor(routes, '/')?.redirect;
      expect(redirect, routeConfig).toMatchObject({ host_redirect: target, scheme_redirect: 'https' });
      expect(redirect?.response_code ?? 'MOVED_PERMANENTLY', routeConfig).toBe('MOVED_PERMANENTLY');
    }
    expect(domainCondition(live, 'Routed').message).toContain(
      `HTTPProxy portico-old (Contour) answers ${old} with 308 Permanent Redirect to https://${target}, keeping path and query.`,
    );
    expect(domainCondition(live, 'Routed').message).not.toContain('Note:');

    // Envoy's RedirectAction as Contour builds it, on HTTPS and (permitInsecure) on plain HTTP: the
    // target host, https, 308, and no path rewrite or strip_query (path and query kept).
    const hosts = await xdsHostsOf(old, 2);
    expect(hosts.map((h) => h.routeConfig).sort()).toEqual([`https/${old}`, 'ingress_http']);
    for (const { routeConfig, routes } of hosts) {
      expect(routeFor(routes, '/')?.redirect, routeConfig).toEqual({
        host_redirect: target,
        scheme_redirect: 'https',
        response_code: 'PERMANENT_REDIRECT',
      });
      expect(routeFor(routes, '/.well-known/acme-challenge/')?.route?.cluster, routeConfig).toContain(
        `${ns}/portico-acme-http01/8089`,
      );
    }

    // Removal: the HTTPProxy goes first, and Contour stops serving the hostname.
    await deleteCustomDomain(ns, 'old');
    await waitFor('HTTPProxy portico-old to be deleted', async () =>
      (await proxyGone(ns, 'portico-old')) ? true : undefined,
    );
    await waitFor(
      `no virtual host for ${old} in Contour's RDS`,
      async () => ((await virtualHostsFor(old)).length === 0 ? true : undefined),
      30_000,
    );
    // The target keeps its own: only the redirect domain's routing went.
    expect((await virtualHostsFor(target)).map((h) => h.routeConfig)).toContain(`https/${target}`);
  });

  it("moves a domain's routing to an Ingress when the operator's flavor changes, and deletes its HTTPProxy", async () => {
    const ns = await project('hp-flavor');
    const hostname = `www.${ns}.example`;
    await servingDomain(ns, 'www', hostname);
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
    expect((await readProxy(ns, 'portico-www')).status?.currentStatus).toBe('valid');

    if (operator) await stopOperator(operator);
    if (!stack) throw new Error('the stack operator was not found');
    operator = await startOperator(stack, 'contour-httpproxy-nginx', {
      '--ingress-flavor': 'nginx',
      '--data-plane': 'contour',
      '--data-plane-acknowledgement': 'true',
      '--http01-service': HTTP01_SERVICE,
    });
    await waitFor('HTTPProxy portico-www to be deleted', async () =>
      (await proxyGone(ns, 'portico-www')) ? true : undefined,
    );
    // Contour takes the Ingress instead (it publishes its address), and serves the hostname from it.
    const live = await waitFor('Routed by the Ingress', async () => {
      const cd = await getCustomDomain(ns, 'www');
      const routed = domainCondition(cd, 'Routed');
      return routed.status === 'True' && routed.message?.includes('Ingress portico-www') ? cd : undefined;
    });
    expect(domainCondition(live, 'Ready')).toMatchObject({ status: 'True', reason: 'Live' });
    const hosts = await xdsHostsOf(hostname, 2);
    expect(hosts.map((h) => h.routeConfig).sort()).toEqual([`https/${hostname}`, 'ingress_http']);

    // A redirect in this flavor (ingress-nginx annotations), which Contour ignores: not Ready, the
    // reason naming the flag that works, and no Ingress that Contour would proxy to the project.
    const old = `old.${ns}.example`;
    await dns.setCname(old, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'old', { hostname: old, redirect: { to: hostname } });
    const refused = await waitForCondition(ns, 'old', 'Routed', 'False', 'UnsupportedByDataPlane', 120_000);
    expect(domainCondition(refused, 'Routed').message).toContain(
      "Contour cannot redirect this domain that way: it serves the Ingress but ignores ingress-nginx's permanent-redirect annotations",
    );
    expect(domainCondition(refused, 'Routed').message).toContain(
      'Start the operator with --routing-mode ingress --ingress-flavor contour',
    );
    // Its certificate is still issued (the challenge path stays routed); Ready stays False.
    const issued = await waitForCondition(ns, 'old', 'CertificateReady', 'True', undefined, 120_000);
    expect(domainCondition(issued, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'UnsupportedByDataPlane',
    });
    const ingresses = await kube().networking.listNamespacedIngress({ namespace: ns });
    expect(ingresses.items.map((i) => i.metadata?.name).sort()).toEqual(['portico--acme-old', 'portico-www']);
    // What Contour would push to Envoy for the hostname: the challenge route, nothing to the project.
    const oldHosts = await xdsHostsOf(old, 1);
    for (const { routeConfig, routes } of oldHosts) {
      expect(routeConfig).toBe('ingress_http');
      // Prefix or path-separated prefix, with or without the trailing slash, as Contour chooses.
      const paths = (routes ?? []).map((r) => matchedPath(r) ?? '');
      expect(paths.length, routeConfig).toBeGreaterThan(0);
      expect(
        paths.filter((p) => !p.startsWith('/.well-known/acme-challenge')),
        routeConfig,
      ).toEqual([]);
      expect((routes ?? []).map((r) => r.route?.cluster ?? '').filter((c) => c.includes('/web/'))).toEqual(
        [],
      );
    }
  });
});
