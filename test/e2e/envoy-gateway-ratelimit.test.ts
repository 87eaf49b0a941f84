/**
 * Portico's rate-limit wiring for Envoy Gateway v1.9.1 judged by the real Envoy Gateway: a
 * RateLimitPolicy targets the HTTPRoute of a Live domain, the operator (`--envoy-gateway-attachment`)
 * writes the Gateway's EnvoyPatchPolicy (src/controllers/ratelimitpolicy/envoy-gateway-attacher.ts),
 * and the test reads what Envoy Gateway makes of it: its status on the EnvoyPatchPolicy, the xDS it
 * would push an Envoy (read over ADS as the routes test reads it: support/envoy-gateway.ts), and the
 * policy's `Attached`, which the operator derives from that status.
 *
 * The one patch the test writes itself is the refused one: the operator names only route
 * configurations its HTTPRoute's listeners have, so it cannot produce that refusal on purpose.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_GATEWAY_DOMAIN, type RateLimitPolicy } from '../../src/api/ratelimitpolicy.js';
import {
  ENVOY_PATCH_POLICY_PLURAL,
  RATELIMIT_CLUSTER_NAME,
  RATELIMIT_FILTER_NAME,
  envoyGatewayRateLimitPatch,
  type RateLimitServiceTarget,
} from '../../src/routing/envoy-gateway-ratelimit.js';
import { envoyRateLimits } from '../../src/routing/ratelimit-descriptors.js';
import type { StatusCondition } from '../../src/routing/acknowledgement.js';
import {
  ENVOY_GATEWAY_NAME,
  SANDBOX_GATEWAY,
  gatewayParentRefsArg,
} from '../../src/sandbox/envoy-gateway.js';
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
const created: string[] = [];

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
      for (const name of [...created, RATELIMIT_CLUSTER_NAME])
        await kube()
          .custom.deleteNamespacedCustomObject({ ...EG, namespace: SANDBOX_GATEWAY.namespace, name })
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

async function apply(body: Record<string, unknown>): Promise<void> {
  const name = (body.metadata as { name: string }).name;
  created.push(name);
  await kube().custom.createNamespacedCustomObject({ ...EG, namespace: SANDBOX_GATEWAY.namespace, body });
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

describe('the rate-limit EnvoyPatchPolicy for a Live domain on Envoy Gateway', () => {
  let ns: string;
  let hostname: string;
  const policy = (namespace: string): RateLimitPolicy => ({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'RateLimitPolicy',
    metadata: { namespace, name: 'public-api' },
    spec: {
      plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
      defaultPlan: 'free',
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'portico-www' }],
    },
  });

  beforeAll(async () => {
    ({ ns, hostname } = await createServingDomain('egrl'));
    await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 90_000);
  });

  it("the operator writes the Gateway's EnvoyPatchPolicy for a policy targeting the HTTPRoute; Envoy Gateway programs it, the policy reads Attached=True, and the xDS carries the filter first, the cluster, and the descriptors on the HTTPRoute's routes", async () => {
    await kube().custom.createNamespacedCustomObject({ ...RLP, namespace: ns, body: policy(ns) });
    const attached = await attachedOf(ns, 'public-api', 'True');
    expect(attached.reason).toBe('Attached');
    expect(attached.message).toContain(
      `EnvoyPatchPolicy ${SANDBOX_GATEWAY.namespace}/${RATELIMIT_CLUSTER_NAME} programmed by Envoy Gateway`,
    );
    const epp = (await kube().custom.getNamespacedCustomObject({
      ...EG,
      namespace: SANDBOX_GATEWAY.namespace,
      name: RATELIMIT_CLUSTER_NAME,
    })) as { metadata: { annotations?: Record<string, string>; managedFields?: { manager?: string }[] } };
    expect(epp.metadata.annotations?.['portico.dev/ratelimit-policies']).toMatch(
      new RegExp(`^${ns}/public-api@\\d+$`),
    );
    expect(epp.metadata.managedFields?.map((f) => f.manager)).toContain('portico-controller');
    const conditions = await patchConditions(RATELIMIT_CLUSTER_NAME);
    expect(conditions.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True' });
    expect(
      conditions.find((c) => c.type === 'Programmed'),
      JSON.stringify(conditions),
    ).toMatchObject({
      status: 'True',
    });

    const { listeners, clusters, routes } = await waitFor('the patched xDS', async () =>
      withAdsStream(async (ads) => {
        ads.send(XDS_TYPE.cluster);
        const listeners = (await ads.request(XDS_TYPE.listener)) as Listener[];
        const clusters = ads.received(XDS_TYPE.cluster) ?? [];
        if (!clusters.some((c) => c.name === RATELIMIT_CLUSTER_NAME)) return undefined;
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
        const routes = await ads.request(XDS_TYPE.routeConfiguration, names);
        return { listeners, clusters, routes };
      }),
    );

    // The filter: first in every HTTP connection manager of tcp-80 and tcp-443, as for Contour.
    for (const name of [`tcp-${SANDBOX_GATEWAY.httpPort}`, 'tcp-443']) {
      const listener = listeners.find((l) => l.name === name);
      expect(listener, `listener ${name} in ${JSON.stringify(listeners.map((l) => l.name))}`).toBeDefined();
      const lists = httpFilterLists(listener as Listener);
      expect(lists.length).toBeGreaterThan(0);
      for (const filters of lists) {
        expect(filters[0]?.name).toBe(RATELIMIT_FILTER_NAME);
        expect(filters[0]?.typed_config).toMatchObject({
          '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
          domain: DEFAULT_GATEWAY_DOMAIN,
          timeout: { seconds: '1' },
          rate_limit_service: {
            grpc_service: { envoy_grpc: { cluster_name: RATELIMIT_CLUSTER_NAME } },
            transport_api_version: 'V3',
          },
        });
        // failure_mode_deny false: proto3's default, so absent from the decoded message.
        expect(filters[0]?.typed_config?.failure_mode_deny ?? false).toBe(false);
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

    // The descriptors: on each of the HTTPRoute's routes for the hostname, Contour's two.
    const expected = JSON.parse(JSON.stringify(envoyRateLimits(policy(ns), service.headers))) as unknown[];
    const ours = (
      routes as (XdsResource & {
        virtual_hosts?: {
          domains?: string[];
          routes?: { name?: string; route?: { rate_limits?: unknown[] } }[];
        }[];
      })[]
    ).flatMap((rc) =>
      (rc.virtual_hosts ?? [])
        .filter((vh) => vh.domains?.includes(hostname) === true)
        .flatMap((vh) => vh.routes ?? [])
        .filter((r) => r.name?.startsWith(`httproute/${ns}/portico-www/rule/`) === true),
    );
    expect(ours.length).toBeGreaterThan(0);
    // protobufjs renders the google.protobuf.BoolValue `expect_match` as `{value: true}` where proto
    // JSON (the patch) writes `true`: read it back in the patch's form.
    const protoJson = (rateLimits: unknown): unknown =>
      JSON.parse(
        JSON.stringify(rateLimits, (key, value: unknown) =>
          key === 'expect_match' && typeof value === 'object' && value !== null && 'value' in value
            ? value.value
            : value,
        ),
      );
    for (const route of ours) expect(protoJson(route.route?.rate_limits)).toMatchObject(expected);
  });

  it("a patch Envoy Gateway refuses, written by the test (the operator cannot produce it: it names only route configurations its HTTPRoute's listeners have): Programmed=False with Envoy Gateway's reason and message", async () => {
    // Only the route patch of a wiring whose HTTPRoute has no route there (the cluster and the
    // filter are the first policy's already).
    const refused = envoyGatewayRateLimitPatch({
      name: 'portico-ratelimit-refused',
      gateway: SANDBOX_GATEWAY,
      ports: [SANDBOX_GATEWAY.httpPort],
      routes: [
        {
          policy: policy(ns),
          // No route of this HTTPRoute is in that route configuration.
          httpRoute: { namespace: ns, name: 'no-such-route' },
          routeConfigurations: [`http-${SANDBOX_GATEWAY.httpPort}`],
        },
      ],
      service,
    });
    const spec = refused.spec as { jsonPatches: { type: string }[] };
    spec.jsonPatches = spec.jsonPatches.filter((p) => p.type === XDS_TYPE.routeConfiguration);
    await apply(refused);
    const conditions = await patchConditions('portico-ratelimit-refused');
    const programmed = conditions.find((c) => c.type === 'Programmed');
    expect(programmed).toMatchObject({ status: 'False', reason: 'Invalid' });
    expect(programmed?.message).toContain('No jsonPointers were found while evaluating the jsonPath');
  });

  it('the policy deleted, the operator deletes the EnvoyPatchPolicy no policy needs any more', async () => {
    await kube().custom.deleteNamespacedCustomObject({ ...RLP, namespace: ns, name: 'public-api' });
    await waitFor('the EnvoyPatchPolicy deleted', async () => {
      try {
        await kube().custom.getNamespacedCustomObject({
          ...EG,
          namespace: SANDBOX_GATEWAY.namespace,
          name: RATELIMIT_CLUSTER_NAME,
        });
        return undefined;
      } catch (err: unknown) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
  });
});
