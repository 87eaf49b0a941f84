/**
 * Tenants and rate limits (docs/ratelimits.md, "Who may name a policy" and "Identity: where the key
 * id and plan come from"), as a hostile tenant would try it, against the REAL parts of the stack:
 * kube-apiserver with the chart's admission policy `admissionPolicy.rateLimitDescriptors` (rendered
 * with `helm template`, chart defaults: no extra allowed users), the stack's Contour (its RDS, read
 * with `contour cli`), the stack's rate-limit service and its Redis, and the stack's operator.
 *
 * The tenant is a user impersonated with `--as`, bound in its own namespace to the chart's tenant
 * roles (templates/tenant-rbac.yaml, rendered and applied here: the stack has no chart install) and
 * to a Role a platform gives its tenants for routes of their own (HTTPProxies, EnvoyPatchPolicies
 * for a Gateway of their own): Contour and Envoy Gateway add neither to the built-in roles.
 *
 *   - the attack (an HTTPProxy whose descriptors name the victim's policy, at the virtual host or a
 *     route, or that take the policy from a request header; the same by an update; an
 *     EnvoyPatchPolicy; an EnvoyExtensionPolicy with Lua or Wasm code, which runs inside the
 *     gateway's Envoy and can call the rate-limit service's cluster) is refused by the API server
 *     with the policy's message; EnvoyExtensionPolicy objects are checked against Envoy Gateway
 *     v1.9.1's own CRD (from the tools' bundle), and one with extProc alone is admitted;
 *   - what the tenant may write (descriptors naming its own namespace) is in Contour's RDS, and
 *     sending the service what Envoy would send for that route with the victim's key id ten times
 *     leaves the victim's key uncounted (no counter in Redis, the victim's own next check sees its
 *     full quota);
 *   - the victim's route carries a descriptor for requests without a key id in Contour's RDS, and
 *     the service limits such a request by the client's address under the default plan;
 *   - the operator (which runs with the admin's credentials, not exempted here) still attaches the
 *     victim's policy, and the controller's ServiceAccount may write both kinds.
 *
 * The policy, the tenant RBAC and the EnvoyPatchPolicy and EnvoyExtensionPolicy CRDs (those this
 * file installed) are removed after the file.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_GATEWAY_DOMAIN } from '../../src/api/ratelimitpolicy.js';
import { hashTag } from '../../src/ratelimit/redis-keys.js';
import { createProject, unique, waitFor } from './support/cluster.js';
import { contourXdsAddr, virtualHostsFor } from './support/contour.js';
import { kubectl, kubectlObjects, parseManifests, renderChartTemplate, toolsBin } from './support/helm.js';
import {
  check,
  createPolicy,
  getPolicy,
  rateLimitClient,
  sandboxRedis,
  waitForPolicyCondition,
} from './ratelimit-helpers.js';

const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
const TENANT = 'tenant-attacker@example.com';
const EPP_CRD = 'envoypatchpolicies.gateway.envoyproxy.io';
const EEP_CRD = 'envoyextensionpolicies.gateway.envoyproxy.io';
const RBAC_NAME = 'e2e-tenant-routes';

const victim = unique('rl-victim');
const attacker = unique('rl-attacker');
const victimPolicy = `${victim}/public-api`;
const victimKey = 'victim-prod-key';
let policy = '';
let tenantRbac = '';
const installedCrds: string[] = [];

type Entry = Record<string, unknown>;
const policyEntry = (value: string): Entry => ({ genericKey: { key: 'portico.dev/policy', value } });
const keyIdEntry: Entry = { requestHeader: { headerName: 'x-api-key-id', descriptorKey: 'key_id' } };

/** An HTTPProxy of `namespace` with `entries` as its virtual host's (or one route's) only descriptor. */
function proxy(
  namespace: string,
  name: string,
  entries: Entry[] | undefined,
  where: 'virtualhost' | 'route' = 'virtualhost',
): Record<string, unknown> {
  const rateLimitPolicy = entries === undefined ? undefined : { global: { descriptors: [{ entries }] } };
  return {
    apiVersion: 'projectcontour.io/v1',
    kind: 'HTTPProxy',
    metadata: { name, namespace },
    spec: {
      virtualhost: {
        fqdn: `${name}.${namespace}.example.com`,
        ...(where === 'virtualhost' && rateLimitPolicy ? { rateLimitPolicy } : {}),
      },
      routes: [
        {
          conditions: [{ prefix: '/' }],
          services: [{ name: 'web', port: 80 }],
          ...(where === 'route' && rateLimitPolicy ? { rateLimitPolicy } : {}),
        },
      ],
    },
  };
}

/** An EnvoyPatchPolicy adding a route-level descriptor that names `value`. */
function patchPolicy(namespace: string, value: string): Record<string, unknown> {
  return {
    apiVersion: 'gateway.envoyproxy.io/v1alpha1',
    kind: 'EnvoyPatchPolicy',
    metadata: { name: 'steal', namespace },
    spec: {
      type: 'JSONPatch',
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'mine' },
      jsonPatches: [
        {
          type: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
          name: 'mine',
          operation: {
            op: 'add',
            path: '/virtual_hosts/0/rate_limits',
            value: [
              {
                actions: [
                  { generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: value } },
                  { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
                ],
              },
            ],
          },
        },
      ],
    },
  };
}

/** Installs Envoy Gateway's CRD `name` (from the tools' bundle) when the stack lacks it. */
async function ensureEnvoyGatewayCrd(name: string): Promise<void> {
  if ((await kubectl(['get', 'crd', name])).code === 0) return;
  const bundle = await readFile(path.join(await toolsBin(), 'envoy-gateway-crds.yaml'), 'utf8');
  const crd = parseAllDocuments(bundle)
    .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string } } | null)
    .find((d) => d?.kind === 'CustomResourceDefinition' && d.metadata?.name === name);
  if (crd === undefined) throw new Error(`no ${name} in the tools' envoy-gateway-crds.yaml`);
  const applied = await kubectlObjects(['apply', '--server-side'], [crd]);
  expect(applied.code, applied.stderr).toBe(0);
  installedCrds.push(name);
  const established = await kubectl(['wait', '--for=condition=Established', `crd/${name}`]);
  expect(established.code, established.stderr).toBe(0);
}

/**
 * A Lua script that asks the rate-limit service, from inside the gateway's Envoy, to count
 * `policy`'s key `key` (the cluster the operator's EnvoyPatchPolicy adds; the gRPC message body is
 * left out here: admission refuses the object before any of it runs).
 */
function luaCallingRateLimitService(policy: string, key: string): string {
  return [
    'function envoy_on_request(handle)',
    `  -- ShouldRateLimit { domain = "${policy}", descriptors = { key_id = "${key}" } }`,
    '  handle:httpCall("portico-ratelimit", {',
    '    [":method"] = "POST",',
    '    [":path"] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",',
    '    [":authority"] = "portico-ratelimit",',
    '    ["content-type"] = "application/grpc",',
    '  }, "", 1000)',
    'end',
  ].join('\n');
}

/**
 * An EnvoyExtensionPolicy `name` in `namespace` for the HTTPRoute `mine` of its namespace, with
 * `extension` (its `lua`, `wasm` or `extProc` list).
 */
function extensionPolicy(
  namespace: string,
  name: string,
  extension: Record<string, unknown>,
): Record<string, unknown> {
  return {
    apiVersion: 'gateway.envoyproxy.io/v1alpha1',
    kind: 'EnvoyExtensionPolicy',
    metadata: { name, namespace },
    spec: {
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'mine' }],
      ...extension,
    },
  };
}

const LUA = { lua: [{ type: 'Inline', inline: luaCallingRateLimitService(victimPolicy, victimKey) }] };
const WASM = {
  wasm: [
    {
      name: 'counter',
      code: {
        type: 'HTTP',
        http: { url: 'https://wasm.example.com/counter.wasm', sha256: 'a'.repeat(64) },
      },
    },
  ],
};
const EXT_PROC = { extProc: [{ backendRefs: [{ name: 'processor', port: 9002 }] }] };

/** The Role and RoleBindings of the tenant in its namespace, and RBAC for the controller's ServiceAccount. */
function rbacObjects(tenantRoles: string[]): unknown[] {
  const routeRules = [
    {
      apiGroups: ['projectcontour.io'],
      resources: ['httpproxies'],
      verbs: ['get', 'create', 'update', 'patch'],
    },
    {
      apiGroups: ['gateway.envoyproxy.io'],
      resources: ['envoypatchpolicies', 'envoyextensionpolicies'],
      verbs: ['get', 'create', 'update', 'patch', 'delete'],
    },
  ];
  const binding = (name: string, kind: 'Role' | 'ClusterRole') => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `${RBAC_NAME}-${name}`, namespace: attacker },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT }],
  });
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: RBAC_NAME, namespace: attacker },
      rules: routeRules,
    },
    binding(RBAC_NAME, 'Role'),
    ...tenantRoles.map((role) => binding(role, 'ClusterRole')),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RBAC_NAME },
      rules: routeRules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: RBAC_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RBAC_NAME },
      subjects: [{ kind: 'ServiceAccount', name: 'portico-controller', namespace: RELEASE_NAMESPACE }],
    },
  ];
}

beforeAll(async () => {
  contourXdsAddr(); // throws unless the stack runs Contour
  await ensureEnvoyGatewayCrd(EPP_CRD);
  await ensureEnvoyGatewayCrd(EEP_CRD);
  await createProject(victim);
  await createProject(attacker);
  tenantRbac = await renderChartTemplate('tenancy', RELEASE_NAMESPACE, 'tenant-rbac.yaml');
  const tenantRoles = parseManifests(tenantRbac)
    .filter((m) => m.kind === 'ClusterRole')
    .map((m) => m.metadata.name);
  expect(tenantRoles).toHaveLength(2);
  const rbac = await kubectl(['apply', '-f', '-'], { input: tenantRbac });
  expect(rbac.code, rbac.stderr).toBe(0);
  const bound = await kubectlObjects(['apply'], rbacObjects(tenantRoles));
  expect(bound.code, bound.stderr).toBe(0);

  policy = await renderChartTemplate('portico', RELEASE_NAMESPACE, 'ratelimit-descriptor-admission.yaml');
  const installed = await kubectl(['apply', '-f', '-'], { input: policy });
  expect(installed.code, installed.stderr).toBe(0);
  await waitFor('the policy to refuse a descriptor naming another namespace', async () => {
    const probe = proxy(attacker, 'probe', [policyEntry(victimPolicy), keyIdEntry]);
    const result = await kubectlObjects(['create', '--dry-run=server'], [probe], TENANT);
    return result.code !== 0 && result.stderr.includes('may not create') ? true : undefined;
  });

  // The victim: a platform-written HTTPProxy and its policy (plans: the default free only).
  const created = await kubectlObjects(['apply'], [proxy(victim, 'api', undefined)]);
  expect(created.code, created.stderr).toBe(0);
  await createPolicy(victim, 'public-api', {
    targetRefs: [{ group: 'projectcontour.io', kind: 'HTTPProxy', name: 'api' }],
    plans: [{ name: 'free', requestsPerMinute: 5, requestsPerDay: 100 }],
    defaultPlan: 'free',
    ban: { afterRejectedRequests: 1, duration: '10m' },
  });
  await waitForPolicyCondition(victim, 'public-api', 'Enforced', 'True', undefined, 60_000);
}, 240_000);

afterAll(async () => {
  rateLimitClient().close();
  if (policy !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policy });
  if (tenantRbac !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: tenantRbac });
  await kubectl(['delete', '--ignore-not-found', 'clusterrolebinding,clusterrole', RBAC_NAME]);
  for (const crd of installedCrds) await kubectl(['delete', '--ignore-not-found', 'crd', crd]);
}, 120_000);

describe('a tenant naming another namespace’s RateLimitPolicy', () => {
  it('is refused by the API server for an HTTPProxy, at the virtual host or a route, created or changed, naming the rule, the object and the policy', async () => {
    const attempts: [string, Record<string, unknown>][] = [
      ['virtual host', proxy(attacker, 'steal', [policyEntry(victimPolicy), keyIdEntry])],
      ['route', proxy(attacker, 'steal-route', [policyEntry(victimPolicy), keyIdEntry], 'route')],
    ];
    for (const [where, object] of attempts) {
      const result = await kubectlObjects(['create'], [object], TENANT);
      expect(result.code, where).not.toBe(0);
      const name = (object.metadata as { name: string }).name;
      expect(result.stderr, where).toContain(`${TENANT} may not create the HTTPProxy ${attacker}/${name}`);
      expect(result.stderr, where).toContain(`its rate-limit descriptors name the policy ${victimPolicy}`);
      expect(result.stderr, where).toContain('a route may name only a RateLimitPolicy of its own namespace');
    }
    const fromHeader = await kubectlObjects(
      ['create'],
      [
        proxy(attacker, 'by-header', [
          { requestHeader: { headerName: 'x-policy', descriptorKey: 'portico.dev/policy' } },
        ]),
      ],
      TENANT,
    );
    expect(fromHeader.code).not.toBe(0);
    expect(fromHeader.stderr).toContain('name the policy from request header x-policy');

    // Its own HTTPProxy, naming its own namespace, is taken; changing it to the victim's is refused.
    const own = await kubectlObjects(
      ['create'],
      [proxy(attacker, 'own', [policyEntry(`${attacker}/public-api`), keyIdEntry])],
      TENANT,
    );
    expect(own.code, own.stderr).toBe(0);
    const changed = await kubectlObjects(
      ['apply'],
      [proxy(attacker, 'own', [policyEntry(victimPolicy), keyIdEntry])],
      TENANT,
    );
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toContain(`may not update the HTTPProxy ${attacker}/own`);
  });

  it('is refused for any EnvoyPatchPolicy, whose JSON admission cannot read, while the controller’s ServiceAccount may write both kinds', async () => {
    const result = await kubectlObjects(
      ['create', '--dry-run=server'],
      [patchPolicy(attacker, victimPolicy)],
      TENANT,
    );
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`${TENANT} may not create the EnvoyPatchPolicy ${attacker}/steal`);
    expect(result.stderr).toContain(`only the Portico controller (${CONTROLLER})`);
    const harmless = await kubectlObjects(
      ['create', '--dry-run=server'],
      [patchPolicy(attacker, `${attacker}/x`)],
      TENANT,
    );
    expect(harmless.code).not.toBe(0);
    // The controller writes EnvoyPatchPolicies in a Gateway's namespace for the policies of the
    // routes' namespaces.
    const byController = await kubectlObjects(
      ['create', '--dry-run=server'],
      [
        patchPolicy(attacker, victimPolicy),
        proxy(attacker, 'ctl', [policyEntry(`${attacker}/public-api`), keyIdEntry]),
      ],
      CONTROLLER,
    );
    expect(byController.code, byController.stderr).toBe(0);
  });

  it('is refused for an EnvoyExtensionPolicy with Lua or Wasm code (it runs inside the gateway’s Envoy, which can call the rate-limit service’s cluster), created or changed into one; extProc alone is admitted, and the controller’s ServiceAccount may write either', async () => {
    for (const [what, extension] of [
      ['Lua', LUA],
      ['Wasm', WASM],
    ] as const) {
      const result = await kubectlObjects(
        ['create', '--dry-run=server'],
        [extensionPolicy(attacker, 'count', extension)],
        TENANT,
      );
      expect(result.code, what).not.toBe(0);
      expect(result.stderr, what).toContain(
        `${TENANT} may not create the EnvoyExtensionPolicy ${attacker}/count with ${what} code`,
      );
      expect(result.stderr, what).toContain('the Portico rate-limit service with the policy and key ids');
      expect(result.stderr, what).toContain(`only the Portico controller (${CONTROLLER})`);
    }
    // extProc alone (a server the Envoy calls for the tenant's own routes) is the tenant's to write;
    // changing it to add Lua is refused, and the object stays as it was.
    const own = await kubectlObjects(['create'], [extensionPolicy(attacker, 'processor', EXT_PROC)], TENANT);
    expect(own.code, own.stderr).toBe(0);
    const changed = await kubectlObjects(
      ['apply'],
      [extensionPolicy(attacker, 'processor', { ...EXT_PROC, ...LUA })],
      TENANT,
    );
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toContain(
      `may not update the EnvoyExtensionPolicy ${attacker}/processor with Lua code`,
    );
    const stored = await kubectl(['get', 'envoyextensionpolicy', 'processor', '-n', attacker, '-o', 'json']);
    expect(stored.code, stored.stderr).toBe(0);
    expect((JSON.parse(stored.stdout) as { spec: Record<string, unknown> }).spec.lua).toBeUndefined();
    // The controller's ServiceAccount may write Lua (and Wasm); the tenant may then change the
    // object's metadata (an update that leaves the spec as it was), not its code.
    const byController = await kubectlObjects(
      ['create'],
      [extensionPolicy(attacker, 'count', { ...LUA, ...WASM })],
      CONTROLLER,
    );
    expect(byController.code, byController.stderr).toBe(0);
    const labelled = await kubectl([
      'label',
      'envoyextensionpolicy',
      'count',
      '-n',
      attacker,
      'team=attacker',
      '--as',
      TENANT,
    ]);
    expect(labelled.code, labelled.stderr).toBe(0);
    const rewritten = await kubectlObjects(
      ['apply'],
      [
        extensionPolicy(attacker, 'count', {
          lua: [{ type: 'Inline', inline: luaCallingRateLimitService(victimPolicy, 'other-key') }],
        }),
      ],
      TENANT,
    );
    expect(rewritten.code).not.toBe(0);
    // kubectl apply merges: the Wasm the controller wrote stays beside the tenant's new Lua.
    expect(rewritten.stderr).toContain(
      `may not update the EnvoyExtensionPolicy ${attacker}/count with Lua and Wasm code`,
    );
    const removed = await kubectl(['delete', 'envoyextensionpolicy', 'processor', 'count', '-n', attacker]);
    expect(removed.code, removed.stderr).toBe(0);
  });

  it("leaves the victim's key uncounted: ten checks of what Envoy would send for the tenant's route (Contour's RDS) with the victim's key id touch no counter of the victim's", async () => {
    const fqdn = `own.${attacker}.example.com`;
    const rateLimits = await waitFor(`the tenant's rate_limits in Contour's RDS for ${fqdn}`, async () => {
      const hosts = await virtualHostsFor(fqdn);
      return hosts.find((h) => h.rate_limits !== undefined)?.rate_limits as
        { actions: { generic_key?: { descriptor_value: string } }[] }[] | undefined;
    });
    // The only policy the tenant's route can name is one of its own namespace.
    const named = rateLimits
      .flatMap((rl) => rl.actions.map((a) => a.generic_key?.descriptor_value))
      .filter(Boolean);
    expect(named).toEqual([`${attacker}/public-api`]);
    for (let i = 0; i < 10; i++) {
      const answer = await check(DEFAULT_GATEWAY_DOMAIN, {
        'portico.dev/policy': `${attacker}/public-api`,
        key_id: victimKey,
      });
      expect(answer.code).toBe('OK');
    }
    const redis = sandboxRedis();
    try {
      expect(await redis.keys(`prl:${hashTag(victimPolicy, victimKey)}:*`)).toEqual([]);
    } finally {
      redis.disconnect();
    }
    const own = await check(DEFAULT_GATEWAY_DOMAIN, {
      'portico.dev/policy': victimPolicy,
      key_id: victimKey,
    });
    expect(own.code).toBe('OK');
    expect(own.headers).toMatchObject({ 'X-RateLimit-Limit': '5', 'X-RateLimit-Remaining': '4' });
  });
});

describe('a request without a key id on the victim’s route', () => {
  it("has its own descriptor in Contour's RDS (the operator's attachment passed admission unexempted), and the service limits it by address under the default plan", async () => {
    await waitFor(
      'the victim policy Attached',
      async () => {
        const p = await getPolicy(victim, 'public-api');
        return p.status?.conditions?.some((c) => c.type === 'Attached' && c.status === 'True')
          ? true
          : undefined;
      },
      90_000,
    );
    const fqdn = `api.${victim}.example.com`;
    const rateLimits = await waitFor(
      `rate_limits in Contour's RDS for ${fqdn}`,
      async () => (await virtualHostsFor(fqdn)).find((h) => h.rate_limits !== undefined)?.rate_limits,
    );
    const keyless = (rateLimits as { actions: Record<string, unknown>[] }[]).find((rl) =>
      rl.actions.some((a) => 'remote_address' in a),
    );
    expect(keyless?.actions).toEqual([
      { generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: victimPolicy } },
      {
        header_value_match: expect.objectContaining({
          descriptor_value: 'no-key-id-header',
          headers: [
            expect.objectContaining({ name: 'x-api-key-id', present_match: true, invert_match: true }),
          ],
        }) as unknown,
      },
      { remote_address: {} },
    ]);
    // What Envoy sends for it from 203.0.113.9 (RFC 5737), whatever plan header the client adds.
    const entries = {
      'portico.dev/policy': victimPolicy,
      header_match: 'no-key-id-header',
      remote_address: '203.0.113.9',
    };
    const first = await check(DEFAULT_GATEWAY_DOMAIN, entries);
    expect(first.code).toBe('OK');
    expect(first.headers).toMatchObject({ 'X-RateLimit-Limit': '5', 'X-RateLimit-Remaining': '4' });
  });
});
