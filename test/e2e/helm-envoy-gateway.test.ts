/**
 * The chart with `routing.gateway.envoyGatewayAttachment: true` against the real API server: the
 * controller's RBAC objects as rendered are applied, and the API server's authorizer (a
 * SubjectAccessReview, what `kubectl auth can-i --as` asks) lets the controller's ServiceAccount do
 * every request the Envoy Gateway attacher makes (src/controllers/ratelimitpolicy/
 * envoy-gateway-attacher.ts; docs/routing.md, "Envoy Gateway"), and refuses the EnvoyPatchPolicy
 * requests again once the same release is rendered with the value off. The controller gets the
 * chart's `clusterDomain` as `--cluster-domain` (PORTICO_CLUSTER_DOMAIN).
 */
import { AuthorizationV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandbox, unique, waitFor } from './support/cluster.js';
import {
  CHART,
  IMAGE_SETS,
  containerEnv,
  findDeployment,
  kubectl,
  parseManifests,
  podSpec,
  run,
  toolsBin,
  type Manifest,
} from './support/helm.js';

const release = unique('egrbac');
const namespace = unique('egrbac-ns');
/** The Gateway's namespace: EnvoyPatchPolicies live there, not in the operator's. */
const gatewayNamespace = 'envoy-gateway-system';

async function render(sets: string[]): Promise<Manifest[]> {
  const args = ['template', release, CHART, '--namespace', namespace, '--kube-version', '1.37.0'];
  for (const s of [...IMAGE_SETS, 'platform.cnameTarget=sites.example.net', ...sets]) args.push('--set', s);
  const out = await run(`${await toolsBin()}/helm`, args);
  expect(out.code, out.stderr).toBe(0);
  return parseManifests(out.stdout);
}

const RBAC_KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

/** Applies the controller's RBAC objects of a render (the ServiceAccount's, by name). */
async function applyRbac(manifests: Manifest[]): Promise<void> {
  const objects = manifests.filter(
    (m) => RBAC_KINDS.has(m.kind) && (m.metadata.name ?? '').includes('controller'),
  );
  expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(['ServiceAccount', 'ClusterRole']));
  const applied = await kubectl(['apply', '-n', namespace, '-f', '-'], {
    input: objects.map((o) => JSON.stringify(o)).join('\n'),
  });
  expect(applied.code, applied.stderr).toBe(0);
}

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return kc;
}

let serviceAccount = '';

/** `kubectl auth can-i <verb> <resource>.<group> [-n namespace] --as system:serviceaccount:...`. */
async function can(verb: string, resource: string, group: string, ns?: string): Promise<boolean> {
  const review = await kubeConfig()
    .makeApiClient(AuthorizationV1Api)
    .createSubjectAccessReview({
      body: {
        spec: {
          user: `system:serviceaccount:${namespace}:${serviceAccount}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
          resourceAttributes: { verb, resource, group, ...(ns === undefined ? {} : { namespace: ns }) },
        },
      },
    });
  return review.status?.allowed === true;
}

/** Every request the attacher and its watches make, as `[verb, resource, group, namespace?]`. */
const ATTACHER_REQUESTS: [string, string, string, string?][] = [
  // The watches (every namespace) and the reads of a target and its parents.
  ...['httproutes', 'gateways', 'listenersets'].flatMap((r): [string, string, string, string?][] => [
    ['list', r, 'gateway.networking.k8s.io'],
    ['watch', r, 'gateway.networking.k8s.io'],
    ['get', r, 'gateway.networking.k8s.io', 'shop'],
  ]),
  // Portico's EnvoyPatchPolicies: listed by label everywhere, read, server-side applied, deleted.
  ['list', 'envoypatchpolicies', 'gateway.envoyproxy.io'],
  ['get', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace],
  ['create', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace],
  ['patch', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace],
  ['delete', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace],
];

describe('the chart with routing.gateway.envoyGatewayAttachment: true', () => {
  let manifests: Manifest[];

  beforeAll(async () => {
    const created = await kubectl(['create', 'namespace', namespace]);
    expect(created.code, created.stderr).toBe(0);
    manifests = await render([
      'routing.gateway.envoyGatewayAttachment=true',
      'clusterDomain=cluster.example',
    ]);
    serviceAccount = podSpec(findDeployment(manifests, 'controller')).serviceAccountName ?? '';
    expect(serviceAccount).not.toBe('');
    await applyRbac(manifests);
  }, 60_000);

  afterAll(async () => {
    const names = manifests
      .filter((m) => (m.kind === 'ClusterRole' || m.kind === 'ClusterRoleBinding') && m.metadata.name)
      .map((m) => `${m.kind.toLowerCase()}/${m.metadata.name ?? ''}`);
    if (names.length > 0) await kubectl(['delete', '--ignore-not-found', ...names]);
    await kubectl(['delete', 'namespace', namespace, '--wait=false']);
  });

  it('turns the attachment on and gives the controller the cluster domain', () => {
    const container = podSpec(findDeployment(manifests, 'controller')).containers[0];
    const env = containerEnv(container ?? { name: '' }, namespace);
    expect(env.PORTICO_ENVOY_GATEWAY_ATTACHMENT).toBe('true');
    expect(env.PORTICO_CLUSTER_DOMAIN).toBe('cluster.example');
  });

  it("lets the controller's ServiceAccount make every request of the Envoy Gateway attacher; with the value off, no EnvoyPatchPolicy request", async () => {
    // The RBAC authorizer reads roles from its cache: wait until the new rules authorize.
    await waitFor('the ClusterRole to authorize', async () =>
      (await can('create', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace))
        ? true
        : undefined,
    );
    const denied: string[] = [];
    for (const [verb, resource, group, ns] of ATTACHER_REQUESTS)
      if (!(await can(verb, resource, group, ns))) denied.push(`${verb} ${resource}.${group} ${ns ?? '*'}`);
    expect(denied).toEqual([]);

    // The same release rendered with the value off: the EnvoyPatchPolicy rules are gone.
    await applyRbac(await render(['routing.gateway.envoyGatewayAttachment=false']));
    await waitFor('the ClusterRole without EnvoyPatchPolicies to be in force', async () =>
      (await can('create', 'envoypatchpolicies', 'gateway.envoyproxy.io', gatewayNamespace))
        ? undefined
        : true,
    );
    for (const [verb, resource, group, ns] of ATTACHER_REQUESTS.filter(([, r]) => r === 'envoypatchpolicies'))
      expect(await can(verb, resource, group, ns), `${verb} ${resource}`).toBe(false);
  });
});
