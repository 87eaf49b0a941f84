/**
 * Backends named by DNS name or address (docs/routing.md, "ExternalName Services"; docs/ratelimits.md,
 * "Who may name a policy"), as a hostile tenant would try them, against the REAL kube-apiserver with
 * the chart's admission policy `admissionPolicy.externalNameServices` (rendered with `helm template`,
 * chart defaults: no extra allowed users) and the stack's operator restarted under the chart's
 * controller identity.
 *
 * The attack: with Contour's `enableExternalNameService` on (which Portico asks for), a tenant's own
 * ExternalName Service naming the rate-limit service and an h2c route to it would put that gRPC
 * service on the internet, called from the Envoy's address its NetworkPolicy admits. The tenant is a
 * user impersonated with `--as`, bound in its own namespace to the chart's tenant roles
 * (templates/tenant-rbac.yaml) and to a Role for Services and Envoy Gateway Backends (what a platform
 * gives its tenants: the built-in `edit` role has Services; Envoy Gateway adds Backends to none).
 *
 *   - its ExternalName Service (created, or its ClusterIP Service changed into one, or an existing
 *     one's externalName changed) and its Backend (checked against Envoy Gateway v1.9.1's CRD from
 *     the tools' bundle) are refused with the policy's message; its ClusterIP Service is admitted,
 *     and so is an update of an ExternalName Service made before the policy that leaves the spec as
 *     it was;
 *   - the operator, running as the chart's controller ServiceAccount, still writes the ExternalName
 *     Service `portico-acme-http01` of a CustomDomain's namespace and takes the domain to Ready over
 *     HTTP-01.
 *
 * The stack's operator runs with the admin's credentials, which the policy refuses: it is stopped
 * while this file runs and started again afterwards, after the policy is removed with the tenant
 * RBAC, the controller's binding and the Backend CRD (when this file installed it).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { FIELD_MANAGER } from '../../src/api/customdomain.js';
import { writeControllerKubeconfig } from '../../src/sandbox/admission.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import {
  createCustomDomain,
  createProject,
  dns,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { kubectl, kubectlObjects, parseManifests, renderChartTemplate, toolsBin } from './support/helm.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
const TENANT = 'tenant-eve@example.com';
const RBAC_NAME = 'e2e-tenant-backends';
const BACKEND_CRD = 'backends.gateway.envoyproxy.io';
const HTTP01_SERVICE = `portico-controller.${RELEASE_NAMESPACE}.svc.cluster.local:8089`;
/** What the attack would point at: the chart's rate-limit Service (release `portico`). */
const RATELIMIT_FQDN = `portico-ratelimit.${RELEASE_NAMESPACE}.svc.cluster.local`;

const paths = sandboxPaths(sandbox.sandboxDir);
const tenant = unique('en-tenant');
let policy = '';
let tenantRbac = '';
let installedCrd = false;
let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

/** An ExternalName Service `name` of the tenant's namespace, port 8081 (the rate-limit gRPC port). */
function externalNameService(name: string, externalName: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: tenant },
    spec: { type: 'ExternalName', externalName, ports: [{ name: 'grpc', port: 8081 }] },
  };
}

/** A ClusterIP Service `name` of the tenant's namespace selecting its own Pods. */
function clusterIpService(name: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: tenant },
    spec: { selector: { app: name }, ports: [{ name: 'http', port: 80 }] },
  };
}

/** Installs Envoy Gateway's Backend CRD (from the tools' bundle) when the stack lacks it. */
async function ensureBackendCrd(): Promise<void> {
  if ((await kubectl(['get', 'crd', BACKEND_CRD])).code === 0) return;
  const bundle = await readFile(path.join(await toolsBin(), 'envoy-gateway-crds.yaml'), 'utf8');
  const crd = parseAllDocuments(bundle)
    .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string } } | null)
    .find((d) => d?.kind === 'CustomResourceDefinition' && d.metadata?.name === BACKEND_CRD);
  if (crd === undefined) throw new Error(`no ${BACKEND_CRD} in the tools' envoy-gateway-crds.yaml`);
  const applied = await kubectlObjects(['apply', '--server-side'], [crd]);
  expect(applied.code, applied.stderr).toBe(0);
  installedCrd = true;
  const established = await kubectl(['wait', '--for=condition=Established', `crd/${BACKEND_CRD}`]);
  expect(established.code, established.stderr).toBe(0);
}

/** The tenant's Role (Services, Backends) and its bindings, to that Role and the chart's tenant roles. */
function rbacObjects(tenantRoles: string[]): unknown[] {
  const binding = (name: string, kind: 'Role' | 'ClusterRole') => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `${RBAC_NAME}-${name}`, namespace: tenant },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
  });
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: RBAC_NAME, namespace: tenant },
      rules: [
        { apiGroups: [''], resources: ['services'], verbs: ['get', 'create', 'update', 'patch', 'delete'] },
        {
          apiGroups: ['gateway.envoyproxy.io'],
          resources: ['backends'],
          verbs: ['get', 'create', 'update', 'patch', 'delete'],
        },
      ],
    },
    binding(RBAC_NAME, 'Role'),
    ...tenantRoles.map((role) => binding(role, 'ClusterRole')),
  ];
}

beforeAll(async () => {
  await ensureBackendCrd();
  await createProject(tenant);
  tenantRbac = await renderChartTemplate('tenancy', RELEASE_NAMESPACE, 'tenant-rbac.yaml');
  const tenantRoles = parseManifests(tenantRbac)
    .filter((m) => m.kind === 'ClusterRole')
    .map((m) => m.metadata.name);
  expect(tenantRoles).toHaveLength(2);
  const rbac = await kubectl(['apply', '-f', '-'], { input: tenantRbac });
  expect(rbac.code, rbac.stderr).toBe(0);
  const bound = await kubectlObjects(['apply'], rbacObjects(tenantRoles));
  expect(bound.code, bound.stderr).toBe(0);
  // Made before the policy, as a tenant's existing ExternalName Service would have been.
  const existing = await kubectlObjects(
    ['create'],
    [externalNameService('legacy', 'api.example.com')],
    TENANT,
  );
  expect(existing.code, existing.stderr).toBe(0);

  // The operator under the chart's controller identity, before the policy refuses the admin's.
  const controllerKubeconfig = await writeControllerKubeconfig(
    { binary: `${await toolsBin()}/kubectl`, kubeconfig: sandbox.kubeconfig },
    paths,
    RELEASE_NAMESPACE,
  );
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'tenant-isolation-externalname', {
    '--kubeconfig': controllerKubeconfig,
    '--http01-service': HTTP01_SERVICE,
  });

  policy = await renderChartTemplate('portico', RELEASE_NAMESPACE, 'externalname-admission.yaml');
  expect(policy).toContain(CONTROLLER);
  const installed = await kubectl(['apply', '-f', '-'], { input: policy });
  expect(installed.code, installed.stderr).toBe(0);
  await waitFor('the policy to refuse an ExternalName Service', async () => {
    const probe = externalNameService('probe', RATELIMIT_FQDN);
    const result = await kubectlObjects(['create', '--dry-run=server'], [probe], TENANT);
    return result.code !== 0 && result.stderr.includes('may not create') ? true : undefined;
  });
}, 240_000);

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    // Before the stack's operator (the admin) comes back: the policy names the chart's controller alone.
    async () => {
      if (policy !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policy });
    },
    () => restartStackController(stack),
    async () => {
      if (tenantRbac !== '')
        await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: tenantRbac });
    },
    () =>
      kubectl(['delete', '--ignore-not-found', 'clusterrolebinding', 'portico-sandbox-portico-controller']),
    async () => {
      if (installedCrd) await kubectl(['delete', '--ignore-not-found', 'crd', BACKEND_CRD]);
    },
  );
}, 120_000);

describe("a tenant's backends named by DNS name or address", () => {
  it('refuses its ExternalName Service to the rate-limit service, created or made from its ClusterIP Service, naming the rule and the object', async () => {
    const created = await kubectlObjects(['create'], [externalNameService('steal', RATELIMIT_FQDN)], TENANT);
    expect(created.code).not.toBe(0);
    expect(created.stderr).toContain(
      `${TENANT} may not create the ExternalName Service ${tenant}/steal (externalName ${RATELIMIT_FQDN})`,
    );
    expect(created.stderr).toContain(`only the Portico controller (${CONTROLLER})`);
    expect(created.stderr).toContain('admissionPolicy.externalNameServices.extraAllowedUsernames');

    const own = await kubectlObjects(['create'], [clusterIpService('own')], TENANT);
    expect(own.code, own.stderr).toBe(0);
    const turned = await kubectl([
      'patch',
      'service',
      'own',
      '-n',
      tenant,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { type: 'ExternalName', externalName: RATELIMIT_FQDN, selector: null } }),
      '--as',
      TENANT,
    ]);
    expect(turned.code).not.toBe(0);
    expect(turned.stderr).toContain(`${TENANT} may not update the ExternalName Service ${tenant}/own`);
  });

  it('admits its ClusterIP Service, and an update of its ExternalName Service made before the policy that leaves the spec as it was, but not one that changes its name', async () => {
    const plain = await kubectlObjects(['create'], [clusterIpService('web-2')], TENANT);
    expect(plain.code, plain.stderr).toBe(0);
    const labelled = await kubectl([
      'label',
      'service',
      'legacy',
      '-n',
      tenant,
      'team=payments',
      '--as',
      TENANT,
    ]);
    expect(labelled.code, labelled.stderr).toBe(0);
    const renamed = await kubectl([
      'patch',
      'service',
      'legacy',
      '-n',
      tenant,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { externalName: RATELIMIT_FQDN } }),
      '--as',
      TENANT,
    ]);
    expect(renamed.code).not.toBe(0);
    expect(renamed.stderr).toContain(
      `${TENANT} may not update the ExternalName Service ${tenant}/legacy (externalName ${RATELIMIT_FQDN})`,
    );
  });

  it('refuses its Envoy Gateway Backend with an FQDN endpoint, naming the rule and the object', async () => {
    const backend = {
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'Backend',
      metadata: { name: 'steal', namespace: tenant },
      spec: { endpoints: [{ fqdn: { hostname: RATELIMIT_FQDN, port: 8081 } }] },
    };
    const result = await kubectlObjects(['create'], [backend], TENANT);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`${TENANT} may not create the Envoy Gateway Backend ${tenant}/steal`);
    expect(result.stderr).toContain(`only the Portico controller (${CONTROLLER})`);
  });
});

describe("the controller's challenge Service under the policy", () => {
  it('is written as the ExternalName Service portico-acme-http01 by the controller, and the domain gets Ready over HTTP-01', async () => {
    const project = unique('en-domain');
    const hostname = `www.${project}.example`;
    await createProject(project);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(project, 'www', { hostname, service: { name: 'web', port: 80 } });
    await waitForCondition(project, 'www', 'Ready', 'True', undefined, 120_000);
    const challenge = await kube().core.readNamespacedService({
      namespace: project,
      name: 'portico-acme-http01',
    });
    expect(challenge.spec?.type).toBe('ExternalName');
    expect(challenge.spec?.externalName).toBe(HTTP01_SERVICE.split(':')[0]);
    expect(challenge.metadata?.managedFields?.map((f) => f.manager)).toContain(FIELD_MANAGER);
    // The policy is still in place: the tenant is still refused.
    const probe = await kubectlObjects(
      ['create', '--dry-run=server'],
      [externalNameService('late', RATELIMIT_FQDN)],
      TENANT,
    );
    expect(probe.code).not.toBe(0);
    expect(probe.stderr).toContain('may not create the ExternalName Service');
  });
});
