/**
 * A Project's auto-generated subdomain in Gateway API mode, judged by a real Envoy Gateway v1.9.1
 * (docs/customdomains.md, "The auto-generated subdomain"; docs/routing.md, "Envoy Gateway"). The
 * file starts Envoy Gateway in the stack with the sandbox's GatewayClass and Gateway
 * (support/envoy-gateway.ts), the apps zone (Knot, with a BIND resolver in front of it for a second
 * Pebble that validates DNS-01 through it) and an operator of its own in gateway mode with
 * `--apps-domain apps.portico.test` and the acknowledgement on (support/apps-domain.ts). Every
 * assertion about the data plane reads what Envoy Gateway wrote (the HTTPRoute's and the
 * ListenerSet's status) or what it serves an Envoy over xDS (its ADS stream, asked as Envoy asks).
 * The test writes no status; no Envoy runs (the Gateway stays `Programmed=False`, as in
 * envoy-gateway-routes).
 *
 * - The wildcard `*.apps.portico.test` reaches the Gateway through the ListenerSet
 *   `portico-apps-domain` the operator keeps next to its Secret in the operator's namespace (no
 *   ReferenceGrant, no copy in a tenant's namespace); the subdomain's HTTPRoute names the Gateway and
 *   that ListenerSet, and Envoy Gateway accepts it on both.
 * - xDS: the HTTPS filter chain for `*.apps.portico.test` carries, over SDS, the certificate in the
 *   Secret (same serial); its route configuration has the subdomain's virtual host, routed to the
 *   cluster of the HTTPRoute's rule, whose endpoints are the project's Service's.
 * - Replace: once the primary is Live the subdomain's virtual host answers with the 301 redirect.
 * - The listener admits routes only from the namespaces that hold a subdomain: Envoy Gateway itself
 *   refuses another namespace's HTTPRoute on it.
 *
 * What it starts, and stops in `afterAll` (the stack is left as found): Envoy Gateway, Knot and BIND,
 * the second Pebble, its operator; the Projects (swept by the operator), the ListenerSet and the
 * wildcard Secret are deleted; the stack's operator is restarted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project } from '../../src/api/project.js';
import { APPS_DOMAIN_SECRET } from '../../src/controller/main.js';
import { subdomainProxyName } from '../../src/controllers/project/subdomain.js';
import {
  ENVOY_GATEWAY_CONTROLLER_NAME,
  SANDBOX_GATEWAY,
} from '../../src/data-planes/envoy-gateway/sandbox-process.js';
import type {
  HTTPRouteWithStatus,
  ListenerSetWithStatus,
  StatusCondition,
} from '../../src/routing/acknowledgement.js';
import type { HTTPRoute, ListenerSet } from '../../src/routing/gateway.js';
import { APPS_DOMAIN_LISTENERSET_NAME } from '../../src/routing/subdomain-route.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createProjectObject,
  getProject,
  leafOf,
  projectApi,
  readAppsSecret,
  startAppsDomainOperator,
  stopAppsDomainOperator,
  waitForSubdomain,
  wildcardCopies,
  type AppsDomainStack,
} from './support/apps-domain.js';
import { createProject, customDomainApi, dns, kube, sandbox, unique, waitFor } from './support/cluster.js';
import {
  ENVOY_GATEWAY_OPERATOR_FLAGS,
  clusterEndpoints,
  filterChainsFor,
  normalSerial,
  routesFor,
  sdsSecretName,
  sdsSerial,
  startStackEnvoyGateway,
  stopStackEnvoyGateway,
  type XdsRoute,
} from './support/envoy-gateway.js';

const APPS_DOMAIN = 'apps.portico.test';
const WILDCARD = `*.${APPS_DOMAIN}`;
const PEBBLE_NAME = 'pebble-eg-subdomain';
const GATEWAY_API = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;

let started: AppsDomainStack | undefined;
let egStarted = false;
/** The Projects this file made (name `site`), deleted while its operator runs. */
const projects: string[] = [];

async function read<T>(plural: string, namespace: string, name: string): Promise<T> {
  return (await kube().custom.getNamespacedCustomObject({ ...GATEWAY_API, plural, namespace, name })) as T;
}

function condition(conditions: StatusCondition[] | undefined, type: string): StatusCondition | undefined {
  return conditions?.find((c) => c.type === type);
}

async function readListenerSet(): Promise<ListenerSet & ListenerSetWithStatus> {
  return read('listenersets', OPERATOR_NAMESPACE, APPS_DOMAIN_LISTENERSET_NAME);
}

/** The route configuration of the wildcard's HTTPS filter chain (from LDS), once there is one. */
async function wildcardRouteConfig(): Promise<string> {
  return waitFor(`an HTTPS filter chain for ${WILDCARD} in LDS`, async () => {
    const [chain] = await filterChainsFor(WILDCARD);
    return chain?.filters?.map((f) => f.typed_config?.rds?.route_config_name).find(Boolean);
  });
}

/** The routes of `hostname`'s virtual host in the wildcard listener's route configuration. */
async function wildcardRoutes(hostname: string): Promise<XdsRoute[]> {
  const config = await wildcardRouteConfig();
  return (await routesFor(hostname)).filter((h) => h.routeConfig === config).flatMap((h) => h.routes);
}

/** A deployed project `ns` on `plan` with the Project `site` of `spec`. */
async function newProject(ns: string, plan: string, spec: Project['spec']): Promise<void> {
  await createProject(ns, { plan });
  await createProjectObject(ns, spec);
  projects.push(ns);
}

beforeAll(async () => {
  await startStackEnvoyGateway();
  egStarted = true;
  started = await startAppsDomainOperator('eg-project-subdomain', APPS_DOMAIN, {
    pebbleName: PEBBLE_NAME,
    // Long enough that no certificate is renewed while the file runs.
    certificateSeconds: 3600,
    flags: ENVOY_GATEWAY_OPERATOR_FLAGS,
  });
}, 240_000);

afterAll(async () => {
  await stopAppsDomainOperator(started, async () => {
    for (const namespace of projects.splice(0)) {
      await kube()
        .custom.deleteNamespacedCustomObject({ ...projectApi, namespace, name: 'site' })
        .catch(() => undefined);
      // The operator sweeps what the Project owned (no garbage collector runs here).
      await waitFor(
        `${namespace}'s CustomDomains and HTTPRoutes to be gone`,
        async () => {
          const lists = await Promise.all([
            kube().custom.listNamespacedCustomObject({ ...customDomainApi, namespace }),
            kube().custom.listNamespacedCustomObject({ ...GATEWAY_API, plural: 'httproutes', namespace }),
          ]);
          return lists.every((l) => (l as { items: unknown[] }).items.length === 0) ? true : undefined;
        },
        60_000,
      );
    }
  });
  // After the operator stopped, so that nothing applies it again.
  await kube()
    .custom.deleteNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'listenersets',
      namespace: OPERATOR_NAMESPACE,
      name: APPS_DOMAIN_LISTENERSET_NAME,
    })
    .catch(() => undefined);
  if (egStarted) await stopStackEnvoyGateway();
}, 240_000);

describe("a project's auto-generated subdomain on Envoy Gateway", () => {
  let ns = '';
  let hostname = '';

  it(
    'a deployed project gets <project>.<apps domain> as an HTTPRoute that Envoy Gateway accepts on the Gateway and on the wildcard ListenerSet (ResolvedRefs True)',
    { timeout: 200_000 },
    async () => {
      ns = unique('egsub');
      await newProject(ns, 'free', {
        service: { name: 'web', port: 80 },
        domains: { primary: `www.${ns}.example` },
      });
      hostname = `${ns}.${APPS_DOMAIN}`;
      const serving = await waitForSubdomain(ns, { serving: 'True' }, 180_000);
      expect(serving.status?.subdomain).toMatchObject({ hostname, answer: 'Content', reason: 'Serving' });
      expect(serving.status?.subdomain?.message).toContain(
        `HTTPRoute ${subdomainProxyName(serving)} on ListenerSet ${OPERATOR_NAMESPACE}/${APPS_DOMAIN_LISTENERSET_NAME}`,
      );

      const route = await read<HTTPRoute & HTTPRouteWithStatus>(
        'httproutes',
        ns,
        subdomainProxyName(serving),
      );
      expect(route.spec.hostnames).toEqual([hostname]);
      expect(route.spec.parentRefs).toEqual([
        expect.objectContaining({ name: SANDBOX_GATEWAY.name, namespace: SANDBOX_GATEWAY.namespace }),
        expect.objectContaining({
          kind: 'ListenerSet',
          name: APPS_DOMAIN_LISTENERSET_NAME,
          namespace: OPERATOR_NAMESPACE,
        }),
      ]);
      // One entry per parent, written by Envoy Gateway for the route's current generation.
      const parents = route.status?.parents ?? [];
      expect(parents.map((p) => p.parentRef.kind ?? 'Gateway').sort()).toEqual(['Gateway', 'ListenerSet']);
      for (const parent of parents) {
        expect(parent.controllerName).toBe(ENVOY_GATEWAY_CONTROLLER_NAME);
        for (const type of ['Accepted', 'ResolvedRefs'])
          expect(condition(parent.conditions, type)).toMatchObject({
            status: 'True',
            observedGeneration: route.metadata?.generation,
          });
      }

      // The ListenerSet next to the Secret: the wildcard hostname, the Secret of its own namespace,
      // accepted and programmed by Envoy Gateway, its listener's certificate reference resolved.
      const set = await readListenerSet();
      const [listener] = set.spec.listeners;
      expect(listener).toMatchObject({
        name: 'https',
        hostname: WILDCARD,
        protocol: 'HTTPS',
        tls: { mode: 'Terminate', certificateRefs: [{ kind: 'Secret', name: APPS_DOMAIN_SECRET }] },
      });
      expect(listener?.tls.certificateRefs[0]).not.toHaveProperty('namespace');
      expect(set.spec.parentRef).toMatchObject({
        name: SANDBOX_GATEWAY.name,
        namespace: SANDBOX_GATEWAY.namespace,
      });
      for (const type of ['Accepted', 'Programmed'])
        expect(condition(set.status?.conditions, type)).toMatchObject({ status: 'True' });
      const listenerStatus = set.status?.listeners?.find((l) => l.name === 'https');
      expect(condition(listenerStatus?.conditions, 'ResolvedRefs')).toMatchObject({ status: 'True' });
    },
  );

  it("has, in Envoy Gateway's xDS, the wildcard's HTTPS filter chain carrying the certificate in Portico's Secret (same serial)", async () => {
    const secret = await readAppsSecret();
    if (secret === undefined) throw new Error('no wildcard Secret');
    const leaf = leafOf(secret);
    expect(leaf.subjectAltName).toBe(`DNS:${WILDCARD}`);
    const chains = await waitFor(`an HTTPS filter chain for ${WILDCARD} in LDS`, async () => {
      const found = await filterChainsFor(WILDCARD);
      return found.length > 0 ? found : undefined;
    });
    expect(chains).toHaveLength(1);
    // No filter chain of the subdomain's own: the wildcard's serves it, matched by SNI.
    expect(await filterChainsFor(hostname)).toEqual([]);
    const name = sdsSecretName(chains[0] ?? {});
    expect(name).toBe(`${OPERATOR_NAMESPACE}/${APPS_DOMAIN_SECRET}`);
    const served = await waitFor('the wildcard in SDS', () => sdsSerial(name ?? ''));
    expect(normalSerial(served)).toBe(normalSerial(leaf.serialNumber));
  });

  it("routes the subdomain's virtual host on that listener to the project's Service", async () => {
    const cluster = `httproute/${ns}/portico-subdomain-site/rule/0`;
    const routes = await waitFor(`${hostname}'s virtual host on the wildcard listener`, async () => {
      const found = await wildcardRoutes(hostname);
      return found.length > 0 ? found : undefined;
    });
    expect(routes.map((r) => r.route?.cluster)).toContain(cluster);
    expect(routes.some((r) => r.redirect !== undefined)).toBe(false);
    // The cluster's endpoints are the Service's: the EndpointSlice of Service web (createProject).
    const slice = (await kube().discovery.listNamespacedEndpointSlice({ namespace: ns })).items.find(
      (s) => s.metadata?.labels?.['kubernetes.io/service-name'] === 'web',
    );
    const want = (slice?.endpoints ?? []).flatMap((e) =>
      e.addresses.map((a) => `${a}:${slice?.ports?.[0]?.port ?? ''}`),
    );
    expect(want).not.toEqual([]);
    expect(
      await waitFor(`the endpoints of ${cluster}`, async () => {
        const found = await clusterEndpoints(cluster);
        return found.length > 0 ? found : undefined;
      }),
    ).toEqual(want);
  });

  it("the wildcard's listener admits the namespaces that hold a subdomain only: Envoy Gateway refuses another namespace's HTTPRoute on it", async () => {
    const set = await readListenerSet();
    expect(set.spec.listeners[0]?.allowedRoutes).toEqual({
      namespaces: {
        from: 'Selector',
        selector: {
          matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [ns] }],
        },
      },
    });
    const tenant = unique('egsub-tenant');
    await kube().core.createNamespace({ body: { metadata: { name: tenant } } });
    const stray = `${tenant}.${APPS_DOMAIN}`;
    await kube().custom.createNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'httproutes',
      namespace: tenant,
      body: {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'HTTPRoute',
        metadata: { name: 'grab', namespace: tenant },
        spec: {
          parentRefs: [
            {
              group: 'gateway.networking.k8s.io',
              kind: 'ListenerSet',
              name: APPS_DOMAIN_LISTENERSET_NAME,
              namespace: OPERATOR_NAMESPACE,
            },
          ],
          hostnames: [stray],
          rules: [{ backendRefs: [{ name: 'web', port: 80 }] }],
        },
      },
    });
    const refused = await waitFor('Envoy Gateway to judge the tenant route', async () => {
      const route = await read<HTTPRouteWithStatus>('httproutes', tenant, 'grab');
      return condition(route.status?.parents?.[0]?.conditions, 'Accepted');
    });
    expect(refused).toMatchObject({ status: 'False', reason: 'NotAllowedByListeners' });
    expect(await wildcardRoutes(stray)).toEqual([]);
    // No copy of the wildcard in any namespace but the operator's.
    const elsewhere = (await kube().core.listSecretForAllNamespaces()).items.filter(
      (s) => s.metadata?.namespace !== OPERATOR_NAMESPACE,
    );
    expect(wildcardCopies(elsewhere, APPS_DOMAIN)).toEqual([]);
  });

  it(
    "Replace: once the primary is Live, the subdomain's virtual host answers a 301 to it (https, path kept)",
    { timeout: 200_000 },
    async () => {
      const rep = unique('egrep');
      const primary = `www.${rep}.example`;
      await dns.setCname(primary, sandbox.platformCnameTarget);
      await newProject(rep, 'pro', {
        service: { name: 'web', port: 80 },
        domains: { primary, generatedSubdomain: 'Replace' },
      });
      const repHost = `${rep}.${APPS_DOMAIN}`;
      const redirecting = await waitForSubdomain(rep, { answer: 'Redirect', serving: 'True' }, 180_000);
      expect(redirecting.status?.servingPrimary).toBe(primary);
      expect(redirecting.status?.subdomain).toMatchObject({ hostname: repHost, redirectTo: primary });
      const route = await read<HTTPRoute>('httproutes', rep, subdomainProxyName(redirecting));
      expect(route.spec.rules.flatMap((r) => r.filters ?? [])).toEqual([
        { type: 'RequestRedirect', requestRedirect: { scheme: 'https', hostname: primary, statusCode: 301 } },
      ]);
      const routes = await waitFor(`${repHost}'s redirect on the wildcard listener`, async () => {
        const found = await wildcardRoutes(repHost);
        return found.some((r) => r.redirect !== undefined) ? found : undefined;
      });
      expect(routes.map((r) => r.route?.cluster).filter(Boolean)).toEqual([]);
      for (const { redirect } of routes) {
        expect(redirect).toMatchObject({ scheme_redirect: 'https', host_redirect: primary });
        // MOVED_PERMANENTLY (301) is the enum's zero value, left out of the decoded message.
        expect(redirect?.response_code ?? 'MOVED_PERMANENTLY').toBe('MOVED_PERMANENTLY');
      }
      // The listener now admits both projects' namespaces.
      const set = await readListenerSet();
      const values = (
        set.spec.listeners[0]?.allowedRoutes?.namespaces as {
          selector?: { matchExpressions: { values: string[] }[] };
        }
      ).selector?.matchExpressions[0]?.values;
      expect(values).toEqual([ns, rep].sort());
      expect((await getProject(ns)).status?.subdomain?.serving).toBe('True');
    },
  );

  it('deleting the Project stops its subdomain: no virtual host for it in xDS, its namespace no longer admitted', async () => {
    await kube().custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'site' });
    await waitFor(`${hostname}'s virtual host to leave xDS`, async () =>
      (await routesFor(hostname)).length === 0 ? true : undefined,
    );
    const set = await waitFor('the ListenerSet to stop admitting the namespace', async () => {
      const found = await readListenerSet();
      return JSON.stringify(found.spec.listeners[0]?.allowedRoutes).includes(`"${ns}"`) ? undefined : found;
    });
    expect(set.spec.listeners[0]?.allowedRoutes?.namespaces).toMatchObject({ from: 'Selector' });
    const ours = (await kube().custom.listNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'httproutes',
      namespace: ns,
    })) as { items: unknown[] };
    expect(ours.items).toEqual([]);
  });
});
