/**
 * The chart's admission policy on HostnameClaims (templates/hostnameclaim-admission.yaml), on the
 * real kube-apiserver (v1.37, admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy): rendered
 * with `helm template`, applied, and then
 *
 *   - the sandbox's admin (system:masters, which RBAC never limits) may not create, update or
 *     delete a HostnameClaim, and is told why;
 *   - the controller's ServiceAccount (impersonated, with RBAC to write claims) may.
 *
 * The stack's own operator runs with the admin credentials, so while the policy is in place it
 * cannot write claims either: the policy is removed after this file, and nothing else runs meanwhile
 * (e2e files run one at a time).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostnameClaim, unique, waitFor } from './support/cluster.js';
import { kubectl, kubectlObjects, renderChartTemplate, type RunResult } from './support/helm.js';

const NAMESPACE = 'portico-admission';
const CONTROLLER = `system:serviceaccount:${NAMESPACE}:portico-controller`;
const RBAC_NAME = 'e2e-hostnameclaim-writer';
const existing = `${unique('kept')}.tenant.example`;
let policy = '';

/** `kubectl create --dry-run=server` of a claim of `hostname`, as `user` (default: the admin). */
function createClaim(hostname: string, user?: string): Promise<RunResult> {
  const claim = hostnameClaim(hostname, { namespace: 'shop', name: 'www', uid: 'uid-1' });
  return kubectl(['create', '--dry-run=server', '-f', '-', ...(user ? ['--as', user] : [])], {
    input: JSON.stringify(claim),
  });
}

beforeAll(async () => {
  policy = await renderChartTemplate('portico', NAMESPACE, 'hostnameclaim-admission.yaml');
  // A claim made before the policy, to try to update and delete.
  const made = await kubectl(['create', '-f', '-'], {
    input: JSON.stringify(hostnameClaim(existing, { namespace: 'shop', name: 'www', uid: 'uid-1' })),
  });
  expect(made.code, made.stderr).toBe(0);
  // RBAC for the controller's ServiceAccount, as the chart's ClusterRole gives it (the policy
  // comes after RBAC: without a right to create, the API server would refuse before it).
  const rbac = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RBAC_NAME },
      rules: [
        { apiGroups: ['portico.dev'], resources: ['hostnameclaims'], verbs: ['get', 'create', 'delete'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: RBAC_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RBAC_NAME },
      subjects: [{ kind: 'ServiceAccount', name: 'portico-controller', namespace: NAMESPACE }],
    },
  ];
  const applied = await kubectlObjects(['apply'], rbac);
  expect(applied.code, applied.stderr).toBe(0);
  const installed = await kubectl(['apply', '-f', '-'], { input: policy });
  expect(installed.code, installed.stderr).toBe(0);
  // The API server loads a new policy within a moment.
  await waitFor('the policy to refuse the admin', async () => {
    const result = await createClaim(`${unique('probe')}.tenant.example`);
    return result.code === 0 ? undefined : true;
  });
}, 120_000);

afterAll(async () => {
  await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policy });
  await waitFor('the admin to write claims again', async () => {
    const result = await createClaim(`${unique('probe')}.tenant.example`);
    return result.code === 0 ? true : undefined;
  });
  await kubectl(['delete', '--ignore-not-found', 'hostnameclaim', existing]);
  await kubectl(['delete', '--ignore-not-found', 'clusterrolebinding,clusterrole', RBAC_NAME]);
}, 120_000);

describe('the HostnameClaim admission policy', () => {
  it('refuses a claim created by the cluster admin, saying who may write claims', async () => {
    const hostname = `${unique('forged')}.tenant.example`;
    const result = await createClaim(hostname);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`portico-admin may not create the HostnameClaim ${hostname}`);
    expect(result.stderr).toContain(`written only by the Portico controller (${CONTROLLER})`);
  });

  it('refuses the admin deleting or changing a claim', async () => {
    const deleted = await kubectl(['delete', '--dry-run=server', 'hostnameclaim', existing]);
    expect(deleted.code).not.toBe(0);
    expect(deleted.stderr).toContain(`may not delete the HostnameClaim ${existing}`);
    const labelled = await kubectl(['label', '--dry-run=server', 'hostnameclaim', existing, 'x=y']);
    expect(labelled.code).not.toBe(0);
    expect(labelled.stderr).toContain(`may not update the HostnameClaim ${existing}`);
  });

  it("lets the controller's ServiceAccount create and delete claims", async () => {
    const created = await createClaim(`${unique('ok')}.tenant.example`, CONTROLLER);
    expect(created.code, created.stderr).toBe(0);
    const deleted = await kubectl([
      'delete',
      '--dry-run=server',
      'hostnameclaim',
      existing,
      '--as',
      CONTROLLER,
    ]);
    expect(deleted.code, deleted.stderr).toBe(0);
  });
});
