/**
 * Tenant isolation, Gateway API routes (docs/reliability.md, "Tenant isolation: threat model";
 * docs/routing.md, "A routing class of Portico's own"): in gateway mode the chart's default
 * `admissionPolicy.routingClass` renders templates/gateway-routes-admission.yaml, which reserves
 * the Gateways of `routing.gateway.parentRefs` to the controller. Against the REAL API server with
 * the Gateway API CRDs (standard channel): the chart is rendered with `helm template` (gateway mode,
 * defaults otherwise), its policies applied, and a tenant (a user impersonated with `--as`, allowed by
 * RBAC to write HTTPRoutes and ListenerSets in its own namespace) tries to attach to the Gateway.
 * The same policy reserves the wildcard ListenerSet `portico-apps-domain` of the release's namespace
 * (the projects' auto-generated subdomains). What is asserted is the API server's admission answer
 * (dry-run creates). The policies and RBAC are removed after this file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProject, unique, waitFor } from './support/cluster.js';
import { kubectl, kubectlObjects, renderChartTemplate, type RunResult } from './support/helm.js';
import { installRoutingCrds } from './support/routing-crds.js';

const GATEWAY_NS = 'infra';
const GATEWAY = 'public';
const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
const TENANT = 'tenant-mallory@example.com';
const RBAC_NAME = 'e2e-tenant-gateway-routes';

let policies = '';

function dryRunCreate(objects: unknown[], user: string): Promise<RunResult> {
  return kubectlObjects(['create', '--dry-run=server'], objects, user);
}

function httpRoute(namespace: string, name: string, parentRefs: Record<string, string>[]): unknown {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, namespace },
    spec: {
      parentRefs,
      hostnames: ['www.victim.example'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/login' } }],
          backendRefs: [{ name: 'mallory', port: 80 }],
        },
      ],
    },
  };
}

function listenerSet(namespace: string, name: string): unknown {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'ListenerSet',
    metadata: { name, namespace },
    spec: {
      parentRef: { name: GATEWAY, namespace: GATEWAY_NS },
      listeners: [{ name: 'http', port: 80, protocol: 'HTTP', hostname: 'www.victim.example' }],
    },
  };
}

beforeAll(async () => {
  await installRoutingCrds();
  policies = await renderChartTemplate('portico', RELEASE_NAMESPACE, 'gateway-routes-admission.yaml', [
    'platform.cnameTarget=sites.portico.test',
    'routing.mode=gateway',
    `routing.gateway.parentRefs={${GATEWAY_NS}/${GATEWAY}:https}`,
  ]);
  const applied = await kubectl(['apply', '--server-side', '-f', '-'], { input: policies });
  expect(applied.code, applied.stderr).toBe(0);
  const rbac = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RBAC_NAME },
      rules: [
        {
          apiGroups: ['gateway.networking.k8s.io'],
          resources: ['httproutes', 'listenersets'],
          verbs: ['get', 'create', 'update', 'patch', 'delete'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: RBAC_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RBAC_NAME },
      subjects: [
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT },
        { kind: 'ServiceAccount', name: 'portico-controller', namespace: RELEASE_NAMESPACE },
      ],
    },
  ];
  const bound = await kubectlObjects(['apply'], rbac);
  expect(bound.code, bound.stderr).toBe(0);
  const probeNs = unique('gw-probe');
  await createProject(probeNs);
  await waitFor('the policy to refuse an HTTPRoute on the Gateway from the tenant', async () => {
    const probe = httpRoute(probeNs, 'probe', [{ name: GATEWAY, namespace: GATEWAY_NS }]);
    return (await dryRunCreate([probe], TENANT)).code === 0 ? undefined : true;
  });
}, 420_000);

afterAll(async () => {
  if (policies !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policies });
  await kubectl(['delete', '--ignore-not-found', 'clusterrolebinding,clusterrole', RBAC_NAME]);
}, 60_000);

describe("a tenant's Gateway API routes on the Gateway Portico names, with the chart's defaults in gateway mode", () => {
  it('refuses an HTTPRoute or a ListenerSet attached to the Gateway, by default or explicit group and kind, naming the Gateway and the controller', async () => {
    const team = unique('gw-team');
    await createProject(team);
    const cases: [string, unknown][] = [
      ['HTTPRoute', httpRoute(team, 'plain', [{ name: GATEWAY, namespace: GATEWAY_NS }])],
      [
        'HTTPRoute with group, kind and sectionName',
        httpRoute(team, 'explicit', [
          {
            group: 'gateway.networking.k8s.io',
            kind: 'Gateway',
            name: GATEWAY,
            namespace: GATEWAY_NS,
            sectionName: 'http',
          },
        ]),
      ],
      [
        'HTTPRoute with a second parent',
        httpRoute(team, 'second', [
          { name: 'elsewhere', namespace: GATEWAY_NS },
          { name: GATEWAY, namespace: GATEWAY_NS },
        ]),
      ],
      ['ListenerSet', listenerSet(team, 'theirs')],
    ];
    for (const [what, object] of cases) {
      const result = await dryRunCreate([object], TENANT);
      expect(result.code, what).not.toBe(0);
      expect(result.stderr, what).toMatch(
        new RegExp(
          `${TENANT} may not create the (HTTPRoute|ListenerSet) ${team}/[a-z]+ attached to Gateway ${GATEWAY_NS}/${GATEWAY}`,
        ),
      );
      expect(result.stderr, what).toContain(`only the Portico controller (${CONTROLLER})`);
    }
  });

  it("refuses a tenant's HTTPRoute on the wildcard ListenerSet of the auto-generated subdomains, and admits the controller's", async () => {
    const team = unique('gw-apps');
    await createProject(team);
    const apps = {
      group: 'gateway.networking.k8s.io',
      kind: 'ListenerSet',
      name: 'portico-apps-domain',
      namespace: RELEASE_NAMESPACE,
    };
    const tenant = await dryRunCreate([httpRoute(team, 'grab', [apps])], TENANT);
    expect(tenant.code).not.toBe(0);
    expect(tenant.stderr).toContain(
      `${TENANT} may not create the HTTPRoute ${team}/grab attached to ListenerSet ${RELEASE_NAMESPACE}/portico-apps-domain`,
    );
    expect(tenant.stderr).toContain(`only the Portico controller (${CONTROLLER})`);
    const byController = await dryRunCreate([httpRoute(team, 'portico-subdomain-site', [apps])], CONTROLLER);
    expect(byController.code, byController.stderr).toBe(0);
    // A ListenerSet of the same name in the tenant's own namespace is not the wildcard's.
    const own = await dryRunCreate([httpRoute(team, 'own', [{ ...apps, namespace: team }])], TENANT);
    expect(own.code, own.stderr).toBe(0);
  });

  it("admits the tenant's HTTPRoute on another Gateway or its own namespace's, and the controller's on Portico's", async () => {
    const team = unique('gw-other');
    await createProject(team);
    const elsewhere = await dryRunCreate(
      [httpRoute(team, 'elsewhere', [{ name: 'internal', namespace: GATEWAY_NS }])],
      TENANT,
    );
    expect(elsewhere.code, elsewhere.stderr).toBe(0);
    // Same name, the tenant's own namespace (no namespace in the parentRef): not Portico's Gateway.
    const own = await dryRunCreate([httpRoute(team, 'own', [{ name: GATEWAY }])], TENANT);
    expect(own.code, own.stderr).toBe(0);
    const byController = await dryRunCreate(
      [httpRoute(team, 'portico-www', [{ name: GATEWAY, namespace: GATEWAY_NS }])],
      CONTROLLER,
    );
    expect(byController.code, byController.stderr).toBe(0);
  });
});
