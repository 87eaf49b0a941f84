/**
 * Tenant isolation, routes (docs/reliability.md, "Tenant isolation: threat model"): with the chart's
 * defaults, a tenant's own Ingress or HTTPProxy cannot reach a customer's hostname that Portico
 * routes. Against REAL parts: the API server with the chart's admission policies as rendered in
 * deploy/portico-admission.yaml (scripts/render-deploy.sh, the chart's default values), a Contour
 * started here with `--ingress-class-name portico` (the chart's default `routing.ingress.className`,
 * served alone, as docs/routing.md "A routing class of Portico's own" asks of the platform), and an
 * operator of this file's own run as the chart's controller ServiceAccount (a TokenRequest token)
 * with `--ingress-flavor contour --ingress-class portico`.
 *
 * The tenant is a user impersonated with `--as`, bound in its own namespace to the rules of the
 * built-in `edit` role (`system:aggregate-to-edit`: the API server here runs no controller-manager to
 * aggregate them), the chart's tenant roles (`portico-edit`, `portico-view` from deploy/portico.yaml)
 * and a Role for Contour's HTTPProxies (a platform letting teams write them grants that). The stack's
 * shared Contour (no class: it serves routes of no class, as a cluster's shared ingress does) keeps
 * running beside. Every assertion reads what the real components wrote: admission answers, the
 * Contours' HTTPProxy statuses and xDS (`contour cli rds`), the operator's conditions.
 */
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import type { HTTPProxy } from '../../src/data-planes/contour/httpproxy.js';
import {
  ADMISSION_MANIFEST,
  SANDBOX_INGRESS_CLASS as CLASS,
  admissionManifests,
  writeControllerKubeconfig,
} from '../../src/sandbox/admission.js';
import { startContour, type StartedContour } from '../../src/data-planes/contour/sandbox-process.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { stopProcess } from '../../src/sandbox/processes.js';
import {
  createCustomDomain,
  createProject,
  dns,
  domainCondition,
  getCustomDomain,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { contourXdsAddr, virtualHostsFor, readProxy, matchedPath } from './support/contour.js';
import { kubectl, kubectlObjects, toolsBin } from './support/helm.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const EDGE = 'contour-portico';
const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
const TENANT = 'tenant-mallory@example.com';
const TENANT_RBAC = 'e2e-tenant-routes';
const HTTP01_SERVICE = 'portico-controller.portico-system.svc.cluster.local:8089';
const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'portico' };

const paths = sandboxPaths(sandbox.sandboxDir);
let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let edge: StartedContour | undefined;
let policies = '';
let controllerKubeconfig = '';
let chartTenantRoles: unknown[] = [];

interface RouteOptions {
  readonly spec?: string;
  readonly annotation?: string;
  readonly labels?: Record<string, string>;
}

function tenantProxy(namespace: string, name: string, fqdn: string, o: RouteOptions = {}): HTTPProxy {
  return {
    apiVersion: 'projectcontour.io/v1',
    kind: 'HTTPProxy',
    metadata: {
      name,
      namespace,
      ...(o.labels ? { labels: o.labels } : {}),
      ...(o.annotation ? { annotations: { 'projectcontour.io/ingress.class': o.annotation } } : {}),
    },
    spec: {
      ...(o.spec ? { ingressClassName: o.spec } : {}),
      virtualhost: { fqdn },
      // No TLS: the port-80 route of the hostname is what such a proxy would take.
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'mallory', port: 80 }] }],
    },
  };
}

function tenantIngress(namespace: string, name: string, host: string, o: RouteOptions = {}): unknown {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name,
      namespace,
      ...(o.labels ? { labels: o.labels } : {}),
      ...(o.annotation ? { annotations: { 'kubernetes.io/ingress.class': o.annotation } } : {}),
    },
    spec: {
      ...(o.spec ? { ingressClassName: o.spec } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              {
                path: '/login',
                pathType: 'Prefix',
                backend: { service: { name: 'mallory', port: { number: 80 } } },
              },
            ],
          },
        },
      ],
    },
  };
}

/** The tenant's RBAC in `namespace` (see the file's comment). */
function tenantRbac(namespace: string): unknown[] {
  const bind = (name: string, kind: 'ClusterRole' | 'Role', role: string): unknown => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name: role },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
  });
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: TENANT_RBAC, namespace },
      rules: [
        {
          apiGroups: ['projectcontour.io'],
          resources: ['httpproxies'],
          verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'],
        },
      ],
    },
    bind(`${TENANT_RBAC}-httpproxies`, 'Role', TENANT_RBAC),
    bind(`${TENANT_RBAC}-edit`, 'ClusterRole', 'system:aggregate-to-edit'),
    bind(`${TENANT_RBAC}-portico-edit`, 'ClusterRole', 'portico-edit'),
    bind(`${TENANT_RBAC}-portico-view`, 'ClusterRole', 'portico-view'),
  ];
}

/** A tenant's namespace with its RBAC; `kubectl auth can-i` shows the tenant may write both kinds. */
async function tenantNamespace(prefix: string): Promise<string> {
  const ns = unique(prefix);
  await createProject(ns);
  const applied = await kubectlObjects(['apply'], tenantRbac(ns));
  expect(applied.code, applied.stderr).toBe(0);
  for (const resource of [
    'ingresses.networking.k8s.io',
    'httpproxies.projectcontour.io',
    'customdomains.portico.dev',
  ]) {
    const can = await kubectl(['auth', 'can-i', 'create', resource, '-n', ns, '--as', TENANT]);
    expect(can.stdout.trim(), `${TENANT} may create ${resource} in ${ns}`).toBe('yes');
  }
  return ns;
}

beforeAll(async () => {
  contourXdsAddr(); // throws unless the stack runs Contour
  const deploy = await readFile(path.join(REPO, 'deploy', 'portico.yaml'), 'utf8');
  chartTenantRoles = parseAllDocuments(deploy)
    .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string } } | null)
    .filter(
      (o) => o?.kind === 'ClusterRole' && ['portico-edit', 'portico-view'].includes(o.metadata?.name ?? ''),
    );
  expect(chartTenantRoles).toHaveLength(2);
  const roles = await kubectlObjects(['apply', '--server-side'], chartTenantRoles);
  expect(roles.code, roles.stderr).toBe(0);

  const file = path.join(REPO, ADMISSION_MANIFEST);
  const manifests = admissionManifests(await readFile(file, 'utf8'), file);
  policies = manifests.map((m) => `---\n${stringify(m)}`).join('');
  expect(policies).toContain(CONTROLLER);
  const installed = await kubectl(['apply', '--server-side', '-f', '-'], { input: policies });
  expect(installed.code, installed.stderr).toBe(0);

  const ports = await pickFreePorts({ xds: 'tcp', metrics: 'tcp', health: 'tcp', debug: 'tcp' });
  const contourBin = path.join(sandbox.toolsBinDir, 'contour');
  edge = await startContour(paths, contourBin, sandbox.kubeconfig, ports, RELEASE_NAMESPACE, {
    name: EDGE,
    ingressClassName: CLASS,
  });
  controllerKubeconfig = await writeControllerKubeconfig(
    { binary: `${await toolsBin()}/kubectl`, kubeconfig: sandbox.kubeconfig },
    paths,
    RELEASE_NAMESPACE,
  );
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'tenant-isolation-routes', {
    '--kubeconfig': controllerKubeconfig,
    '--ingress-flavor': 'contour',
    '--ingress-class': CLASS,
    '--data-plane-acknowledgement': 'true',
    '--http01-service': HTTP01_SERVICE,
  });
}, 240_000);

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    // Before the stack's operator (the admin) comes back: the claims policy names the chart's
    // controller alone.
    async () => {
      if (policies !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policies });
    },
    () => restartStackController(stack),
    async () => {
      if (edge) await stopProcess(paths, EDGE);
    },
    async () => {
      if (chartTenantRoles.length > 0)
        await kubectlObjects(['delete', '--ignore-not-found'], chartTenantRoles);
    },
    () =>
      kubectl(['delete', '--ignore-not-found', 'clusterrolebinding', 'portico-sandbox-portico-controller']),
  );
}, 120_000);

describe("a tenant's routes for a claimed hostname, with the chart's default routing class and admission", () => {
  let victim = '';
  let hostname = '';
  let redirectHost = '';

  it("routes the victim's domain and its redirect through the class's Contour: both Ready", async () => {
    victim = unique('ti-victim');
    hostname = `www.${victim}.example`;
    redirectHost = `old.${victim}.example`;
    await createProject(victim);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await dns.setCname(redirectHost, sandbox.platformCnameTarget);
    await createCustomDomain(victim, 'www', { hostname, service: { name: 'web', port: 80 } });
    await waitForCondition(victim, 'www', 'Ready', 'True', 'Live', 180_000);
    await createCustomDomain(victim, 'old', { hostname: redirectHost, redirect: { to: hostname } });
    await waitForCondition(victim, 'old', 'Ready', 'True', undefined, 180_000);
    const proxy = await readProxy(victim, 'portico-www');
    expect(proxy.spec.ingressClassName).toBe(CLASS);
    await waitFor(`${hostname} in the class's Contour's RDS`, async () =>
      (await virtualHostsFor(hostname, edge?.xdsAddr)).some((h) => h.routeConfig === `https/${hostname}`)
        ? true
        : undefined,
    );
  });

  it("refuses the tenant's Ingress and HTTPProxy of Portico's class, labelled managed-by portico or not, naming the rule and the object", async () => {
    const team = await tenantNamespace('ti-class');
    const cases: [string, unknown][] = [
      ['HTTPProxy, spec.ingressClassName', tenantProxy(team, 'by-field', hostname, { spec: CLASS })],
      ['HTTPProxy, annotation', tenantProxy(team, 'by-annotation', hostname, { annotation: CLASS })],
      ['HTTPProxy, labelled', tenantProxy(team, 'labelled', hostname, { spec: CLASS, labels: MANAGED_BY })],
      ['Ingress, spec.ingressClassName', tenantIngress(team, 'by-field', hostname, { spec: CLASS })],
      ['Ingress, annotation', tenantIngress(team, 'by-annotation', hostname, { annotation: CLASS })],
      ['Ingress, labelled', tenantIngress(team, 'labelled', hostname, { spec: CLASS, labels: MANAGED_BY })],
    ];
    for (const [what, object] of cases) {
      const result = await kubectlObjects(['create'], [object], TENANT);
      expect(result.code, what).not.toBe(0);
      expect(result.stderr, what).toMatch(
        new RegExp(
          `${TENANT} may not create the (HTTPProxy|Ingress) ${team}/[a-z-]+ of ingress class ${CLASS}`,
        ),
      );
      expect(result.stderr, what).toContain(`only the Portico controller (${CONTROLLER})`);
    }
  });

  it("leaves the victim Live and its redirect Ready when the tenant's routes have another class or none, labelled managed-by portico or not: nothing of them in the class's Contour", async () => {
    const team = await tenantNamespace('ti-other');
    const objects = [
      tenantProxy(team, 'classless', hostname),
      tenantIngress(team, 'classless', hostname),
      tenantProxy(team, 'classless-labelled', redirectHost, { labels: MANAGED_BY }),
      tenantIngress(team, 'classless-labelled', hostname, { labels: MANAGED_BY }),
      tenantProxy(team, 'contour', hostname, { spec: 'contour' }),
      tenantIngress(team, 'contour-labelled', redirectHost, { spec: 'contour', labels: MANAGED_BY }),
    ];
    const written = await kubectlObjects(['create'], objects, TENANT);
    expect(written.code, written.stderr).toBe(0);
    // The shared Contour (every classless route) takes the tenant's: the moment the class's Contour
    // would have acted too, had it counted them.
    await waitFor("the shared Contour's status on the tenant's classless HTTPProxy", async () =>
      (await readProxy(team, 'classless')).status?.currentStatus !== undefined ? true : undefined,
    );
    // A barrier for the class's Contour: an HTTPProxy of the class written after the tenant's (by the
    // controller's identity, which the policy admits) shows in its RDS only once it has rebuilt its
    // configuration from a cache that holds everything written before.
    const barrierHost = `${unique('barrier')}.example`;
    const barrier = await kubectl(['create', '-f', '-'], {
      kubeconfig: controllerKubeconfig,
      input: stringify(tenantProxy(team, 'barrier', barrierHost, { spec: CLASS })),
    });
    expect(barrier.code, barrier.stderr).toBe(0);
    await waitFor(`the barrier ${barrierHost} in the class's Contour's RDS`, async () =>
      (await virtualHostsFor(barrierHost, edge?.xdsAddr)).length > 0 ? true : undefined,
    );
    for (const host of [hostname, redirectHost]) {
      const hosts = await virtualHostsFor(host, edge?.xdsAddr);
      expect(hosts.length, host).toBeGreaterThan(0);
      for (const vhost of hosts) {
        expect(vhost.routes.map(matchedPath), `${host} ${vhost.routeConfig}`).not.toContain('/login');
        for (const route of vhost.routes) {
          expect(route.route?.cluster ?? '', `${host} ${vhost.routeConfig}`).not.toContain(`${team}/`);
        }
      }
    }
    const ours = await readProxy(victim, 'portico-www');
    expect(ours.status?.currentStatus).toBe('valid');
    const www = await getCustomDomain(victim, 'www');
    expect(domainCondition(www, 'Ready')).toMatchObject({ status: 'True', reason: 'Live' });
    const old = await getCustomDomain(victim, 'old');
    expect(domainCondition(old, 'Ready').status).toBe('True');
  });
});
