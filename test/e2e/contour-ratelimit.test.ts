/**
 * RateLimitPolicy `spec.targetRefs` wired into a REAL Contour (docs/ratelimits.md, "Attaching to
 * Contour"): the operator applies the policy's descriptors to a root HTTPProxy, Contour takes it
 * (its status) and builds the Envoy configuration it would push (its xDS, read with `contour cli
 * rds|lds|cds`), and the descriptors Envoy would build from that configuration for a request are
 * checked against the sandbox's rate-limit service with envoyproxy/ratelimit's client.
 *
 * No Envoy runs in the sandbox, so the step from Contour's `rate_limits` actions to descriptors is
 * evaluated here (`descriptorsFor`), for the four action kinds Portico's descriptors use, with
 * Envoy's rules: a `request_headers` action whose header is missing drops the whole descriptor
 * (Contour sets no `skip_if_absent`), a `header_value_match` action adds `header_match` only when the
 * headers match as `expect_match` says, and `remote_address` adds the client's address.
 *
 * The stack's Contour is used when its configuration has the rate-limit service (docs/ratelimits.md:
 * `rateLimitService` pointing at the operator's ExtensionService, domain `portico-gateway`); a stack
 * without it (no Contour, or an older sandbox) gets a Contour of this test's own, with exactly that
 * configuration, on free ports, stopped by its pid at the end (it says so on stderr).
 *
 * Also: a target that does not exist (False, then True once created), an unsupported kind, a field
 * another manager owns (never overwritten), a target taken out of the list and a deleted policy (the
 * fields go, the HTTPProxy stays), and the CRD's rules on targetRefs.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { PolicyTargetRef, RateLimitPolicy, RateLimitPolicySpec } from '../../src/api/ratelimitpolicy.js';
import type { HTTPProxy } from '../../src/controllers/ratelimitpolicy/attachment.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { createProject, sandbox, unique, waitFor } from './support/cluster.js';
import {
  clients,
  createPolicy,
  envoyClientCheck,
  getPolicy,
  rateLimitClient,
  startProcess,
  updatePolicy,
  type TestProcess,
} from './ratelimit-helpers.js';

const run = promisify(execFile);
/** The sandbox operator's namespace and the defaults of its Contour flags (docs/ratelimits.md). */
const OPERATOR_NAMESPACE = 'portico-system';
const EXTENSION_CLUSTER = `extension/${OPERATOR_NAMESPACE}/portico-ratelimit`;
const GATEWAY_DOMAIN = 'portico-gateway';
const PLATFORM = 'platform-team';
/** The client address the descriptors of this file's requests carry (TEST-NET-2, RFC 5737). */
const CLIENT_ADDRESS = '198.51.100.7';

const ns = unique('rl-contour');
const plans: RateLimitPolicySpec['plans'] = [
  { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
  { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
];
const proxyRef = (name: string): PolicyTargetRef => ({ group: 'projectcontour.io', kind: 'HTTPProxy', name });

function objects(): KubernetesObjectApi {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return KubernetesObjectApi.makeApiClient(kc);
}

/** Server-side applies `spec` to HTTPProxy `name` as the platform team (their own field manager). */
async function applyProxyAsPlatform(name: string, spec: Record<string, unknown>): Promise<void> {
  await objects().patch(
    { apiVersion: 'projectcontour.io/v1', kind: 'HTTPProxy', metadata: { name, namespace: ns }, spec },
    undefined,
    undefined,
    PLATFORM,
    true,
    PatchStrategy.ServerSideApply,
  );
}

const rootSpec = (name: string): Record<string, unknown> => ({
  virtualhost: { fqdn: `${name}.${ns}.example.com` },
  routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
});

async function readProxy(name: string): Promise<HTTPProxy & { metadata: { managedFields?: unknown[] } }> {
  return (await clients().custom.getNamespacedCustomObject({
    group: 'projectcontour.io',
    version: 'v1',
    namespace: ns,
    plural: 'httpproxies',
    name,
  })) as HTTPProxy;
}

function descriptorsOn(proxy: HTTPProxy): unknown {
  const rlp = proxy.spec?.virtualhost?.rateLimitPolicy as { global?: { descriptors?: unknown } } | undefined;
  return rlp?.global?.descriptors;
}

function managersOf(proxy: { metadata: { managedFields?: unknown[] } }): string[] {
  return (proxy.metadata.managedFields ?? []).map((m) => (m as { manager?: string }).manager ?? '');
}

/** Waits until the policy's Attached condition is `status` (and `reason`) for its current generation. */
async function waitForAttached(
  name: string,
  status: 'True' | 'False' | 'Unknown',
  reason?: string,
  timeoutMs = 30_000,
): Promise<{ reason: string; message: string }> {
  try {
    return await waitFor(
      `${ns}/${name} Attached=${status}${reason === undefined ? '' : ` (${reason})`}`,
      async () => {
        const p = await getPolicy(ns, name);
        const c = p.status?.conditions?.find((x) => x.type === 'Attached');
        const current = c?.observedGeneration === p.metadata.generation;
        return current && c?.status === status && (reason === undefined || c.reason === reason)
          ? c
          : undefined;
      },
      timeoutMs,
      100,
    );
  } catch (err: unknown) {
    const p: RateLimitPolicy = await getPolicy(ns, name);
    throw new Error(`${String(err)}; status: ${JSON.stringify(p.status)}`, { cause: err });
  }
}

/**
 * The first DiscoveryResponse `contour cli <kind>` prints whose resources satisfy `accept`, as JSON.
 * The CLI streams (a request, then every response, as multi-line protojson); it is stopped by its pid
 * once the answer is found.
 */
async function xds<T>(
  kind: 'rds' | 'lds' | 'cds',
  accept: (resources: unknown[]) => T | undefined,
  timeoutMs = 30_000,
  xdsAddr = contourXds,
): Promise<T> {
  return waitFor(
    `contour cli ${kind} to show the expected configuration`,
    () =>
      new Promise<T | undefined>((resolve, reject) => {
        const child = spawn(contourTool().binary, ['cli', kind, '--contour', xdsAddr], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let text = '';
        let done = false;
        const finish = (value: T | undefined, err?: Error): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          if (child.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGTERM');
          if (err !== undefined) reject(err);
          else resolve(value);
        };
        const timer = setTimeout(() => {
          finish(undefined);
        }, 5_000);
        child.stdout.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
          for (const message of topLevelJson(text)) {
            const resources = (message as { resources?: unknown[] }).resources;
            if (resources === undefined) continue;
            const value = accept(resources);
            if (value !== undefined) finish(value);
          }
        });
        child.on('error', (err) => {
          finish(undefined, err);
        });
        child.on('exit', () => {
          finish(undefined);
        });
      }),
    timeoutMs,
    500,
  );
}

/** The ratelimit filter of the first HTTP connection manager in LDS that has one. */
function rateLimitFilterIn(resources: unknown[]): Record<string, unknown> | undefined {
  const hcms = (resources as { filter_chains?: { filters?: { typed_config?: unknown }[] }[] }[])
    .flatMap((listener) => listener.filter_chains ?? [])
    .flatMap((chain) => chain.filters ?? [])
    .map((f) => f.typed_config as { http_filters?: { name: string; typed_config?: unknown }[] } | undefined);
  const rl = hcms
    .flatMap((h) => h?.http_filters ?? [])
    .find((h) => h.name === 'envoy.filters.http.ratelimit');
  return rl?.typed_config as Record<string, unknown> | undefined;
}

/** The `contour` binary and its CRDs, from the sandbox's tools directory (scripts/install-tools.sh). */
function contourTool(): { binary: string; crds: string } {
  return {
    binary: path.join(sandbox.toolsBinDir, 'contour'),
    crds: path.join(sandbox.toolsBinDir, 'contour-crds.yaml'),
  };
}

/**
 * Installs Contour's CRDs (for a stack without Contour), as `kubectl apply --server-side`, and waits
 * until they are Established.
 */
async function installContourCrds(): Promise<void> {
  const { crds } = contourTool();
  await run('kubectl', ['--kubeconfig', sandbox.kubeconfig, 'apply', '--server-side', '-f', crds]);
  await run('kubectl', [
    '--kubeconfig',
    sandbox.kubeconfig,
    'wait',
    '--for=condition=Established',
    '-f',
    crds,
  ]);
}

/**
 * A Contour of the test's own with the rate-limit service configured (when the stack's has none): the
 * operator's ExtensionService waited for (Contour does not start without it), then `contour serve` on
 * free loopback ports, healthy.
 */
async function startOwnContour(): Promise<{ xdsAddr: string; proc: TestProcess }> {
  const tool = contourTool();
  await waitFor(
    `the operator to write ExtensionService ${OPERATOR_NAMESPACE}/portico-ratelimit`,
    async () =>
      (await clients()
        .custom.getNamespacedCustomObject({
          group: 'projectcontour.io',
          version: 'v1alpha1',
          namespace: OPERATOR_NAMESPACE,
          plural: 'extensionservices',
          name: 'portico-ratelimit',
        })
        .catch(() => undefined)) as unknown,
    90_000,
    500,
  );
  const ports = await pickFreePorts({ xds: 'tcp', http: 'tcp', health: 'tcp', debug: 'tcp' } as const);
  const dir = mkdtempSync(path.join(tmpdir(), 'portico-contour-'));
  const config = path.join(dir, 'contour.yaml');
  writeFileSync(
    config,
    stringify({
      enableExternalNameService: true,
      rateLimitService: {
        extensionService: `${OPERATOR_NAMESPACE}/portico-ratelimit`,
        domain: GATEWAY_DOMAIN,
        failOpen: true,
        enableXRateLimitHeaders: false,
      },
    }),
  );
  const loopback = (flag: string, port: number): string[] => [
    `--${flag}-address`,
    '127.0.0.1',
    `--${flag}-port`,
    String(port),
  ];
  const proc = startProcess(tool.binary, [
    'serve',
    '--kubeconfig',
    sandbox.kubeconfig,
    '--config-path',
    config,
    '--insecure',
    ...loopback('xds', ports.xds),
    ...loopback('http', ports.http),
    ...loopback('health', ports.health),
    ...loopback('debug-http', ports.debug),
    '--disable-leader-election',
  ]);
  await waitFor(
    'the test’s Contour to be healthy',
    async () => {
      if (proc.child.exitCode !== null) throw new Error(`contour exited: ${proc.output().slice(-2000)}`);
      const r = await fetch(`http://127.0.0.1:${ports.health}/healthz`).catch(() => undefined);
      return r?.ok === true ? true : undefined;
    },
    60_000,
    250,
  );
  return { xdsAddr: `127.0.0.1:${ports.xds}`, proc };
}

/** The complete top-level JSON values in `text` (protojson's Multiline output, one after another). */
function topLevelJson(text: string): unknown[] {
  const out: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === '{') {
      if (depth === 0) start = i;
      depth++;
    } else if (ch === '}') {
      depth--;
      if (depth === 0 && start >= 0) out.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return out;
}

interface EnvoyAction {
  generic_key?: { descriptor_key?: string; descriptor_value: string };
  request_headers?: { header_name: string; descriptor_key: string; skip_if_absent?: boolean };
  header_value_match?: {
    descriptor_key?: string;
    descriptor_value: string;
    expect_match?: boolean;
    headers: { name: string; present_match?: boolean; invert_match?: boolean }[];
  };
  remote_address?: Record<string, never>;
}

/**
 * The descriptors Envoy builds from a virtual host's `rate_limits` for a request with `headers`
 * (lowercase names) from the client address `address`, by Envoy's rules for the four action kinds
 * (see the file's docstring). Any other action kind fails the test: Portico's descriptors use none.
 */
function descriptorsFor(
  rateLimits: { actions: EnvoyAction[] }[],
  headers: Record<string, string>,
  address = CLIENT_ADDRESS,
): { key: string; value: string }[][] {
  return rateLimits.flatMap((rl) => {
    const entries = rl.actions.map((action) => entryFor(action, headers, address));
    if (entries.some((e) => e === 'drop') || entries.length === 0) return [];
    return [entries.filter((e): e is { key: string; value: string } => e !== 'drop' && e !== undefined)];
  });
}

/** One action's entry: `drop` when Envoy drops the whole descriptor, undefined when it adds none. */
function entryFor(
  action: EnvoyAction,
  headers: Record<string, string>,
  address: string,
): { key: string; value: string } | 'drop' | undefined {
  if (action.remote_address !== undefined) return { key: 'remote_address', value: address };
  if (action.generic_key !== undefined) {
    return {
      key: action.generic_key.descriptor_key ?? 'generic_key',
      value: action.generic_key.descriptor_value,
    };
  }
  if (action.request_headers !== undefined) {
    const value = headers[action.request_headers.header_name];
    if (value !== undefined) return { key: action.request_headers.descriptor_key, value };
    return action.request_headers.skip_if_absent === true ? undefined : 'drop';
  }
  const m = action.header_value_match;
  if (m === undefined) throw new Error(`unexpected rate-limit action ${JSON.stringify(action)}`);
  const matches = m.headers.every((h) => {
    if (h.present_match === undefined) throw new Error(`unexpected header matcher ${JSON.stringify(h)}`);
    const present = headers[h.name] !== undefined;
    return (present === h.present_match) !== (h.invert_match === true);
  });
  if (matches !== (m.expect_match ?? true)) return 'drop';
  return { key: m.descriptor_key ?? 'header_match', value: m.descriptor_value };
}

/** One descriptor's entries as client_cmd's `-descriptors` value, `key=value,key=value`. */
function descriptorText(entries: readonly { key: string; value: string }[]): string {
  return entries.map((e) => `${e.key}=${e.value}`).join(',');
}

/**
 * The rate-limit server's Service the ExtensionService names. The chart creates it beside the server;
 * the sandbox runs the server on loopback with no Service, and Contour leaves an ExtensionService whose
 * Service does not exist out of its configuration (`ServiceUnresolvedReference`), so the test creates
 * a selectorless one (no endpoints: no Envoy connects here) unless the stack has it.
 */
async function ensureRateLimitService(): Promise<void> {
  try {
    await clients().core.createNamespacedService({
      namespace: OPERATOR_NAMESPACE,
      body: {
        metadata: { name: 'portico-ratelimit' },
        spec: { ports: [{ name: 'grpc', port: 8081, protocol: 'TCP' }] },
      },
    });
  } catch (err: unknown) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

let contourXds = '';
let ownContour: TestProcess | undefined;

beforeAll(async () => {
  // Set when the sandbox runs Contour (its default data plane).
  const stack = sandbox.contourXdsAddr;
  if (stack === undefined) await installContourCrds();
  await ensureRateLimitService();
  await createProject(ns, { deployed: true });
  await applyProxyAsPlatform('api', rootSpec('api'));
  await createPolicy(ns, 'public-api', { targetRefs: [proxyRef('api')], plans, defaultPlan: 'free' });
  // The stack's Contour, if it has the rate-limit service: its listener, once it has a route, carries
  // the filter (the HTTPProxy above is such a route).
  const stackHasRateLimits =
    stack !== undefined &&
    (await xds('lds', rateLimitFilterIn, 15_000, stack)
      .then(() => true)
      .catch(() => false));
  if (stack !== undefined && stackHasRateLimits) {
    contourXds = stack;
  } else {
    process.stderr.write(
      `contour-ratelimit: the stack's Contour ${stack ?? '(none)'} has no rate-limit service configured; starting one of the test's own\n`,
    );
    const own = await startOwnContour();
    contourXds = own.xdsAddr;
    ownContour = own.proc;
  }
}, 180_000);

afterAll(async () => {
  rateLimitClient().close();
  await ownContour?.stop();
});

describe('a RateLimitPolicy attached to a root HTTPProxy', () => {
  it('is Attached once Contour takes the HTTPProxy, whose other fields stay the platform team’s', async () => {
    const attached = await waitForAttached('public-api', 'True', 'Attached', 60_000);
    expect(attached.message).toContain(`projectcontour.io/HTTPProxy api (api.${ns}.example.com)`);
    const proxy = await readProxy('api');
    expect(proxy.status?.currentStatus).toBe('valid');
    expect(proxy.spec?.virtualhost?.fqdn).toBe(`api.${ns}.example.com`);
    expect(managersOf(proxy)).toEqual(expect.arrayContaining([PLATFORM, 'portico-ratelimit/public-api']));
    expect(JSON.stringify(descriptorsOn(proxy))).toContain(`"value":"${ns}/public-api"`);
  });

  it("gives Envoy rate_limits whose descriptors the rate-limit service matches (xDS RDS), the filter on Contour's ExtensionService (LDS, CDS)", async () => {
    const fqdn = `api.${ns}.example.com`;
    const rateLimits = await xds('rds', (resources) => {
      const hosts = (
        resources as { virtual_hosts?: { domains?: string[]; rate_limits?: unknown }[] }[]
      ).flatMap((rc) => rc.virtual_hosts ?? []);
      const vh = hosts.find((v) => v.domains?.includes(fqdn) === true && v.rate_limits !== undefined);
      return vh?.rate_limits as { actions: EnvoyAction[] }[] | undefined;
    });
    expect(rateLimits).toEqual([
      {
        actions: [
          { generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: `${ns}/public-api` } },
          { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
          { request_headers: { header_name: 'x-api-plan', descriptor_key: 'plan' } },
        ],
      },
      {
        actions: [
          { generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: `${ns}/public-api` } },
          { request_headers: { header_name: 'x-api-key-id', descriptor_key: 'key_id' } },
          {
            header_value_match: expect.objectContaining({
              descriptor_value: 'no-plan-header',
              expect_match: true,
              headers: [
                expect.objectContaining({ name: 'x-api-plan', present_match: true, invert_match: true }),
              ],
            }) as unknown,
          },
        ],
      },
      {
        actions: [
          { generic_key: { descriptor_key: 'portico.dev/policy', descriptor_value: `${ns}/public-api` } },
          {
            header_value_match: expect.objectContaining({
              descriptor_value: 'no-key-id-header',
              expect_match: true,
              headers: [
                expect.objectContaining({ name: 'x-api-key-id', present_match: true, invert_match: true }),
              ],
            }) as unknown,
          },
          { remote_address: {} },
        ],
      },
    ]);

    // Envoy's descriptors for three requests: with a plan, without one, without a key id.
    const withPlan = descriptorsFor(rateLimits, { 'x-api-key-id': 'contour-key', 'x-api-plan': 'pro' });
    expect(withPlan).toEqual([
      [
        { key: 'portico.dev/policy', value: `${ns}/public-api` },
        { key: 'key_id', value: 'contour-key' },
        { key: 'plan', value: 'pro' },
      ],
    ]);
    const noPlan = descriptorsFor(rateLimits, { 'x-api-key-id': 'contour-free-key' });
    expect(noPlan).toEqual([
      [
        { key: 'portico.dev/policy', value: `${ns}/public-api` },
        { key: 'key_id', value: 'contour-free-key' },
        { key: 'header_match', value: 'no-plan-header' },
      ],
    ]);
    // Without a key id: one descriptor by the client's address, with no plan entry (the header sent
    // does not choose the plan).
    const keyless = descriptorsFor(rateLimits, { 'x-api-plan': 'pro' });
    expect(keyless).toEqual([
      [
        { key: 'portico.dev/policy', value: `${ns}/public-api` },
        { key: 'header_match', value: 'no-key-id-header' },
        { key: 'remote_address', value: CLIENT_ADDRESS },
      ],
    ]);
    expect(descriptorsFor(rateLimits, {})).toEqual(keyless);

    const filter = await xds('lds', rateLimitFilterIn);
    expect(filter).toMatchObject({
      domain: GATEWAY_DOMAIN,
      timeout: '1s',
      rate_limit_service: {
        grpc_service: { envoy_grpc: { cluster_name: EXTENSION_CLUSTER } },
        transport_api_version: 'V3',
      },
    });
    // failOpen: true in the sandbox's Contour config: failure_mode_deny false, which proto3 JSON leaves out.
    expect(filter.failure_mode_deny ?? false).toBe(false);
    // Envoy's own draft-03 headers stay off: Portico's X-RateLimit-Reset is a timestamp.
    expect(filter.enable_x_ratelimit_headers ?? 'OFF').toBe('OFF');

    // Contour takes the ExtensionService (its status), so its cluster is in CDS.
    await waitFor('Contour to report the ExtensionService valid', async () => {
      const es = (await clients().custom.getNamespacedCustomObject({
        group: 'projectcontour.io',
        version: 'v1alpha1',
        namespace: OPERATOR_NAMESPACE,
        plural: 'extensionservices',
        name: 'portico-ratelimit',
      })) as { spec?: unknown; status?: { conditions?: { type: string; status: string }[] } };
      expect(es.spec).toEqual({
        protocol: 'h2c',
        protocolVersion: 'v3',
        services: [{ name: 'portico-ratelimit', port: 8081 }],
        timeoutPolicy: { response: '1000ms' },
      });
      return es.status?.conditions?.some((c) => c.type === 'Valid' && c.status === 'True') === true
        ? true
        : undefined;
    });
    const cluster = await xds('cds', (resources) =>
      (resources as { name?: string }[]).find((c) => c.name === EXTENSION_CLUSTER),
    );
    expect(cluster).toMatchObject({ name: EXTENSION_CLUSTER });
    expect(JSON.stringify(cluster)).toContain('http2_protocol_options');

    // What the rate-limit service answers for exactly those descriptors, with the gateway's domain.
    const [pro] = withPlan;
    const [free] = noPlan;
    if (pro === undefined || free === undefined) throw new Error('no descriptors');
    const proAnswer = await envoyClientCheck(GATEWAY_DOMAIN, descriptorText(pro));
    expect(proAnswer).toMatchObject({ code: 'OK', limit: 300, remaining: 299 });
    expect(proAnswer.headers['X-RateLimit-Limit']).toBe('300');
    const freeAnswer = await envoyClientCheck(GATEWAY_DOMAIN, descriptorText(free));
    expect(freeAnswer).toMatchObject({ code: 'OK', limit: 60, remaining: 59 });
    expect(freeAnswer.headers['X-RateLimit-Remaining']).toBe('59');
    // The keyless request: limited by its address under the default plan, with the headers.
    const [anonymous] = keyless;
    if (anonymous === undefined) throw new Error('no keyless descriptor');
    const keylessAnswer = await envoyClientCheck(GATEWAY_DOMAIN, descriptorText(anonymous));
    expect(keylessAnswer).toMatchObject({ code: 'OK', limit: 60, remaining: 59 });
    expect(keylessAnswer.headers['X-RateLimit-Limit']).toBe('60');
  });

  it('takes its fields away when the target leaves the list, and leaves the HTTPProxy', async () => {
    await createPolicy(ns, 'leaving', { targetRefs: [proxyRef('leave')], plans, defaultPlan: 'free' });
    await applyProxyAsPlatform('leave', rootSpec('leave'));
    await waitForAttached('leaving', 'True', 'Attached', 60_000);
    expect(managersOf(await readProxy('leave'))).toContain('portico-ratelimit/leaving');
    await updatePolicy(ns, 'leaving', { plans, defaultPlan: 'free' });
    const gone = await waitFor('Portico’s fields to leave HTTPProxy leave', async () => {
      const p = await readProxy('leave');
      return managersOf(p).includes('portico-ratelimit/leaving') ? undefined : p;
    });
    expect(descriptorsOn(gone)).toBeUndefined();
    expect(gone.spec?.virtualhost?.fqdn).toBe(`leave.${ns}.example.com`);
    const p = await getPolicy(ns, 'leaving');
    expect(p.status?.conditions?.find((c) => c.type === 'Attached')).toBeUndefined();
  });

  it('takes its fields away when the policy is deleted, and leaves the HTTPProxy', async () => {
    await applyProxyAsPlatform('deleted', rootSpec('deleted'));
    await createPolicy(ns, 'deleted', { targetRefs: [proxyRef('deleted')], plans, defaultPlan: 'free' });
    await waitForAttached('deleted', 'True', 'Attached', 60_000);
    await clients().custom.deleteNamespacedCustomObject({
      group: 'portico.dev',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'ratelimitpolicies',
      name: 'deleted',
    });
    const left = await waitFor('Portico’s fields to leave HTTPProxy deleted', async () => {
      const p = await readProxy('deleted');
      return managersOf(p).includes('portico-ratelimit/deleted') ? undefined : p;
    });
    expect(descriptorsOn(left)).toBeUndefined();
    expect(left.spec?.virtualhost?.fqdn).toBe(`deleted.${ns}.example.com`);
  });
});

describe('targets that cannot be wired', () => {
  it('names a target that does not exist, then attaches once it is created', async () => {
    await createPolicy(ns, 'early', { targetRefs: [proxyRef('later')], plans, defaultPlan: 'free' });
    const missing = await waitForAttached('early', 'False', 'TargetNotFound');
    expect(missing.message).toContain(`projectcontour.io/HTTPProxy later: not found in namespace ${ns}`);
    await applyProxyAsPlatform('later', rootSpec('later'));
    await waitForAttached('early', 'True', 'Attached', 60_000);
    expect(JSON.stringify(descriptorsOn(await readProxy('later')))).toContain(`${ns}/early`);
  });

  it('refuses a kind it cannot wire (an Ingress), naming it and the kinds it can', async () => {
    await createPolicy(ns, 'ingress', {
      targetRefs: [{ group: 'networking.k8s.io', kind: 'Ingress', name: 'web' }],
      plans,
      defaultPlan: 'free',
    });
    const c = await waitForAttached('ingress', 'False', 'UnsupportedTarget');
    expect(c.message).toContain(
      'networking.k8s.io/Ingress web: only projectcontour.io/HTTPProxy, gateway.networking.k8s.io/HTTPRoute and gateway.networking.k8s.io/Gateway (the last two with Envoy Gateway) targets are supported',
    );
  });

  it('a Gateway target while the Envoy Gateway attachment is off (this stack runs Contour) says so', async () => {
    await createPolicy(ns, 'gateway', {
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'web' }],
      plans,
      defaultPlan: 'free',
    });
    const c = await waitForAttached('gateway', 'False', 'EnvoyGatewayAttachmentDisabled');
    expect(c.message).toContain(
      'gateway.networking.k8s.io/Gateway web: the operator runs with --envoy-gateway-attachment=false',
    );
  });

  it('an HTTPRoute target while the Envoy Gateway attachment is off (this stack runs Contour) says so', async () => {
    await createPolicy(ns, 'route', {
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' }],
      plans,
      defaultPlan: 'free',
    });
    const c = await waitForAttached('route', 'False', 'EnvoyGatewayAttachmentDisabled');
    expect(c.message).toContain(
      'gateway.networking.k8s.io/HTTPRoute web: the operator runs with --envoy-gateway-attachment=false',
    );
  });

  it('refuses an HTTPProxy without spec.virtualhost (not a root proxy) and writes nothing to it', async () => {
    await applyProxyAsPlatform('child', {
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
    });
    await createPolicy(ns, 'child', { targetRefs: [proxyRef('child')], plans, defaultPlan: 'free' });
    const c = await waitForAttached('child', 'False', 'NotRootProxy');
    expect(c.message).toContain('projectcontour.io/HTTPProxy child: has no spec.virtualhost');
    const proxy = await readProxy('child');
    expect(proxy.spec?.virtualhost).toBeUndefined();
    expect(managersOf(proxy)).not.toContain('portico-ratelimit/child');
  });

  it("carries Contour's words when Contour refuses the HTTPProxy", async () => {
    await applyProxyAsPlatform('broken', {
      virtualhost: { fqdn: `broken.${ns}.example.com` },
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'no-such-service', port: 80 }] }],
    });
    await createPolicy(ns, 'broken', { targetRefs: [proxyRef('broken')], plans, defaultPlan: 'free' });
    const c = await waitForAttached('broken', 'False', 'RefusedByContour', 60_000);
    expect(c.message).toContain('projectcontour.io/HTTPProxy broken: Contour reports it invalid:');
    expect(c.message).toContain('no-such-service');
    // The descriptors are applied all the same: they take effect once the HTTPProxy is fixed.
    expect(JSON.stringify(descriptorsOn(await readProxy('broken')))).toContain(`${ns}/broken`);
    await applyProxyAsPlatform('broken', rootSpec('broken'));
    await waitForAttached('broken', 'True', 'Attached', 60_000);
  });

  it('never overwrites descriptors another manager owns, and names it', async () => {
    const theirs = [{ entries: [{ remoteAddress: {} }] }];
    await applyProxyAsPlatform('owned', {
      ...rootSpec('owned'),
      virtualhost: { fqdn: `owned.${ns}.example.com`, rateLimitPolicy: { global: { descriptors: theirs } } },
    });
    await createPolicy(ns, 'owned', { targetRefs: [proxyRef('owned')], plans, defaultPlan: 'free' });
    const c = await waitForAttached('owned', 'False', 'FieldConflict');
    expect(c.message).toContain('projectcontour.io/HTTPProxy owned');
    expect(c.message).toContain(PLATFORM);
    expect(c.message).toContain('.spec.virtualhost.rateLimitPolicy.global.descriptors');
    const proxy = await readProxy('owned');
    expect(descriptorsOn(proxy)).toEqual(theirs);
    expect(managersOf(proxy)).not.toContain('portico-ratelimit/owned');
  });

  it('lets only one policy hold an HTTPProxy: the second is told which one', async () => {
    await createPolicy(ns, 'second', { targetRefs: [proxyRef('api')], plans, defaultPlan: 'free' });
    const c = await waitForAttached('second', 'False', 'FieldConflict');
    expect(c.message).toContain('portico-ratelimit/public-api');
    expect(JSON.stringify(descriptorsOn(await readProxy('api')))).toContain(`${ns}/public-api`);
  });
});

describe("the CRD's rules on targetRefs", () => {
  const create = (name: string, targetRefs: PolicyTargetRef[]): Promise<void> =>
    createPolicy(ns, name, { targetRefs, plans, defaultPlan: 'free' });
  const refusal = async (p: Promise<void>): Promise<string> => {
    try {
      await p;
    } catch (err: unknown) {
      return String((err as { body?: unknown }).body ?? err);
    }
    throw new Error('the API server accepted the policy');
  };

  it('refuses more than 16 targets, a duplicate, and a malformed group or kind, with messages', async () => {
    const many = Array.from({ length: 17 }, (_, i) => proxyRef(`p${i}`));
    expect(await refusal(create('many', many))).toContain('at most 16 targetRefs are allowed');
    expect(await refusal(create('dup', [proxyRef('a'), proxyRef('a')]))).toMatch(
      /Duplicate value|must be unique/,
    );
    expect(
      await refusal(create('group', [{ group: 'projectcontour.io/v1', kind: 'HTTPProxy', name: 'a' }])),
    ).toContain('group must be an API group');
    expect(
      await refusal(create('kind', [{ group: 'projectcontour.io', kind: 'httpproxies/x', name: 'a' }])),
    ).toContain('kind must be a resource Kind');
  });
});
