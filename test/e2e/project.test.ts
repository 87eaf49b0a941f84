/**
 * Projects end to end (docs/customdomains.md, "Projects"), against the stack's real operator,
 * Pebble and Contour: a Project's CustomDomains are created, owned (controller ownerReference) and
 * deleted by the operator; the Project goes Ready once its primary and its redirects are Live; a
 * CustomDomain made by hand for a listed hostname is adopted, one another object controls is
 * reported and left alone; a hostname taken out of the list loses its CustomDomain and its route at
 * once; a switch of primary leaves no moment at which either hostname has no route (the stored
 * routes polled every 100 ms through the switch; and, through a switch back, every RouteConfiguration
 * Contour pushes to Envoy, read from its xDS stream, keeps a serving virtual host); wwwRedirect gives an apex primary its www twin;
 * deleting the Project deletes its CustomDomains.
 *
 * Every hostname's CNAME is set in the stack's DNS server first, as the customer would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1Ingress } from '@kubernetes/client-node';
import type { CustomDomain } from '../../src/api/customdomain.js';
import type { Project } from '../../src/api/project.js';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { NGINX_PERMANENT_REDIRECT } from '../../src/routing/nginx.js';
import { contourXdsAddr, splitTopLevelObjects } from './support/contour.js';
import {
  createCustomDomain,
  createProject,
  customDomainApi,
  dns,
  kube,
  sandbox,
  unique,
  waitFor,
} from './support/cluster.js';

const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;

const ns = unique('proj');
const primary = `www.${ns}.example`;
const apex = `${ns}.example`;
const old = `old.${ns}.example`;
const handMade = `hand.${ns}.example`;
const foreign = `foreign.${ns}.example`;

async function getProject(): Promise<Project> {
  return (await kube().custom.getNamespacedCustomObject({
    ...projectApi,
    namespace: ns,
    name: 'site',
  })) as Project;
}

async function customDomains(): Promise<CustomDomain[]> {
  const list = (await kube().custom.listNamespacedCustomObject({ ...customDomainApi, namespace: ns })) as {
    items: CustomDomain[];
  };
  return list.items;
}

/**
 * Sets the Project's spec.domains to `domains` and nothing else: one JSON patch (RFC 6902) `replace`
 * of /spec/domains, which carries no resourceVersion. A read-then-replace of the whole object got
 * 409 Conflict whenever the operator wrote the Project's status in between (a status write bumps
 * the object's resourceVersion).
 */
async function patchDomains(domains: Project['spec']['domains']): Promise<void> {
  await kube().custom.patchNamespacedCustomObject({
    ...projectApi,
    namespace: ns,
    name: 'site',
    body: [{ op: 'replace', path: '/spec/domains', value: domains }],
  });
}

/** Waits until the Project's Ready condition is `status` (and `reason`) for its current generation. */
async function waitForProject(status: string, reason?: string, timeoutMs = 120_000): Promise<Project> {
  return waitFor(
    `Project site Ready=${status}${reason ? `/${reason}` : ''}`,
    async () => {
      const p = await getProject();
      const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
      if (p.status?.observedGeneration !== p.metadata.generation) return undefined;
      return ready?.status === status && (reason === undefined || ready.reason === reason) ? p : undefined;
    },
    timeoutMs,
  );
}

/** What the stored routes say a hostname answers: `serve:<service>`, `redirect:<location>` or `none`. */
function routeOf(ingresses: readonly V1Ingress[], hostname: string): string {
  const ingress = ingresses.find((i) => i.spec?.rules?.some((r) => r.host === hostname));
  if (ingress === undefined) return 'none';
  const location = ingress.metadata?.annotations?.[NGINX_PERMANENT_REDIRECT];
  if (location !== undefined) return `redirect:${location}`;
  const rule = ingress.spec?.rules?.find((r) => r.host === hostname);
  return `serve:${rule?.http?.paths[0]?.backend.service?.name ?? '?'}`;
}

/**
 * Watches the stack's Contour's RouteConfigurations (RDS) as Envoy would receive them: one
 * `contour cli rds` stream, every DiscoveryResponse it prints (each the whole state of the world).
 * For each response, the hostnames of `hosts` that have a virtual host in it (HTTP and HTTPS).
 */
function watchRds(hosts: readonly string[]): { responses: Map<string, boolean>[]; stop: () => void } {
  const child = spawn(
    path.join(sandbox.toolsBinDir, 'contour'),
    ['cli', 'rds', '--contour', contourXdsAddr()],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const responses: Map<string, boolean>[] = [];
  let stdout = '';
  let seen = 0;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    const objects = splitTopLevelObjects(stdout).filter((o) => 'nonce' in o);
    for (const response of objects.slice(seen)) {
      const configs = (response['resources'] ?? []) as {
        name?: string;
        virtual_hosts?: { domains?: string[] }[];
      }[];
      const has = (host: string, config: string): boolean =>
        configs.some(
          (c) => c.name === config && (c.virtual_hosts ?? []).some((vh) => vh.domains?.includes(host)),
        );
      responses.push(new Map(hosts.map((h) => [h, has(h, 'ingress_http') && has(h, `https/${h}`)])));
    }
    seen = objects.length;
  });
  return {
    responses,
    stop: () => {
      child.kill('SIGKILL');
    },
  };
}

beforeAll(async () => {
  await createProject(ns);
  for (const h of [primary, apex, old, handMade, foreign]) await dns.setCname(h, sandbox.platformCnameTarget);
}, 60_000);

afterAll(async () => {
  // The Project first, so that the operator does not re-create what the file clean-up deletes.
  await kube()
    .custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'site' })
    .catch(() => undefined);
}, 30_000);

describe('a Project', () => {
  it('creates one CustomDomain per hostname, controlled by the Project, and goes Ready once all are Live', async () => {
    await kube().custom.createNamespacedCustomObject({
      ...projectApi,
      namespace: ns,
      body: {
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'Project',
        metadata: { name: 'site', namespace: ns },
        spec: {
          service: { name: 'web', port: 80 },
          domains: { primary, redirects: [{ from: apex, status: 308 }, { from: old }] },
        },
      },
    });
    const project = await waitForProject('True', 'Live', 180_000);
    expect(project.status?.servingPrimary).toBe(primary);
    expect(project.status?.hostnameCount).toBe(3);
    expect(project.status?.domains?.map((d) => [d.hostname, d.role, d.phase, d.ready])).toEqual([
      [primary, 'Primary', 'Live', 'True'],
      [apex, 'Redirect', 'Live', 'True'],
      [old, 'Redirect', 'Live', 'True'],
    ]);
    // The record to create, from the CustomDomain's status: a CNAME for www, an ALIAS for the apex.
    expect(project.status?.domains?.[0]?.dnsRecords?.[0]).toMatchObject({
      type: 'CNAME',
      name: primary,
      value: sandbox.platformCnameTarget,
    });
    expect(project.status?.domains?.[1]?.dnsRecords?.[0]).toMatchObject({ type: 'ALIAS', name: apex });

    const domains = await customDomains();
    const byHost = new Map(domains.map((d) => [d.spec.hostname, d]));
    expect(byHost.get(primary)?.spec.service).toEqual({ name: 'web', port: 80 });
    expect(byHost.get(apex)?.spec.redirect).toEqual({ to: primary, statusCode: 308 });
    expect(byHost.get(old)?.spec.redirect).toEqual({ to: primary, statusCode: 301 });
    for (const d of domains) {
      expect(d.metadata.name).toBe(d.spec.hostname);
      expect(d.metadata.labels?.['portico.dev/project']).toBe('site');
      expect(d.metadata.ownerReferences).toEqual([
        {
          apiVersion: 'portico.dev/v1alpha1',
          kind: 'Project',
          name: 'site',
          uid: project.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
    // The routes are written: the primary serves, the redirects redirect to it.
    const ingresses = (await kube().networking.listNamespacedIngress({ namespace: ns })).items;
    expect(routeOf(ingresses, primary)).toBe('serve:web');
    expect(routeOf(ingresses, old)).toBe(`redirect:https://${primary}$request_uri`);
  }, 200_000);

  it('adopts a CustomDomain made by hand for a listed hostname, and reports one another object controls', async () => {
    await createCustomDomain(ns, 'hand-made', { hostname: handMade, service: { name: 'web' } });
    // Controlled by another object (here a ConfigMap): Portico never changes it.
    const owner = await kube().core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'owner' } },
    });
    await kube().custom.createNamespacedCustomObject({
      ...customDomainApi,
      namespace: ns,
      body: {
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'CustomDomain',
        metadata: {
          name: 'theirs',
          namespace: ns,
          ownerReferences: [
            {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              name: 'owner',
              uid: owner.metadata?.uid ?? '',
              controller: true,
            },
          ],
        },
        spec: { hostname: foreign, service: { name: 'web' } },
      },
    });
    await patchDomains({
      primary,
      redirects: [{ from: apex, status: 308 }, { from: old }, { from: handMade }, { from: foreign }],
    });

    const adopted = await waitFor('the hand-made CustomDomain adopted', async () => {
      const d = (await customDomains()).find((c) => c.metadata.name === 'hand-made');
      return d?.metadata.ownerReferences?.some((r) => r.kind === 'Project' && r.controller === true)
        ? d
        : undefined;
    });
    expect(adopted.spec.redirect).toEqual({ to: primary, statusCode: 301 });
    expect(adopted.spec.service).toBeUndefined();

    const project = await waitFor('Conflicted=True', async () => {
      const p = await getProject();
      return p.status?.conditions?.find((c) => c.type === 'Conflicted')?.status === 'True' ? p : undefined;
    });
    expect(project.status?.conditions?.find((c) => c.type === 'Conflicted')?.message).toContain(foreign);
    const entry = project.status?.domains?.find((d) => d.hostname === foreign);
    expect(entry).toMatchObject({ customDomain: 'theirs', reason: 'ControlledElsewhere' });
    const theirs = (await customDomains()).find((c) => c.metadata.name === 'theirs');
    expect(theirs?.spec).toEqual({ hostname: foreign, service: { name: 'web', port: 80 } });
    expect(theirs?.metadata.ownerReferences?.map((r) => r.kind)).toEqual(['ConfigMap']);
    // No second CustomDomain for the hostname either.
    expect((await customDomains()).filter((c) => c.spec.hostname === foreign)).toHaveLength(1);
    const notReady = await waitForProject('False', 'HostnameConflict');
    expect(notReady.status?.servingPrimary).toBe(primary);
  }, 120_000);

  it('deletes the CustomDomain of a hostname taken out of the list, and its route with it', async () => {
    await patchDomains({ primary, redirects: [{ from: apex, status: 308 }, { from: handMade }] });
    await waitFor('the CustomDomain of the removed hostname gone', async () =>
      (await customDomains()).some((c) => c.spec.hostname === old) ? undefined : true,
    );
    const ingresses = (await kube().networking.listNamespacedIngress({ namespace: ns })).items;
    expect(routeOf(ingresses, old)).toBe('none');
    // The CustomDomain another object controls was never the Project's: it stays.
    expect((await customDomains()).map((c) => c.metadata.name)).toContain('theirs');
    const project = await waitForProject('True', 'Live', 120_000);
    expect(project.status?.conditions?.find((c) => c.type === 'Conflicted')?.status).toBe('False');
  }, 150_000);

  it('switches the primary without a gap: the new primary serves before the former one redirects', async () => {
    const seen = new Map<string, string[]>([
      [primary, []],
      [apex, []],
    ]);
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const ingresses = (await kube().networking.listNamespacedIngress({ namespace: ns })).items;
        for (const [host, states] of seen) {
          const state = routeOf(ingresses, host);
          if (states.at(-1) !== state) states.push(state);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      await patchDomains({ primary: apex, redirects: [{ from: primary }, { from: handMade }] });
      const project = await waitForProject('True', 'Live', 120_000);
      expect(project.status?.servingPrimary).toBe(apex);
    } finally {
      polling = false;
      await poll;
    }
    // Each hostname always had a route, and the order was: the apex serves, then www redirects.
    expect(seen.get(apex)).toEqual([`redirect:https://${primary}$request_uri`, 'serve:web']);
    expect(seen.get(primary)).toEqual(['serve:web', `redirect:https://${apex}$request_uri`]);
    const domains = await customDomains();
    expect(domains.find((d) => d.spec.hostname === handMade)?.spec.redirect?.to).toBe(apex);
  }, 150_000);

  // The stack's operator writes Ingresses with ingress-nginx's redirect annotations, which Contour
  // does not take (docs/routing.md, "Data planes and flavors"): a redirect hostname has no virtual
  // host in this Contour's xDS. What the xDS shows here is the serving side of the switch: the new
  // primary's virtual host comes no later than the former primary's goes, and the project is never
  // without one.
  //
  // A response with both (an overlap) is usual but not guaranteed, so it is not required: the new
  // primary's Ingress is the one it had as a redirect, whose published address carries no
  // generation, so the new primary is Live (and the former one turned into a redirect) a few
  // milliseconds after its Ingress changes, before Contour has built it. Contour v1.33.8
  // (internal/contour/handler.go) rebuilds at once only when its last rebuild is more than 500 ms
  // old (holdoffMaxDelay), otherwise 100 ms after the last change (holdoffDelay): the two Ingress
  // writes then land in one rebuild and one RDS response ("-/apex www/-": on 2026-11-29, 4 of 22
  // runs of this file alone once its Project writes were patches, which reach Contour sooner after
  // the previous case's rebuilds than a read and a replace). Contour builds the changes in the order
  // they were written, so no response can have the former primary's change without the new one's.
  it("switches back with the serving side never lapsing in Contour's xDS (the new primary's virtual host comes no later than the former one's goes)", async () => {
    const watch = watchRds([primary, apex]);
    try {
      await waitFor('the first RDS response', () => (watch.responses.length > 0 ? true : undefined), 15_000);
      await patchDomains({ primary, redirects: [{ from: apex }, { from: handMade }] });
      const project = await waitForProject('True', 'Live', 120_000);
      expect(project.status?.servingPrimary).toBe(primary);
      // Contour pushes the former primary's change too: wait until its virtual host is gone.
      await waitFor(
        "an RDS response without the former primary's virtual host",
        () => (watch.responses.at(-1)?.get(apex) === false ? true : undefined),
        15_000,
      );
    } finally {
      watch.stop();
    }
    const states = watch.responses.map(
      (r) => `${r.get(primary) ? 'www' : '-'}/${r.get(apex) ? 'apex' : '-'}`,
    );
    // Before: the apex alone; then, in some responses, both (the overlap); then www alone, to the
    // end. Never neither, and the apex alone never again once www is there.
    expect(states.join(' ')).toMatch(/^(-\/apex )+(www\/apex )*(www\/- )*www\/-$/);
    const ingresses = (await kube().networking.listNamespacedIngress({ namespace: ns })).items;
    expect(routeOf(ingresses, primary)).toBe('serve:web');
    expect(routeOf(ingresses, apex)).toBe(`redirect:https://${primary}$request_uri`);
  }, 150_000);

  it('with wwwRedirect, gives an apex primary its www twin as a 301 redirect with its own record', async () => {
    const twinApex = `twin-${ns}.example`;
    for (const h of [twinApex, `www.${twinApex}`]) await dns.setCname(h, sandbox.platformCnameTarget);
    await kube().custom.createNamespacedCustomObject({
      ...projectApi,
      namespace: ns,
      body: {
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'Project',
        metadata: { name: 'twin', namespace: ns },
        spec: { service: { name: 'web' }, domains: { primary: twinApex, wwwRedirect: true } },
      },
    });
    const project = await waitFor(
      'Project twin Ready',
      async () => {
        const p = (await kube().custom.getNamespacedCustomObject({
          ...projectApi,
          namespace: ns,
          name: 'twin',
        })) as Project;
        return p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? p : undefined;
      },
      120_000,
    );
    expect(project.status?.domains?.map((d) => [d.hostname, d.role, d.redirectTo, d.statusCode])).toEqual([
      [twinApex, 'Primary', undefined, undefined],
      [`www.${twinApex}`, 'Redirect', twinApex, 301],
    ]);
    // Each its own DNS instructions: ALIAS for the apex, CNAME for www.
    expect(project.status?.domains?.map((d) => d.dnsRecords?.[0]?.type)).toEqual(['ALIAS', 'CNAME']);
    const twin = (await customDomains()).find((d) => d.spec.hostname === `www.${twinApex}`);
    expect(twin?.spec.redirect).toEqual({ to: twinApex, statusCode: 301 });
    expect(twin?.metadata.ownerReferences?.[0]?.uid).toBe(project.metadata.uid);
    await kube().custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'twin' });
    await waitFor('the twin Project CustomDomains gone', async () =>
      (await customDomains()).some((d) => d.spec.hostname.endsWith(twinApex)) ? undefined : true,
    );
  }, 150_000);

  it('deletes its CustomDomains when deleted (the garbage collector would; the stack runs none)', async () => {
    await kube().custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'site' });
    await waitFor('the Project CustomDomains gone', async () => {
      const left = (await customDomains()).map((c) => c.metadata.name);
      return left.length === 1 ? left : undefined;
    });
    expect((await customDomains()).map((c) => c.metadata.name)).toEqual(['theirs']);
  }, 60_000);
});
