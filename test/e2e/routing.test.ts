/**
 * The routing plan (src/routing/) against a real API server: every object Portico would apply, in
 * every mode, flavor and redirect status, is applied with server-side apply under the real schemas
 * (Ingress; Traefik's Middleware CRD; Gateway API's standard-channel HTTPRoute CRD with its CEL rules)
 * and read back. Also: the stale objects of a mode switch are deleted, a removal leaves nothing, and a
 * routing object whose CRD is not installed reads as NotFound (so the controller's delete is quiet).
 *
 * The CRDs come from the Go module proxy through scripts/fetch-routing-crds.sh (no copies in the
 * repository) and are applied in beforeAll.
 */
import {
  ApiextensionsV1Api,
  ApisApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1Ingress,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { FIELD_MANAGER, type CustomDomain, type CustomDomainSpec } from '../../src/api/customdomain.js';
import { isNotFound } from '../../src/kube/errors.js';
import type { HTTPRoute, ListenerSet } from '../../src/routing/gateway.js';
import { HTTP01_PATH_PREFIX } from '../../src/routing/ingress.js';
import type { RoutingOptions } from '../../src/routing/options.js';
import {
  desiredRouting,
  ownedRoutingObjects,
  staleRoutingObjects,
  type ObjectHeader,
  type RoutingPlan,
} from '../../src/routing/plan.js';
import type { TraefikMiddleware } from '../../src/data-planes/traefik/middleware.js';
import { createProject, sandbox, unique, waitFor } from './support/cluster.js';
import { installRoutingCrds } from './support/routing-crds.js';
const STATUSES = [301, 302, 307, 308] as const;
const http01Service = { fqdn: 'portico-controller.portico-system.svc.cluster.local', port: 8089 };
const gatewayOptions: RoutingOptions = {
  mode: 'gateway',
  gatewayParentRefs: [{ name: 'public', namespace: 'infra', sectionName: 'https' }],
  http01Service,
};

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return kc;
}

/** A fresh client each time: KubernetesObjectApi caches API discovery, and the CRDs arrive mid-run. */
const objects = (): KubernetesObjectApi => KubernetesObjectApi.makeApiClient(kubeConfig());

async function apply(obj: KubernetesObject): Promise<void> {
  await objects().patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
}

async function read(header: ObjectHeader): Promise<KubernetesObject | undefined> {
  try {
    return await objects().read(header);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function remove(header: ObjectHeader): Promise<void> {
  try {
    await objects().delete(header);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

function header(obj: KubernetesObject): ObjectHeader {
  return {
    apiVersion: obj.apiVersion ?? '',
    kind: obj.kind ?? '',
    metadata: { name: obj.metadata?.name ?? '', namespace: obj.metadata?.namespace ?? '' },
  };
}

function domain(namespace: string, name: string, spec: CustomDomainSpec): CustomDomain {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name, namespace, uid: '00000000-0000-4000-8000-000000000001' },
    spec,
  };
}

/** Applies every object of the plan, in order, and returns them as the API server stored them. */
async function applyPlan(plan: RoutingPlan): Promise<KubernetesObject[]> {
  if (!plan.routed) throw new Error(`not routed: ${plan.message}`);
  for (const obj of plan.apply) await apply(obj);
  const stored = await Promise.all(plan.apply.map((obj) => read(header(obj))));
  return stored.filter((o) => o !== undefined);
}

function stored(objs: KubernetesObject[], kind: string, name: string): KubernetesObject {
  const found = objs.find((o) => o.kind === kind && o.metadata?.name === name);
  if (!found) throw new Error(`${kind}/${name} was not stored`);
  return found;
}

const ns = unique('routing');
/** Traefik's API group: no part of the stack uses it, so this file may remove its CRDs. */
const TRAEFIK_GROUP = 'traefik.io';
const MIDDLEWARE_CRD = `middlewares.${TRAEFIK_GROUP}`;
/** What deleting each Middleware of a domain's routing answered while its CRD was not installed. */
const absentDeletes: { kind: string; notFound: boolean; error: string }[] = [];

/**
 * Deletes every CRD of API group `group` and waits until the API server no longer serves the group.
 * (A group that is still served without the kind answers "Unrecognized API version and kind", not
 * NotFound: the check below is of a cluster without Traefik's CRDs.)
 */
async function removeCrdGroup(group: string): Promise<void> {
  const kc = kubeConfig();
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  const crds = (await ext.listCustomResourceDefinition()).items.filter((c) => c.spec.group === group);
  for (const crd of crds) await ext.deleteCustomResourceDefinition({ name: crd.metadata?.name ?? '' });
  const apis = kc.makeApiClient(ApisApi);
  await waitFor(`API group ${group} to be gone`, async () => {
    const served = (await apis.getAPIVersions()).groups.some((g) => g.name === group);
    return served ? undefined : true;
  });
}

beforeAll(async () => {
  await createProject(ns);
  // An earlier file may have installed them: removed first, so what follows is the same whichever
  // files ran before.
  await removeCrdGroup(TRAEFIK_GROUP);
  // What the controller's delete meets on a cluster without the CRD: NotFound, nothing else.
  const headers = ownedRoutingObjects(domain(ns, 'absent', { hostname: 'absent.example' }));
  for (const h of headers.filter((x) => x.kind === 'Middleware')) {
    const err: unknown = await objects()
      .delete(h)
      .then(() => undefined)
      .catch((e: unknown) => e);
    absentDeletes.push({ kind: h.kind, notFound: isNotFound(err), error: String(err) });
  }
  const names = await installRoutingCrds();
  expect(names).toEqual(expect.arrayContaining([MIDDLEWARE_CRD, 'httproutes.gateway.networking.k8s.io']));
});

describe('the routing CRDs', () => {
  it('deleting a Middleware while its CRD is not installed is a quiet NotFound', () => {
    expect(absentDeletes.length).toBeGreaterThan(0);
    for (const d of absentDeletes) expect(d.notFound, `${d.kind}: ${d.error}`).toBe(true);
  });
});

describe('ingress mode, ingress-nginx', () => {
  it.each(STATUSES)(
    'stores the redirect annotations for %i and the challenge-only Ingress',
    async (status) => {
      const name = `nginx-${status}`;
      const d = domain(ns, name, {
        hostname: `${name}.${ns}.example`,
        redirect: { to: 'example.com', statusCode: status },
      });
      const objs = await applyPlan(desiredRouting(d, { ingressClassName: 'nginx', http01Service }));
      const main = stored(objs, 'Ingress', `portico-${name}`) as V1Ingress;
      expect(main.metadata?.annotations).toMatchObject({
        'nginx.ingress.kubernetes.io/permanent-redirect': 'https://example.com$request_uri',
        'nginx.ingress.kubernetes.io/permanent-redirect-code': String(status),
      });
      expect(main.spec?.tls).toEqual([{ hosts: [d.spec.hostname], secretName: `${name}-tls` }]);
      const acme = stored(objs, 'Ingress', `portico--acme-${name}`) as V1Ingress;
      expect(acme.metadata?.annotations ?? {}).not.toHaveProperty([
        'nginx.ingress.kubernetes.io/permanent-redirect',
      ]);
      expect(acme.spec?.rules?.[0]?.http?.paths.map((p) => p.path)).toEqual([HTTP01_PATH_PREFIX]);
      expect(stored(objs, 'Service', 'portico-acme-http01')).toMatchObject({
        spec: { type: 'ExternalName', externalName: http01Service.fqdn },
      });
    },
  );

  it('drops the redirect annotations when the same domain turns to serving (server-side apply owns them)', async () => {
    const name = 'turns-serving';
    const hostname = `${name}.${ns}.example`;
    await applyPlan(desiredRouting(domain(ns, name, { hostname, redirect: { to: 'example.com' } }), {}));
    const objs = await applyPlan(
      desiredRouting(domain(ns, name, { hostname, service: { name: 'web', port: 80 } }), {}),
    );
    const main = stored(objs, 'Ingress', `portico-${name}`) as V1Ingress;
    expect(main.metadata?.annotations ?? {}).toEqual({});
    expect(main.spec?.rules?.[0]?.http?.paths[0]?.backend.service?.name).toBe('web');
  });
});

describe('ingress mode, Traefik', () => {
  it.each(STATUSES)('stores a Middleware for %i and an Ingress that references it', async (status) => {
    const name = `traefik-${status}`;
    const d = domain(ns, name, {
      hostname: `${name}.${ns}.example`,
      service: { name: 'web', port: 80 },
      redirect: { to: 'example.com', statusCode: status },
    });
    const plan = desiredRouting(d, { ingressFlavor: 'traefik', http01Service });
    const objs = await applyPlan(plan);
    const mw = stored(objs, 'Middleware', `portico-${name}-redirect`) as TraefikMiddleware;
    expect(mw.spec.redirectRegex).toEqual({
      regex: '^https?://[^/]+(.*)$',
      replacement: 'https://example.com${1}',
      permanent: status === 301 || status === 308,
    });
    const main = stored(objs, 'Ingress', `portico-${name}`) as V1Ingress;
    expect(main.metadata?.annotations?.['traefik.ingress.kubernetes.io/router.middlewares']).toBe(
      `${ns}-portico-${name}-redirect@kubernetescrd`,
    );
    expect(plan.routed && plan.message).toMatch(/Note: Traefik cannot send/);
  });

  it("has no status field to set: server-side apply refuses one in Traefik's redirectRegex", async () => {
    const d = domain(ns, 'traefik-status', {
      hostname: `status.${ns}.example`,
      redirect: { to: 'example.com' },
    });
    const mw = desiredRouting(d, { ingressFlavor: 'traefik' }).apply.find((o) => o.kind === 'Middleware');
    if (!mw) throw new Error('no Middleware in the plan');
    const withStatus = {
      ...mw,
      spec: { redirectRegex: { ...(mw as TraefikMiddleware).spec.redirectRegex, statusCode: 308 } },
    };
    const err: unknown = await apply(withStatus).catch((e: unknown) => e);
    expect(String((err as { body?: unknown } | undefined)?.body ?? err)).toMatch(
      /\.spec\.redirectRegex\.statusCode: field not declared in schema/,
    );
  });
});

describe('gateway mode', () => {
  it.each(STATUSES)(
    'stores an HTTPRoute that redirects with %i and keeps the challenge path',
    async (status) => {
      const name = `gw-${status}`;
      const d = domain(ns, name, {
        hostname: `${name}.${ns}.example`,
        redirect: { to: 'example.com', statusCode: status },
      });
      const route = stored(
        await applyPlan(desiredRouting(d, gatewayOptions)),
        'HTTPRoute',
        `portico-${name}`,
      ) as HTTPRoute;
      expect(route.spec.parentRefs).toEqual([
        expect.objectContaining({ name: 'public', namespace: 'infra', sectionName: 'https' }),
        expect.objectContaining({
          group: 'gateway.networking.k8s.io',
          kind: 'ListenerSet',
          name: `portico-${name}`,
        }),
      ]);
      expect(route.spec.hostnames).toEqual([d.spec.hostname]);
      const [challenge, redirect] = route.spec.rules;
      expect(challenge?.matches[0]?.path).toEqual({ type: 'PathPrefix', value: HTTP01_PATH_PREFIX });
      expect(challenge?.backendRefs?.[0]).toMatchObject({ name: 'portico-acme-http01', port: 8089 });
      expect(redirect?.filters?.[0]).toEqual({
        type: 'RequestRedirect',
        requestRedirect: { scheme: 'https', hostname: 'example.com', statusCode: status },
      });
      expect(redirect?.backendRefs ?? []).toEqual([]);
    },
  );

  it("stores the ListenerSet that attaches the domain's Secret to the Gateway (standard-channel schema)", async () => {
    const d = domain(ns, 'gw-tls', { hostname: `tls.${ns}.example`, service: { name: 'web', port: 80 } });
    const set = stored(
      await applyPlan(desiredRouting(d, gatewayOptions)),
      'ListenerSet',
      'portico-gw-tls',
    ) as ListenerSet;
    expect(set.metadata.namespace).toBe(ns);
    expect(set.spec.parentRef).toEqual({
      group: 'gateway.networking.k8s.io',
      kind: 'Gateway',
      name: 'public',
      namespace: 'infra',
    });
    expect(set.spec.listeners).toEqual([
      expect.objectContaining({
        name: 'https',
        hostname: d.spec.hostname,
        port: 443,
        protocol: 'HTTPS',
        tls: { mode: 'Terminate', certificateRefs: [{ group: '', kind: 'Secret', name: 'gw-tls-tls' }] },
      }),
    ]);
  });

  it('stores a serving HTTPRoute with the Service port', async () => {
    const d = domain(ns, 'gw-serve', { hostname: `serve.${ns}.example`, service: { name: 'web', port: 80 } });
    const route = stored(
      await applyPlan(desiredRouting(d, gatewayOptions)),
      'HTTPRoute',
      'portico-gw-serve',
    ) as HTTPRoute;
    expect(route.spec.rules[1]?.backendRefs?.[0]).toMatchObject({ name: 'web', port: 80 });
  });

  it("enforces the CRD's rules that the plan relies on: no backendRefs beside a RequestRedirect", async () => {
    const d = domain(ns, 'gw-bad', { hostname: `bad.${ns}.example`, redirect: { to: 'example.com' } });
    const plan = desiredRouting(d, gatewayOptions);
    const route = plan.apply.find((o) => o.kind === 'HTTPRoute') as HTTPRoute;
    const rules = route.spec.rules.map((r) =>
      r.filters ? { ...r, backendRefs: [{ name: 'web', port: 80 }] } : r,
    );
    const mixed: HTTPRoute = { ...route, spec: { ...route.spec, rules } };
    const err: unknown = await apply(mixed).catch((e: unknown) => e);
    expect(String((err as { body?: unknown } | undefined)?.body ?? err)).toMatch(
      /RequestRedirect filter must not be used together with backendRefs/,
    );
  });
});

describe('owned objects', () => {
  it('a mode switch leaves only the new objects once the stale ones are deleted; removal leaves none', async () => {
    const d = domain(ns, 'switch', { hostname: `switch.${ns}.example`, redirect: { to: 'example.com' } });
    const exists = async (h: ObjectHeader): Promise<string | undefined> =>
      (await read(h)) ? `${h.kind}/${h.metadata.name}` : undefined;
    const present = async (): Promise<string[]> =>
      (await Promise.all(ownedRoutingObjects(d).map(exists))).filter((x) => x !== undefined);

    await applyPlan(desiredRouting(d, { ingressFlavor: 'traefik', http01Service }));
    expect(await present()).toEqual([
      'Ingress/portico-switch',
      'Ingress/portico--acme-switch',
      'Middleware/portico-switch-redirect',
    ]);

    const gatewayPlan = desiredRouting(d, gatewayOptions);
    await applyPlan(gatewayPlan);
    for (const h of staleRoutingObjects(gatewayPlan)) await remove(h);
    await waitFor('only the HTTPRoute and the ListenerSet left', async () => {
      const now = await present();
      return now.join() === 'HTTPRoute/portico-switch,ListenerSet/portico-switch' ? now : undefined;
    });

    for (const h of ownedRoutingObjects(d)) await remove(h);
    await waitFor('nothing left', async () => ((await present()).length === 0 ? true : undefined));
    // The shared challenge Service stays for the namespace's other domains.
    expect(
      await read({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'portico-acme-http01', namespace: ns },
      }),
    ).toBeDefined();
  });
});
