/**
 * Portico's rate-limit wiring for Envoy Gateway v1.9.1 judged by the real Envoy Gateway: a
 * RateLimitPolicy targets the HTTPRoute of a Live domain, the operator (`--envoy-gateway-attachment`)
 * writes the Gateway's EnvoyPatchPolicy (src/controllers/ratelimitpolicy/envoy-gateway-attacher.ts),
 * and the test reads what Envoy Gateway makes of it: its status on the EnvoyPatchPolicy, the xDS it
 * would push an Envoy (read over ADS as the routes test reads it: support/envoy-gateway.ts), and the
 * policy's `Attached`, which the operator derives from that status.
 *
 * Every object Envoy Gateway reports on is written by the operator; the test writes only
 * RateLimitPolicies and the Gateway API objects a project would (HTTPRoutes, ListenerSets, Secrets).
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_GATEWAY_DOMAIN, type RateLimitPolicy } from '../../src/api/ratelimitpolicy.js';
import {
  ENVOY_PATCH_POLICY_PLURAL,
  RATELIMIT_CLUSTER_NAME,
  RATELIMIT_FILTER_NAME,
  type RateLimitServiceTarget,
} from '../../src/routing/envoy-gateway-ratelimit.js';
import {
  serviceWiringPolicyName,
  targetPolicyName,
} from '../../src/controllers/ratelimitpolicy/envoy-gateway-attachment.js';
import { selfSignedCertificate } from '../support/stand-in-ingress.js';
import { envoyRateLimits } from '../../src/routing/ratelimit-descriptors.js';
import type { StatusCondition } from '../../src/routing/acknowledgement.js';
import {
  ENVOY_GATEWAY_NAME,
  SANDBOX_GATEWAY,
  gatewayParentRefsArg,
} from '../../src/data-planes/envoy-gateway/sandbox-process.js';
import { createServingDomain, kube, waitFor, waitForCondition } from './support/cluster.js';
import {
  XDS_TYPE,
  startStackEnvoyGateway,
  stopStackEnvoyGateway,
  withAdsStream,
  type XdsResource,
} from './support/envoy-gateway.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const EG = {
  group: 'gateway.envoyproxy.io',
  version: 'v1alpha1',
  plural: ENVOY_PATCH_POLICY_PLURAL,
} as const;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let egStarted = false;
const GATEWAY_API = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;

beforeAll(async () => {
  await startStackEnvoyGateway();
  egStarted = true;
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'envoy-gateway-ratelimit', {
    '--routing-mode': 'gateway',
    '--gateway-parent-refs': gatewayParentRefsArg(SANDBOX_GATEWAY),
    '--data-plane-acknowledgement': 'true',
    '--data-plane-name': ENVOY_GATEWAY_NAME,
    '--contour-attachment': 'false',
    '--envoy-gateway-attachment': 'true',
  });
});

afterAll(async () => {
  await runAll(
    async () => {
      await kube()
        .custom.deleteNamespacedCustomObject({
          ...RLP,
          namespace: SANDBOX_GATEWAY.namespace,
          name: 'gateway-wide',
        })
        .catch(() => undefined);
      const list = (await kube().custom.listNamespacedCustomObject({
        ...EG,
        namespace: SANDBOX_GATEWAY.namespace,
        labelSelector: 'app.kubernetes.io/managed-by=portico',
      })) as { items: { metadata: { name: string } }[] };
      for (const e of list.items)
        await kube()
          .custom.deleteNamespacedCustomObject({
            ...EG,
            namespace: SANDBOX_GATEWAY.namespace,
            name: e.metadata.name,
          })
          .catch(() => undefined);
    },
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
    async () => {
      if (egStarted) await stopStackEnvoyGateway();
    },
  );
});

const service: RateLimitServiceTarget = {
  serviceName: 'portico-ratelimit',
  serviceNamespace: 'portico-system',
  servicePort: 8081,
  clusterDomain: 'cluster.local',
  timeoutMs: 1000,
  headers: { keyId: 'x-api-key-id', plan: 'x-api-plan' },
};

interface PolicyStatus {
  status?: { ancestors?: { ancestorRef?: { name?: string }; conditions?: StatusCondition[] }[] };
}

/** Envoy Gateway's conditions on an EnvoyPatchPolicy of the Gateway (its ancestor), once written for generation. */
async function patchConditions(name: string): Promise<StatusCondition[]> {
  return waitFor(`Envoy Gateway's status on EnvoyPatchPolicy ${name}`, async () => {
    const epp = (await kube().custom.getNamespacedCustomObject({
      ...EG,
      namespace: SANDBOX_GATEWAY.namespace,
      name,
    })) as PolicyStatus & { metadata: { generation?: number } };
    const conditions = epp.status?.ancestors?.[0]?.conditions ?? [];
    const generation = epp.metadata.generation ?? 0;
    const current = conditions.filter(
      (c) => (c as { observedGeneration?: number }).observedGeneration === generation,
    );
    return current.some((c) => c.type === 'Programmed') ? current : undefined;
  });
}

const RLP = { group: 'portico.dev', version: 'v1alpha1', plural: 'ratelimitpolicies' } as const;

/** The policy's `Attached` condition once it has the status wanted. */
async function attachedOf(
  namespace: string,
  name: string,
  status: 'True' | 'False',
): Promise<StatusCondition> {
  return waitFor(
    `RateLimitPolicy ${namespace}/${name} Attached=${status}`,
    async () => {
      const p = (await kube().custom.getNamespacedCustomObject({ ...RLP, namespace, name })) as {
        status?: { conditions?: StatusCondition[] };
      };
      const attached = p.status?.conditions?.find((c) => c.type === 'Attached');
      return attached?.status === status ? attached : undefined;
    },
    90_000,
  );
}

interface HttpFilter {
  name?: string;
  typed_config?: Record<string, unknown>;
}
interface Listener extends XdsResource {
  filter_chains?: { filters?: { typed_config?: { http_filters?: HttpFilter[] } }[] }[];
  default_filter_chain?: { filters?: { typed_config?: { http_filters?: HttpFilter[] } }[] };
}

/** Every HTTP connection manager's `http_filters` in a listener. */
function httpFilterLists(listener: Listener): HttpFilter[][] {
  const chains = [
    ...(listener.filter_chains ?? []),
    ...(listener.default_filter_chain ? [listener.default_filter_chain] : []),
  ];
  return chains.flatMap((c) => (c.filters ?? []).map((f) => f.typed_config?.http_filters ?? []));
}

interface RouteConfiguration extends XdsResource {
  virtual_hosts?: {
    name?: string;
    domains?: string[];
    rate_limits?: unknown[];
    routes?: { name?: string; route?: { rate_limits?: unknown[] } }[];
  }[];
}

/** The Listeners, Clusters and the RouteConfigurations the Listeners name, once `ready` says so. */
async function readXds(
  what: string,
  ready: (x: { listeners: Listener[]; clusters: XdsResource[]; routes: RouteConfiguration[] }) => boolean,
  timeoutMs = 60_000,
): Promise<{ listeners: Listener[]; clusters: XdsResource[]; routes: RouteConfiguration[] }> {
  return waitFor(
    what,
    async () =>
      withAdsStream(async (ads) => {
        ads.send(XDS_TYPE.cluster);
        const listeners = (await ads.request(XDS_TYPE.listener)) as Listener[];
        const clusters = ads.received(XDS_TYPE.cluster) ?? [];
        const names = [
          ...new Set(
            listeners.flatMap((l) =>
              [
                ...(l.filter_chains ?? []),
                ...(l.default_filter_chain ? [l.default_filter_chain] : []),
              ].flatMap((c) =>
                (c.filters ?? []).map(
                  (f) =>
                    (f.typed_config as { rds?: { route_config_name?: string } } | undefined)?.rds
                      ?.route_config_name,
                ),
              ),
            ),
          ),
        ].filter((n): n is string => n !== undefined);
        const routes = (await ads.request(XDS_TYPE.routeConfiguration, names)) as RouteConfiguration[];
        const x = { listeners, clusters, routes };
        return ready(x) ? x : undefined;
      }).catch(() => undefined),
    timeoutMs,
  );
}

// protobufjs renders the google.protobuf.BoolValue `expect_match` as `{value: true}` where proto
// JSON (the patch) writes `true`: read it back in the patch's form.
function protoJson(rateLimits: unknown): unknown {
  return JSON.parse(
    JSON.stringify(rateLimits ?? null, (key, value: unknown) =>
      key === 'expect_match' && typeof value === 'object' && value !== null && 'value' in value
        ? value.value
        : value,
    ),
  );
}

/** The routes of HTTPRoute `namespace/name` in the route configurations. */
function routesOf(routes: RouteConfiguration[], namespace: string, name: string) {
  return routes.flatMap((rc) =>
    (rc.virtual_hosts ?? [])
      .flatMap((vh) => vh.routes ?? [])
      .filter((r) => r.name?.startsWith(`httproute/${namespace}/${name}/rule/`) === true),
  );
}

async function getEpp(name: string): Promise<
  | {
      metadata: { annotations?: Record<string, string>; managedFields?: { manager?: string }[] };
      spec: { jsonPatches: { type: string; name: string }[] };
    }
  | undefined
> {
  try {
    return (await kube().custom.getNamespacedCustomObject({
      ...EG,
      namespace: SANDBOX_GATEWAY.namespace,
      name,
    })) as never;
  } catch (err: unknown) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

const policyBody = (
  namespace: string,
  name: string,
  target: { kind: 'HTTPRoute' | 'Gateway'; name: string },
  requestsPerMinute = 60,
): RateLimitPolicy => ({
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'RateLimitPolicy',
  metadata: { namespace, name },
  spec: {
    plans: [{ name: 'free', requestsPerMinute, requestsPerDay: 1000 }],
    defaultPlan: 'free',
    targetRefs: [{ group: 'gateway.networking.k8s.io', ...target }],
  },
});

/** A TLS Secret (self-signed for `hostnames`, or bytes that are no certificate) in `namespace`. */
async function tlsSecret(namespace: string, name: string, hostnames: string[] | 'garbage'): Promise<void> {
  const pem =
    hostnames === 'garbage'
      ? { certPem: 'not a certificate', keyPem: 'not a key' }
      : await selfSignedCertificate(`CN=${hostnames[0]}`, hostnames);
  await kube().core.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name },
      type: 'kubernetes.io/tls',
      data: {
        'tls.crt': Buffer.from(pem.certPem).toString('base64'),
        'tls.key': Buffer.from(pem.keyPem).toString('base64'),
      },
    },
  });
}

/** A project's ListenerSet on the sandbox Gateway: one HTTPS listener `https` for `hostname`. */
async function createListenerSet(namespace: string, name: string, hostname: string, secret: string) {
  await kube().custom.createNamespacedCustomObject({
    ...GATEWAY_API,
    plural: 'listenersets',
    namespace,
    body: {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'ListenerSet',
      metadata: { name, namespace },
      spec: {
        parentRef: {
          group: 'gateway.networking.k8s.io',
          kind: 'Gateway',
          name: SANDBOX_GATEWAY.name,
          namespace: SANDBOX_GATEWAY.namespace,
        },
        listeners: [
          {
            name: 'https',
            hostname,
            port: 443,
            protocol: 'HTTPS',
            tls: { mode: 'Terminate', certificateRefs: [{ kind: 'Secret', name: secret }] },
          },
        ],
      },
    },
  });
}

/** An HTTPRoute to the project's Service `web` under the ListenerSets `parents`. */
function httpRoute(namespace: string, name: string, parents: string[], hostnames: string[]) {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, namespace },
    spec: {
      parentRefs: parents.map((p) => ({ group: 'gateway.networking.k8s.io', kind: 'ListenerSet', name: p })),
      hostnames,
      rules: [{ backendRefs: [{ name: 'web', port: 80 }] }],
    },
  };
}

describe('the rate-limit EnvoyPatchPolicies for a Live domain on Envoy Gateway', () => {
  let ns: string;
  let hostname: string;
  const policy = (namespace: string): RateLimitPolicy =>
    policyBody(namespace, 'public-api', { kind: 'HTTPRoute', name: 'portico-www' });
  const wiringName = serviceWiringPolicyName(SANDBOX_GATEWAY.name);
  const targetName = (
    namespace: string,
    name: string,
    kind: 'HTTPRoute' | 'Gateway',
    target: string,
  ): string =>
    targetPolicyName(SANDBOX_GATEWAY.name, policyBody(namespace, name, { kind, name: target }), {
      kind,
      namespace,
      name: target,
    });

  beforeAll(async () => {
    ({ ns, hostname } = await createServingDomain('egrl'));
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 90_000);
  });

  it("the operator writes the Gateway's EnvoyPatchPolicies for a policy targeting the HTTPRoute; Envoy Gateway programs them, the policy reads Attached=True, and the xDS carries the filter just before the router, the cluster, and the descriptors on the HTTPRoute's routes", async () => {
    await kube().custom.createNamespacedCustomObject({ ...RLP, namespace: ns, body: policy(ns) });
    const attached = await attachedOf(ns, 'public-api', 'True');
    expect(attached.reason).toBe('Attached');
    const routeEpp = targetName(ns, 'public-api', 'HTTPRoute', 'portico-www');
    expect(attached.message).toContain(
      `EnvoyPatchPolicies ${SANDBOX_GATEWAY.namespace}/${wiringName} and ${SANDBOX_GATEWAY.namespace}/${routeEpp} programmed by Envoy Gateway`,
    );
    const wiring = await getEpp(wiringName);
    expect(wiring?.metadata.annotations?.['portico.dev/ratelimit-policies']).toMatch(
      new RegExp(`^${ns}/public-api@\\d+$`),
    );
    expect(wiring?.metadata.managedFields?.map((f) => f.manager)).toContain('portico-controller');
    expect((await getEpp(routeEpp))?.metadata.annotations?.['portico.dev/ratelimit-target']).toBe(
      `HTTPRoute ${ns}/portico-www`,
    );
    for (const name of [wiringName, routeEpp]) {
      const conditions = await patchConditions(name);
      expect(conditions.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True' });
      expect(
        conditions.find((c) => c.type === 'Programmed'),
        JSON.stringify(conditions),
      ).toMatchObject({
        status: 'True',
      });
    }

    const { listeners, clusters, routes } = await readXds('the patched xDS', (x) =>
      x.clusters.some((c) => c.name === RATELIMIT_CLUSTER_NAME),
    );

    // The filter: just before the router (so after any authentication filter) in every HTTP
    // connection manager of tcp-80 and tcp-443.
    for (const name of [`tcp-${SANDBOX_GATEWAY.httpPort}`, 'tcp-443']) {
      const listener = listeners.find((l) => l.name === name);
      expect(listener, `listener ${name} in ${JSON.stringify(listeners.map((l) => l.name))}`).toBeDefined();
      const lists = httpFilterLists(listener as Listener);
      expect(lists.length).toBeGreaterThan(0);
      for (const filters of lists) {
        expect(filters.at(-2)?.name).toBe(RATELIMIT_FILTER_NAME);
        expect(filters.at(-2)?.typed_config).toMatchObject({
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
          domain: DEFAULT_GATEWAY_DOMAIN,
          timeout: { seconds: '1' },
          rate_limit_service: {
            grpc_service: { envoy_grpc: { cluster_name: RATELIMIT_CLUSTER_NAME } },
            transport_api_version: 'V3',
          },
        });
        // failure_mode_deny false: proto3's default, so absent from the decoded message.
        expect(filters.at(-2)?.typed_config?.failure_mode_deny ?? false).toBe(false);
        expect(filters.filter((f) => f.name === RATELIMIT_FILTER_NAME)).toHaveLength(1);
        expect(filters.at(-1)?.name).toBe('envoy.filters.http.router');
      }
    }

    // The cluster: the rate-limit server's Service over HTTP/2.
    const cluster = clusters.find((c) => c.name === RATELIMIT_CLUSTER_NAME);
    expect(JSON.stringify(cluster)).toContain(
      '"address":"portico-ratelimit.portico-system.svc.cluster.local"',
    );
    expect(JSON.stringify(cluster)).toContain('"port_value":8081');
    expect(JSON.stringify(cluster)).toContain('http2_protocol_options');

    // The descriptors: on each of the HTTPRoute's routes for the hostname, Contour's three.
    const expected = JSON.parse(JSON.stringify(envoyRateLimits(policy(ns), service.headers))) as unknown[];
    const ours = routes
      .flatMap((rc) => (rc.virtual_hosts ?? []).filter((vh) => vh.domains?.includes(hostname) === true))
      .flatMap((vh) => vh.routes ?? [])
      .filter((r) => r.name?.startsWith(`httproute/${ns}/portico-www/rule/`) === true);
    expect(ours.length).toBeGreaterThan(0);
    for (const route of ours) expect(protoJson(route.route?.rate_limits)).toMatchObject(expected);
  });

  it("with a SecurityPolicy (basic auth) on the HTTPRoute, Envoy Gateway's authentication filter comes before Portico's rate-limit filter, and the router after it, in every HTTP connection manager of tcp-443", async () => {
    // htpasswd's {SHA} form, the one Envoy's basic_auth filter takes: base64(SHA-1(password)).
    const htpasswd = `tenant:{SHA}${createHash('sha1').update('s3cret').digest('base64')}\n`;
    await kube().core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'basic-auth' }, stringData: { '.htpasswd': htpasswd } },
    });
    await kube().custom.createNamespacedCustomObject({
      group: 'gateway.envoyproxy.io',
      version: 'v1alpha1',
      plural: 'securitypolicies',
      namespace: ns,
      body: {
        apiVersion: 'gateway.envoyproxy.io/v1alpha1',
        kind: 'SecurityPolicy',
        metadata: { name: 'basic-auth', namespace: ns },
        spec: {
          targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'portico-www' }],
          basicAuth: { users: { name: 'basic-auth' } },
        },
      },
    });
    const isAuth = (f: HttpFilter): boolean => f.name?.startsWith('envoy.filters.http.basic_auth') === true;
    const { listeners } = await readXds("the basic_auth filter in Envoy Gateway's LDS", (x) =>
      x.listeners.some((l) => httpFilterLists(l).some((filters) => filters.some(isAuth))),
    );
    const listener = listeners.find((l) => l.name === 'tcp-443');
    const withAuth = httpFilterLists(listener as Listener).filter((filters) => filters.some(isAuth));
    expect(withAuth.length).toBeGreaterThan(0);
    for (const filters of withAuth) {
      const names = filters.map((f) => f.name ?? '');
      const auth = names.findIndex((n) => n.startsWith('envoy.filters.http.basic_auth'));
      const rateLimit = names.indexOf(RATELIMIT_FILTER_NAME);
      expect(auth, names.join(', ')).toBeGreaterThanOrEqual(0);
      expect(rateLimit, names.join(', ')).toBeGreaterThan(auth);
      expect(names.at(-1)).toBe('envoy.filters.http.router');
      expect(rateLimit).toBe(names.length - 2);
    }
    await kube().custom.deleteNamespacedCustomObject({
      group: 'gateway.envoyproxy.io',
      version: 'v1alpha1',
      plural: 'securitypolicies',
      namespace: ns,
      name: 'basic-auth',
    });
  });

  it("an EnvoyExtensionPolicy with Lua on the project's HTTPRoute (written here by the admin: the chart's admission refuses Lua and Wasm to a tenant, e2e/tenant-isolation-ratelimits): Envoy Gateway v1.9.1 with its defaults (extensionApis.enableLua unset) refuses it and puts no Lua filter into the Envoy that holds the portico-ratelimit cluster; deleted, the route serves again", async () => {
    const eep = {
      group: 'gateway.envoyproxy.io',
      version: 'v1alpha1',
      plural: 'envoyextensionpolicies',
    } as const;
    await kube().custom.createNamespacedCustomObject({
      ...eep,
      namespace: ns,
      body: {
        apiVersion: 'gateway.envoyproxy.io/v1alpha1',
        kind: 'EnvoyExtensionPolicy',
        metadata: { name: 'lua', namespace: ns },
        spec: {
          targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'portico-www' }],
          lua: [
            {
              type: 'Inline',
              // What a tenant's script would do where Lua is on: call any cluster of the Envoy by name.
              inline: [
                'function envoy_on_request(handle)',
                `  handle:httpCall("${RATELIMIT_CLUSTER_NAME}", {`,
                '    [":method"] = "POST",',
                '    [":path"] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",',
                `    [":authority"] = "${RATELIMIT_CLUSTER_NAME}",`,
                '    ["content-type"] = "application/grpc",',
                '  }, "", 1000)',
                'end',
              ].join('\n'),
            },
          ],
        },
      },
    });
    try {
      const refused = await waitFor("Envoy Gateway's status on the EnvoyExtensionPolicy", async () => {
        const obj = (await kube().custom.getNamespacedCustomObject({
          ...eep,
          namespace: ns,
          name: 'lua',
        })) as PolicyStatus;
        const accepted = obj.status?.ancestors?.[0]?.conditions?.find((c) => c.type === 'Accepted');
        return accepted;
      });
      expect(refused.status).toBe('False');
      expect(refused.message).toContain('Lua EnvoyExtensionPolicy as feature is disabled');
      const isLua = (f: HttpFilter): boolean => f.name?.includes('lua') === true;
      const { listeners, clusters, routes } = await readXds(
        'the xDS with the rate-limit cluster and the route of portico-www refused (a direct response)',
        (x) =>
          x.clusters.some((c) => c.name === RATELIMIT_CLUSTER_NAME) &&
          routesOf(x.routes, ns, 'portico-www').some((r) => r.route === undefined),
      );
      expect(clusters.map((c) => c.name)).toContain(RATELIMIT_CLUSTER_NAME);
      expect(
        listeners
          .flatMap((l) => httpFilterLists(l))
          .flat()
          .filter(isLua),
      ).toEqual([]);
      // Envoy Gateway answers the refused policy's own routes with a direct response (500).
      expect(routesOf(routes, ns, 'portico-www').every((r) => r.route === undefined)).toBe(true);
    } finally {
      await kube().custom.deleteNamespacedCustomObject({ ...eep, namespace: ns, name: 'lua' });
      await readXds('the route of portico-www forwarding again', (x) => {
        const own = routesOf(x.routes, ns, 'portico-www');
        return own.length > 0 && own.every((r) => r.route !== undefined);
      });
    }
  });

  it("a policy targeting the Gateway: Attached=True, its descriptors on every virtual host of the route configurations of the Gateway's listeners and ListenerSets with routes, the HTTPRoute's own policy still first on its routes (the more specific wins); deleted, its EnvoyPatchPolicy and descriptors go", async () => {
    const gwNs = SANDBOX_GATEWAY.namespace;
    const body = policyBody(gwNs, 'gateway-wide', { kind: 'Gateway', name: SANDBOX_GATEWAY.name }, 600);
    await kube().custom.createNamespacedCustomObject({ ...RLP, namespace: gwNs, body });
    const attached = await attachedOf(gwNs, 'gateway-wide', 'True');
    const eppName = targetName(gwNs, 'gateway-wide', 'Gateway', SANDBOX_GATEWAY.name);
    expect(attached.message).toContain(`${gwNs}/${eppName} programmed by Envoy Gateway`);
    const epp = await getEpp(eppName);
    expect(epp?.metadata.annotations?.['portico.dev/ratelimit-target']).toBe(
      `Gateway ${gwNs}/${SANDBOX_GATEWAY.name}`,
    );
    const configs = (epp?.spec.jsonPatches ?? []).map((p) => p.name);
    // The Gateway's HTTP listener (Portico's HTTPRoutes attach to it) and the domain's ListenerSet.
    expect(configs).toContain(`http-${SANDBOX_GATEWAY.httpPort}`);
    expect(configs).toContain(`${gwNs}/${SANDBOX_GATEWAY.name}/${ns}/portico-www/https`);

    const gatewayLimits = JSON.parse(JSON.stringify(envoyRateLimits(body, service.headers))) as unknown[];
    const routeLimits = JSON.parse(JSON.stringify(envoyRateLimits(policy(ns), service.headers))) as unknown[];
    const withLimits = await readXds("the Gateway policy's descriptors on the virtual hosts", (x) =>
      configs.every((name) => {
        const vhs = x.routes.find((rc) => rc.name === name)?.virtual_hosts ?? [];
        return vhs.length > 0 && vhs.every((vh) => vh.rate_limits !== undefined);
      }),
    );
    for (const name of configs) {
      for (const vh of withLimits.routes.find((rc) => rc.name === name)?.virtual_hosts ?? [])
        expect(protoJson(vh.rate_limits), `virtual host ${vh.name} of ${name}`).toEqual(gatewayLimits);
    }
    // The HTTPRoute's policy keeps its route-level rate_limits, which Envoy uses instead of the
    // virtual host's (vh_rate_limits left at OVERRIDE).
    const ours = routesOf(withLimits.routes, ns, 'portico-www');
    expect(ours.length).toBeGreaterThan(0);
    for (const r of ours) expect(protoJson(r.route?.rate_limits)).toMatchObject(routeLimits);
    // One filter still: the two policies share the Gateway's service wiring.
    for (const l of withLimits.listeners)
      for (const filters of httpFilterLists(l))
        expect(filters.filter((f) => f.name === RATELIMIT_FILTER_NAME).length).toBeLessThanOrEqual(1);
    expect(
      parseList((await getEpp(wiringName))?.metadata.annotations?.['portico.dev/ratelimit-policies']),
    ).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^${gwNs}/gateway-wide@`))]));

    await kube().custom.deleteNamespacedCustomObject({ ...RLP, namespace: gwNs, name: 'gateway-wide' });
    await waitFor("the Gateway policy's EnvoyPatchPolicy deleted", async () =>
      (await getEpp(eppName)) === undefined ? true : undefined,
    );
    const without = await readXds('the virtual hosts without the descriptors', (x) =>
      configs.every((name) =>
        (x.routes.find((rc) => rc.name === name)?.virtual_hosts ?? []).every(
          (vh) => vh.rate_limits === undefined,
        ),
      ),
    );
    expect(routesOf(without.routes, ns, 'portico-www').length).toBeGreaterThan(0);
    for (const r of routesOf(without.routes, ns, 'portico-www'))
      expect(protoJson(r.route?.rate_limits)).toMatchObject(routeLimits);
  });

  it('a new ListenerSet parent of a targeted HTTPRoute, added after the policy is Attached, is in its EnvoyPatchPolicy and the xDS within seconds (the HTTPRoute watch, not the resync)', async () => {
    const a = `api-a.${ns}.example`;
    const b = `api-b.${ns}.example`;
    await tlsSecret(ns, 'api-tls', [a, b]);
    await createListenerSet(ns, 'api-a', a, 'api-tls');
    await kube().custom.createNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'httproutes',
      namespace: ns,
      body: httpRoute(ns, 'api', ['api-a'], [a]),
    });
    const body = policyBody(ns, 'watched', { kind: 'HTTPRoute', name: 'api' });
    await kube().custom.createNamespacedCustomObject({ ...RLP, namespace: ns, body });
    await attachedOf(ns, 'watched', 'True');
    const eppName = targetName(ns, 'watched', 'HTTPRoute', 'api');
    const configA = `${SANDBOX_GATEWAY.namespace}/${SANDBOX_GATEWAY.name}/${ns}/api-a/https`;
    const configB = `${SANDBOX_GATEWAY.namespace}/${SANDBOX_GATEWAY.name}/${ns}/api-b/https`;
    expect((await getEpp(eppName))?.spec.jsonPatches.map((p) => p.name)).toEqual([configA]);

    await createListenerSet(ns, 'api-b', b, 'api-tls');
    await kube().custom.patchNamespacedCustomObject(
      {
        ...GATEWAY_API,
        plural: 'httproutes',
        namespace: ns,
        name: 'api',
        body: [
          {
            op: 'replace',
            path: '/spec/parentRefs',
            value: httpRoute(ns, 'api', ['api-a', 'api-b'], []).spec.parentRefs,
          },
          { op: 'replace', path: '/spec/hostnames', value: [a, b] },
        ],
      },
      // JSON Patch (RFC 6902).
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    const started = Date.now();
    await waitFor(
      'the new ListenerSet in the EnvoyPatchPolicy',
      async () => {
        const names = (await getEpp(eppName))?.spec.jsonPatches.map((p) => p.name) ?? [];
        return names.includes(configB) ? names : undefined;
      },
      20_000,
    );
    expect(Date.now() - started).toBeLessThan(20_000);
    const expected = JSON.parse(JSON.stringify(envoyRateLimits(body, service.headers))) as unknown[];
    const x = await readXds(
      'the descriptors on the route in the new ListenerSet',
      (r) => (r.routes.find((rc) => rc.name === configB)?.virtual_hosts ?? []).length > 0,
    );
    const inB = routesOf(
      x.routes.filter((rc) => rc.name === configB),
      ns,
      'api',
    );
    expect(inB.length).toBeGreaterThan(0);
    for (const r of inB) expect(protoJson(r.route?.rate_limits)).toMatchObject(expected);
    await attachedOf(ns, 'watched', 'True');
  });

  it("one HTTPRoute Envoy Gateway cannot patch (its ListenerSet's certificate is no certificate: Envoy Gateway builds no route configuration for it) refuses only its own target's EnvoyPatchPolicy: that policy reads RefusedByEnvoyGateway, the others stay Attached and wired", async () => {
    const bad = `bad.${ns}.example`;
    await tlsSecret(ns, 'bad-tls', 'garbage');
    await createListenerSet(ns, 'unplaceable', bad, 'bad-tls');
    await kube().custom.createNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'httproutes',
      namespace: ns,
      body: httpRoute(ns, 'unplaceable', ['unplaceable'], [bad]),
    });
    await kube().custom.createNamespacedCustomObject({
      ...RLP,
      namespace: ns,
      body: policyBody(ns, 'broken', { kind: 'HTTPRoute', name: 'unplaceable' }),
    });
    const refused = await attachedOf(ns, 'broken', 'False');
    expect(refused.reason).toBe('RefusedByEnvoyGateway');
    const eppName = targetName(ns, 'broken', 'HTTPRoute', 'unplaceable');
    // Envoy Gateway v1.9.1 builds no route configuration for a listener whose certificate it cannot
    // load, so the patch names a resource it does not have.
    expect(refused.message).toContain(
      `EnvoyPatchPolicy ${SANDBOX_GATEWAY.namespace}/${eppName}: Envoy Gateway refuses it: ResourceNotFound: Unable to find xds resources: ` +
        `type.googleapis.com/envoy.config.route.v3.RouteConfiguration/${SANDBOX_GATEWAY.namespace}/${SANDBOX_GATEWAY.name}/${ns}/unplaceable/https`,
    );
    const programmed = (await patchConditions(eppName)).find((c) => c.type === 'Programmed');
    expect(programmed?.status).toBe('False');
    // The others: their EnvoyPatchPolicies programmed, their policies Attached, their descriptors in place.
    for (const name of [wiringName, targetName(ns, 'public-api', 'HTTPRoute', 'portico-www')])
      expect((await patchConditions(name)).find((c) => c.type === 'Programmed')?.status).toBe('True');
    expect((await attachedOf(ns, 'public-api', 'True')).reason).toBe('Attached');
    expect((await attachedOf(ns, 'watched', 'True')).reason).toBe('Attached');
    const x = await readXds('the xDS', () => true);
    const expected = JSON.parse(JSON.stringify(envoyRateLimits(policy(ns), service.headers))) as unknown[];
    const ours = routesOf(x.routes, ns, 'portico-www');
    expect(ours.length).toBeGreaterThan(0);
    for (const r of ours) expect(protoJson(r.route?.rate_limits)).toMatchObject(expected);
  });

  it('the policies deleted, the operator deletes every EnvoyPatchPolicy no policy needs any more', async () => {
    for (const name of ['public-api', 'watched', 'broken'])
      await kube().custom.deleteNamespacedCustomObject({ ...RLP, namespace: ns, name });
    await waitFor('the EnvoyPatchPolicies deleted', async () => {
      const list = (await kube().custom.listNamespacedCustomObject({
        ...EG,
        namespace: SANDBOX_GATEWAY.namespace,
        labelSelector: 'app.kubernetes.io/managed-by=portico',
      })) as { items: unknown[] };
      return list.items.length === 0 ? true : undefined;
    });
    const x = await readXds('the xDS without the cluster', (r) =>
      r.clusters.every((c) => c.name !== RATELIMIT_CLUSTER_NAME),
    );
    for (const l of x.listeners)
      for (const filters of httpFilterLists(l))
        expect(filters.some((f) => f.name === RATELIMIT_FILTER_NAME)).toBe(false);
  });
});

function parseList(value: string | undefined): string[] {
  return (value ?? '').split(',').filter((e) => e !== '');
}
