/**
 * The Helm chart against the real tools and the real API server: the generated files are in step
 * (chart CRDs, deploy/), `helm lint` and `helm template` pass for the defaults and each variation in
 * charts/portico/ci/, the API server accepts every rendered object (`kubectl apply --dry-run=server`,
 * with Prometheus Operator's real ServiceMonitor CRD), the binary accepts the configuration the
 * chart gives each component, bad values fail with a message that names the value, and every Pod
 * template is admitted where the restricted Pod Security Standard is enforced. Then releases
 * installed for real (`helm install`, no kubelet, so no Pod runs): crds.install applies a changed
 * CRD on `helm upgrade`, also after taking over CRDs installed from crds/; and the tenant
 * ClusterRoles give the built-in view / edit / admin roles what docs/tenant-rbac.md says.
 */
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import {
  ApiextensionsV1Api,
  AuthorizationV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1ClusterRole,
  type V1CustomResourceDefinition,
  type V1LabelSelector,
  type V1PolicyRule,
  type V1ResourceAttributes,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { sandbox, unique, waitFor } from './support/cluster.js';
import {
  CHART,
  CLI,
  IMAGE_SETS,
  REPO,
  VARIATIONS,
  containerEnv,
  findDeployment,
  helm,
  kubectl,
  knownVariables,
  parseManifests,
  podSpec,
  run,
  runOk,
  secretVolumesAt,
  template,
  toolsBin,
  type Manifest,
  type RunResult,
} from './support/helm.js';

/** Server-side dry runs go here; it enforces the restricted Pod Security Standard. */
const NAMESPACE = 'helm-chart-checks';

beforeAll(async () => {
  // The optional ServiceMonitor and PodMonitor are checked against Prometheus Operator's own CRDs
  // (one bundle: the PodMonitor CRD sits beside the ServiceMonitor's).
  const crd = (await runOk(`${REPO}scripts/fetch-servicemonitor-crd.sh`, [])).trim();
  const podMonitorCrd = path.join(path.dirname(crd), 'monitoring.coreos.com_podmonitors.yaml');
  const installed = await kubectl(['apply', '--server-side', '-f', crd, '-f', podMonitorCrd]);
  expect(installed.code, installed.stderr).toBe(0);
  const ns = {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: NAMESPACE,
      labels: {
        'pod-security.kubernetes.io/enforce': 'restricted',
        'pod-security.kubernetes.io/warn': 'restricted',
      },
    },
  };
  const applied = await kubectl(['apply', '-f', '-'], { input: JSON.stringify(ns) });
  expect(applied.code, applied.stderr).toBe(0);
}, 300_000);

const renders = new Map<string, Promise<RunResult>>();

/**
 * `helm template` of `file` with `sets` in NAMESPACE, run once per file and sets: the tests that read
 * the same render share it (the chart does not change during the run).
 */
function templateOnce(file: string | undefined, sets: readonly string[] = []): Promise<RunResult> {
  const key = JSON.stringify([file, sets]);
  let out = renders.get(key);
  if (!out) {
    out = template(NAMESPACE, file, sets);
    renders.set(key, out);
  }
  return out;
}

/** The objects of `templateOnce(file, sets)`, parsed anew for each caller (a test may change its copy). */
async function rendered(file: string | undefined, sets: readonly string[] = []): Promise<Manifest[]> {
  const out = await templateOnce(file, sets);
  expect(out.code, out.stderr).toBe(0);
  return parseManifests(out.stdout);
}

describe.concurrent('generated files', () => {
  it('charts/portico/crds/ holds exactly crds/, and deploy/ is what the chart renders', async () => {
    const check = await run(`${REPO}scripts/render-deploy.sh`, ['--check'], {
      env: { ...process.env, HELM: `${await toolsBin()}/helm` },
    });
    expect(check.code, `${check.stderr}\n${check.stdout}`).toBe(0);
  });
});

/**
 * The files' checks share no state (renders are read-only, the dry runs store nothing), so they run
 * at once (vitest's maxConcurrency at a time): most of each is waiting for a child process.
 */
describe.concurrent.each(VARIATIONS)('values %s', (file) => {
  it('passes helm lint --strict', async () => {
    const lint = await run(`${await toolsBin()}/helm`, [
      'lint',
      CHART,
      '--strict',
      '--values',
      `${CHART}/ci/${file}`,
    ]);
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
    expect(lint.stdout).toContain('0 chart(s) failed');
  });

  it('renders objects the API server accepts (kubectl apply --dry-run=server), without Pod Security warnings', async () => {
    const out = await templateOnce(file);
    expect(out.code, out.stderr).toBe(0);
    const applied = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: out.stdout });
    expect(applied.code, applied.stderr).toBe(0);
    const objects = parseManifests(out.stdout);
    for (const m of objects) {
      // With crds.install the CRDs are there already (the stack installed them): configured.
      const verb = m.kind === 'CustomResourceDefinition' ? '(configured|unchanged)' : 'created';
      expect(applied.stdout).toMatch(
        new RegExp(`/${m.metadata.name.replaceAll('.', '\\.')} ${verb} \\(server dry run\\)`),
      );
    }
    // The namespace warns on workloads whose Pods the restricted standard would refuse.
    expect(applied.stderr).not.toContain('PodSecurity');
  });

  it('configures the controller only with variables `portico controller --help` lists, and the binary takes them', async () => {
    const controller = podSpec(findDeployment(await rendered(file), 'controller')).containers[0];
    const [command, ...flags] = controller?.args ?? [];
    expect(command).toBe('controller');
    // A Secret's value as the cluster would give it: the DNS-01 TSIG key secret is base64 (full-values.yaml).
    const env = containerEnv(controller ?? { name: '' }, NAMESPACE, {
      'portico-dns01-tsig/secret': Buffer.from('a TSIG key secret of 32 bytes...').toString('base64'),
    });
    const known = await knownVariables('controller');
    const unknown = Object.keys(env).filter((n) => n.startsWith('PORTICO_') && !known.has(n));
    expect(unknown, 'variables the controller does not read').toEqual([]);
    // With the chart's environment and flags (controller.extraArgs) the binary reads and checks the
    // configuration as a start does (--check-config); a bad one exits 2 with the ConfigError (below).
    const checked = await checkConfig('controller', flags, env);
    expect(checked.stdout, checked.stderr).toContain('the configuration is valid');
    expect(checked.code, checked.stderr).toBe(0);
  });

  it('starts the rate-limit service only with flags and variables `portico ratelimit-server --help` lists', async () => {
    const objects = await rendered(file);
    if (!objects.some((m) => m.metadata.labels?.['app.kubernetes.io/component'] === 'ratelimit')) return;
    const pod = podSpec(findDeployment(objects, 'ratelimit'));
    const container = pod.containers[0] ?? { name: '' };
    // The files of the Secrets the chart mounts (Redis passwords) exist here as the kubelet would write them.
    const [command, ...flags] = await secretVolumesAt(
      await mkdtemp(path.join(tmpdir(), 'portico-helm-secrets-')),
      pod,
      container,
      container.args ?? [],
    );
    expect(command).toBe('ratelimit-server');
    const env = containerEnv(container, NAMESPACE, { 'portico-redis/url': 'redis://127.0.0.1:1' });
    const known = await knownVariables('ratelimit-server');
    expect(Object.keys(env).filter((n) => n.startsWith('PORTICO_') && !known.has(n))).toEqual([]);
    // The Redis credential files are read, the TLS files checked, as at a start (--check-config).
    const checked = await checkConfig('ratelimit-server', flags, env);
    expect(checked.stdout, checked.stderr).toContain('the configuration is valid');
    expect(checked.code, checked.stderr).toBe(0);
  });
});

/**
 * Node's on-disk cache of compiled code (NODE_COMPILE_CACHE) for the checks' processes: each loads
 * the same bundle, which V8 then compiles once instead of once per process (the code run is the same).
 */
const COMPILE_CACHE = path.join(tmpdir(), 'portico-helm-test-compile-cache');

/**
 * `portico <command> <flags> --check-config` with `env` (and PATH) alone: the configuration read and
 * checked as a start reads it, without starting (exit 0), or the start's error (exit 2).
 */
function checkConfig(
  command: 'controller' | 'ratelimit-server',
  flags: readonly string[],
  env: Record<string, string>,
): Promise<RunResult> {
  return run(process.execPath, [CLI, command, ...flags, '--check-config'], {
    env: { PATH: process.env.PATH ?? '', NODE_COMPILE_CACHE: COMPILE_CACHE, ...env },
    timeoutMs: 60_000,
  });
}

describe.concurrent('--check-config refuses what a start refuses (the checks above have teeth)', () => {
  it('the controller with a log level it does not know exits 2 naming the flag and its variable', async () => {
    const controller = podSpec(findDeployment(await rendered('default-values.yaml'), 'controller'))
      .containers[0] ?? { name: '' };
    const [, ...flags] = controller.args ?? [];
    const env = containerEnv(controller, NAMESPACE);
    expect((await checkConfig('controller', flags, env)).code).toBe(0);
    const checked = await checkConfig('controller', flags, { ...env, PORTICO_LOG_LEVEL: 'verbose' });
    expect(checked.code, checked.stderr).toBe(2);
    expect(checked.stderr).toContain('--log-level must be one of');
    expect(checked.stdout).not.toContain('the configuration is valid');
  });

  it('the rate-limit service without the Redis password file its Secret volume holds exits 2 naming the file', async () => {
    const pod = podSpec(findDeployment(await rendered('ratelimit-sentinel-values.yaml'), 'ratelimit'));
    const container = pod.containers[0] ?? { name: '' };
    const root = await mkdtemp(path.join(tmpdir(), 'portico-helm-secrets-'));
    const [, ...flags] = await secretVolumesAt(root, pod, container, container.args ?? []);
    const env = containerEnv(container, NAMESPACE);
    expect((await checkConfig('ratelimit-server', flags, env)).code).toBe(0);
    const passwordFile = [...flags, ...Object.values(env)]
      .map((v) => v.replace(/^--[a-z-]+=/, ''))
      .find((v) => v.startsWith(root) && v.endsWith('password'));
    expect(passwordFile, 'a password file under the Secret volume').toBeDefined();
    await rm(passwordFile ?? '');
    const checked = await checkConfig('ratelimit-server', flags, env);
    expect(checked.code, checked.stderr).toBe(2);
    expect(checked.stderr).toMatch(/--redis(-sentinel)?-password-file ".*" cannot be used/);
  });
});

describe.concurrent('the defaults', () => {
  it('give two controller replicas on a Lease, PDBs, probes, and the restricted security context', async () => {
    const objects = await rendered('default-values.yaml');
    const kinds = objects.map((m) => `${m.kind}/${m.metadata.name}`).sort();
    expect(kinds).toEqual([
      'ClusterRole/portico-controller',
      'ClusterRole/portico-edit',
      'ClusterRole/portico-view',
      'ClusterRoleBinding/portico-controller',
      'Deployment/portico-controller',
      'PodDisruptionBudget/portico-controller',
      'Role/portico-controller',
      'RoleBinding/portico-controller',
      'Service/portico-controller',
      'ServiceAccount/portico-controller',
    ]);
    const deployment = findDeployment(objects, 'controller');
    expect((deployment.spec as { replicas: number }).replicas).toBe(2);
    const pod = podSpec(deployment);
    const container = pod.containers[0] ?? { name: '' };
    const env = containerEnv(container, NAMESPACE);
    expect(env).toMatchObject({
      PORTICO_NAMESPACE: NAMESPACE,
      PORTICO_LEADER_ELECT: 'true',
      PORTICO_LEADER_ELECTION_NAMESPACE: NAMESPACE,
      PORTICO_HTTP01_SERVICE: `portico-controller.${NAMESPACE}.svc.cluster.local:8089`,
    });
    expect(pod['securityContext']).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container['securityContext']).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container['livenessProbe']).toMatchObject({ httpGet: { path: '/healthz', port: 'metrics' } });
    expect(container['readinessProbe']).toMatchObject({ httpGet: { path: '/readyz', port: 'metrics' } });
  });
});

// The API server stores a NetworkPolicy, but the stack has no CNI plugin to enforce it: these tests
// check what the chart renders, not that a Pod is refused.
describe.concurrent(
  'the rate-limit service on, without networkPolicy.enabled (rendered; no CNI enforces it here)',
  () => {
    type Peer = {
      namespaceSelector?: { matchExpressions?: { key: string; operator: string; values: string[] }[] };
    };
    type Rule = { ports: { port: string }[]; from?: Peer[] };
    const grpcRule = (objects: Manifest[]): Rule | undefined => {
      const policy = objects.find(
        (m) => m.kind === 'NetworkPolicy' && m.metadata.name === 'portico-ratelimit',
      );
      const rules = (policy?.spec as { ingress?: Rule[] } | undefined)?.ingress ?? [];
      return rules.find((r) => r.ports.some((p) => p.port === 'grpc'));
    };

    it("admits gRPC checks only from the namespaces named projectcontour and envoy-gateway-system, by the API server's name label", async () => {
      const objects = await rendered('ratelimit-values.yaml');
      expect(objects.filter((m) => m.kind === 'NetworkPolicy').map((m) => m.metadata.name)).toEqual([
        'portico-ratelimit',
      ]);
      expect(grpcRule(objects)?.from).toEqual([
        {
          namespaceSelector: {
            matchExpressions: [
              {
                key: 'kubernetes.io/metadata.name',
                operator: 'In',
                values: ['projectcontour', 'envoy-gateway-system'],
              },
            ],
          },
        },
      ]);
    });

    it('admits every source with grpcFrom unset (--set …=null), and renders no policy with rateLimitServer.enabled=false', async () => {
      const open = await rendered('ratelimit-values.yaml', ['networkPolicy.rateLimitServer.grpcFrom=null']);
      expect(grpcRule(open)).toBeDefined();
      expect(grpcRule(open)?.from).toBeUndefined();
      const off = await rendered('ratelimit-values.yaml', ['networkPolicy.rateLimitServer.enabled=false']);
      expect(off.filter((m) => m.kind === 'NetworkPolicy')).toEqual([]);
    });
  },
);

/** Values that must fail, and the words the message must have so that the user knows what to fix. */
const BAD_VALUES: { name: string; sets: string[]; message: RegExp }[] = [
  { name: 'no platform.cnameTarget', sets: [], message: /at '\/platform': missing property 'cnameTarget'/ },
  {
    name: 'an uppercase CNAME target',
    sets: ['platform.cnameTarget=Sites.Example.net'],
    message: /at '\/platform\/cnameTarget': 'Sites.Example.net' does not match pattern/,
  },
  {
    name: 'a misspelt key',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.replica=3'],
    message: /at '\/controller': additional properties 'replica' not allowed/,
  },
  {
    name: 'an unknown routing mode',
    sets: ['platform.cnameTarget=sites.example.net', 'routing.mode=istio'],
    message: /at '\/routing\/mode': value must be one of 'ingress', 'gateway'/,
  },
  {
    name: 'gateway mode without a parent Gateway',
    sets: ['platform.cnameTarget=sites.example.net', 'routing.mode=gateway'],
    message: /routing.mode=gateway needs routing.gateway.parentRefs/,
  },
  {
    name: 'an unknown ingress flavor',
    sets: ['platform.cnameTarget=sites.example.net', 'routing.ingress.flavor=haproxy'],
    message: /at '\/routing\/ingress\/flavor': value must be one of 'nginx', 'traefik'/,
  },
  {
    name: 'a failure mode other than allow or deny',
    sets: ['platform.cnameTarget=sites.example.net', 'rateLimit.failureMode=open'],
    message: /at '\/rateLimit\/failureMode': value must be one of 'local', 'allow', 'deny'/,
  },
  {
    name: 'the rate-limit service without a Redis',
    sets: ['platform.cnameTarget=sites.example.net', 'rateLimit.enabled=true'],
    message: /at '\/rateLimit\/redis\/url': minLength: got 0, want 1[\s\S]*existingSecret\/name/,
  },
  {
    name: 'an EAB key id without its HMAC key Secret',
    sets: ['platform.cnameTarget=sites.example.net', 'acme.externalAccountBinding.keyId=kid-1'],
    message: /at '\/acme\/externalAccountBinding\/hmacKeySecretRef\/name': minLength: got 0, want 1/,
  },
  {
    name: 'a DNS resolver without a port',
    sets: ['platform.cnameTarget=sites.example.net', 'dns.resolvers={1.1.1.1}'],
    message: /at '\/dns\/resolvers\/0': '1.1.1.1' does not match pattern/,
  },
  {
    name: 'an ACME directory that is not a URL',
    sets: ['platform.cnameTarget=sites.example.net', 'acme.directoryUrl=letsencrypt'],
    message: /at '\/acme\/directoryUrl': 'letsencrypt' does not match pattern/,
  },
  {
    name: 'a log level the binary does not know',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.logLevel=verbose'],
    message: /at '\/controller\/logLevel': value must be one of 'trace', 'debug', 'info', 'warn', 'error'/,
  },
  {
    name: 'both maxUnavailable and minAvailable',
    sets: [
      'platform.cnameTarget=sites.example.net',
      'controller.podDisruptionBudget.maxUnavailable=1',
      'controller.podDisruptionBudget.minAvailable=1',
    ],
    message: /at '\/controller\/podDisruptionBudget': 'not' failed/,
  },
  {
    name: 'a renew deadline not below the lease duration',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.leaderElection.renewDeadlineSeconds=15'],
    message: /renewDeadlineSeconds \(15\) must be less than leaseDurationSeconds \(15\)/,
  },
  {
    name: 'both a ServiceMonitor and a PodMonitor',
    sets: [
      'platform.cnameTarget=sites.example.net',
      'metrics.serviceMonitor.enabled=true',
      'metrics.podMonitor.enabled=true',
    ],
    message: /metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true/,
  },
  {
    name: 'an extra controller argument that is not a flag',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.extraArgs={verbose}'],
    message: /at '\/controller\/extraArgs\/0': 'verbose' does not match pattern/,
  },
  {
    name: 'an extra volume mount without a path',
    sets: ['platform.cnameTarget=sites.example.net', 'rateLimitServer.extraVolumeMounts[0].name=data'],
    message: /at '\/rateLimitServer\/extraVolumeMounts\/0': missing property 'mountPath'/,
  },
  {
    name: 'an extra object without a kind',
    sets: [
      'platform.cnameTarget=sites.example.net',
      'extraObjects[0].apiVersion=v1',
      'extraObjects[0].metadata.name=x',
    ],
    message: /at '\/extraObjects\/0'/,
  },
  {
    name: 'two replicas without leader election',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.leaderElection.enabled=false'],
    message: /controller.replicas is 2 but controller.leaderElection.enabled is false/,
  },
];

describe.concurrent('values.schema.json and the template checks', () => {
  it.each(BAD_VALUES)('refuse $name with a message naming the value', async ({ sets, message }) => {
    const out = await template(NAMESPACE, undefined, sets);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(message);
  });

  it('a chart that names no released image (image.tag and image.digest empty, as in a checkout before its release) fails helm template and helm install naming the image, and installs nothing', async () => {
    const chart = parse(await readFile(`${CHART}/Chart.yaml`, 'utf8')) as {
      version: string;
      appVersion: string;
    };
    const named = new RegExp(
      `image: ghcr\\.io/portico-dev/portico:${chart.appVersion.replaceAll('.', '\\.')} is not an image a release pushed: this chart \\(version ${chart.version.replaceAll('.', '\\.')}\\) is from a source checkout`,
    );
    const unnamed = ['image.repository=ghcr.io/portico-dev/portico', 'image.tag=', 'image.digest='];
    const rendered = await template(NAMESPACE, undefined, [
      'platform.cnameTarget=sites.example.net',
      ...unnamed,
    ]);
    expect(rendered.code).not.toBe(0);
    expect(rendered.stderr).toMatch(named);
    const release = unique('noimage');
    const install = await helm([
      'install',
      release,
      CHART,
      '-n',
      NAMESPACE,
      '--skip-crds',
      ...[...RELEASE_SETS, ...unnamed].flatMap((s) => ['--set', s]),
    ]);
    expect(install.code).not.toBe(0);
    expect(install.stderr).toMatch(named);
    expect((await helm(['status', release, '-n', NAMESPACE])).code).not.toBe(0);
    const objects = await kubectl([
      'get',
      'all,serviceaccounts,roles',
      '-n',
      NAMESPACE,
      '-l',
      `app.kubernetes.io/instance=${release}`,
      '-o',
      'name',
    ]);
    expect(objects.code, objects.stderr).toBe(0);
    expect(objects.stdout).toBe('');
  });
});

describe.concurrent('restricted Pod Security', () => {
  async function dryRunPods(objects: Manifest[]): Promise<Awaited<ReturnType<typeof kubectl>>> {
    const pods = objects
      .filter((m) => m.kind === 'Deployment')
      .map((d) => ({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `${d.metadata.name}-pod`, namespace: NAMESPACE },
        spec: podSpec(d),
      }));
    expect(pods.length).toBeGreaterThan(0);
    return kubectl(['create', '--dry-run=server', '-f', '-'], {
      input: pods.map((p) => JSON.stringify(p)).join('\n'),
    });
  }

  it('admits the Pods of every Deployment in a namespace that enforces it', async () => {
    const created = await Promise.all(VARIATIONS.map(async (file) => dryRunPods(await rendered(file))));
    for (const [i, file] of VARIATIONS.entries()) {
      expect(created[i]?.code, `${file}: ${created[i]?.stderr}`).toBe(0);
    }
  });

  it('refuses them when the security context is weakened (the check above has teeth)', async () => {
    const created = await dryRunPods(
      await rendered('default-values.yaml', ['containerSecurityContext.allowPrivilegeEscalation=true']),
    );
    expect(created.code).not.toBe(0);
    expect(created.stderr).toContain(
      'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false',
    );
  });
});

describe.concurrent('extra arguments, volumes and objects, and the PodMonitor', () => {
  it('extraArgs, extraVolumes and extraVolumeMounts reach each component', async () => {
    const objects = await rendered('extras-values.yaml');
    const controller = podSpec(findDeployment(objects, 'controller'));
    expect(controller.containers[0]?.args).toEqual(['controller', '--certificate-overdue-seconds=3600']);
    expect(controller['volumes']).toContainEqual({ name: 'proxy-ca', configMap: { name: 'proxy-ca' } });
    expect(controller.containers[0]?.['volumeMounts']).toContainEqual({
      name: 'proxy-ca',
      mountPath: '/etc/proxy-ca',
      readOnly: true,
    });
    const ratelimit = podSpec(findDeployment(await rendered('full-values.yaml'), 'ratelimit'));
    expect(ratelimit.containers[0]?.args?.at(-1)).toBe('--redis-timeout-ms=1000');
    expect(ratelimit['volumes']).toContainEqual({ name: 'scratch', emptyDir: { sizeLimit: '8Mi' } });
    expect(ratelimit.containers[0]?.['volumeMounts']).toContainEqual({
      name: 'scratch',
      mountPath: '/var/run/scratch',
    });
  });

  it('renders extraObjects, maps and strings, through tpl', async () => {
    const objects = await rendered('extras-values.yaml');
    const configMap = objects.find((m) => m.kind === 'ConfigMap' && m.metadata.name === 'portico-proxy-ca');
    expect(configMap?.metadata.namespace).toBe(NAMESPACE);
    expect(configMap?.['data']).toEqual({ release: 'portico' });
    const policy = objects.find((m) => m.kind === 'RateLimitPolicy');
    expect(policy?.metadata).toEqual({ name: 'public-api', namespace: NAMESPACE });
    expect((policy?.spec as { defaultPlan: string }).defaultPlan).toBe('free');
  });

  it('renders a PodMonitor per component, with the ServiceMonitor job names, that the API server accepts', async () => {
    const monitors = (
      await rendered('extras-values.yaml', [
        'rateLimit.enabled=true',
        'rateLimit.redis.url=redis://redis:6379',
      ])
    ).filter((m) => m.kind === 'PodMonitor');
    expect(monitors.map((m) => m.metadata.name).sort()).toEqual(['portico-controller', 'portico-ratelimit']);
    for (const m of monitors) {
      // The job a ServiceMonitor gives is the Service's name; the PrometheusRule selects it.
      const [endpoint] = (m.spec as { podMetricsEndpoints: Record<string, unknown>[] }).podMetricsEndpoints;
      expect(endpoint).toMatchObject({
        port: 'metrics',
        path: '/metrics',
        interval: '15s',
        relabelings: [{ action: 'replace', targetLabel: 'job', replacement: m.metadata.name }],
      });
      expect(m.metadata.labels?.['release']).toBe('kube-prometheus-stack');
    }
    const applied = await kubectl(['apply', '--dry-run=server', '-f', '-'], {
      input: monitors.map((m) => JSON.stringify(m)).join('\n'),
    });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      'podmonitor.monitoring.coreos.com/portico-controller created (server dry run)',
    );
    // The API server validates against the CRD's schema: a misspelt field is refused.
    const bad = structuredClone(monitors[0]) as Manifest;
    (bad.spec as Record<string, unknown>)['podMetricEndpoints'] = [];
    const refused = await kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], {
      input: JSON.stringify(bad),
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('podMetricEndpoints');
  });
});

function annotationsOf(m: Manifest | undefined): Record<string, string> | undefined {
  return (m?.metadata as { annotations?: Record<string, string> } | undefined)?.annotations;
}

/** The CRD files of the chart (crds/, copied there by scripts/render-deploy.sh), parsed. */
async function chartCrds(chart = CHART): Promise<Manifest[]> {
  const files = (await readdir(`${chart}/crds`)).filter((f) => f.endsWith('.yaml')).sort();
  return Promise.all(files.map(async (f) => parse(await readFile(`${chart}/crds/${f}`, 'utf8')) as Manifest));
}

describe.concurrent('crds.install', () => {
  it('renders exactly the CRDs of crds/, with the release labels and helm.sh/resource-policy: keep', async () => {
    const crds = (await rendered('default-values.yaml', ['crds.install=true'])).filter(
      (m) => m.kind === 'CustomResourceDefinition',
    );
    const files = await chartCrds();
    expect(crds.map((m) => m.metadata.name).sort()).toEqual(files.map((m) => m.metadata.name).sort());
    for (const file of files) {
      const crd = crds.find((m) => m.metadata.name === file.metadata.name);
      expect(crd?.spec).toEqual(file.spec);
      expect(crd?.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm' });
      expect(annotationsOf(crd)).toEqual({ 'helm.sh/resource-policy': 'keep' });
    }
    const unkept = (await rendered('default-values.yaml', ['crds.install=true', 'crds.keep=false'])).filter(
      (m) => m.kind === 'CustomResourceDefinition',
    );
    expect(unkept.map((m) => annotationsOf(m))).toEqual(files.map(() => undefined));
    const none = await rendered('default-values.yaml');
    expect(none.filter((m) => m.kind === 'CustomResourceDefinition')).toEqual([]);
  });
});

/**
 * Releases installed for real into the stack's API server, in NAMESPACE. The chart's own CRDs are
 * the stack's (other tests use them), so the CRD tests install a copy of the chart whose CRDs are
 * moved to a group of their own; the admission policies, which would restrict the stack's
 * HostnameClaims, EnvoyPatchPolicies and ExternalName Services to this release's controller, are off.
 */
const RELEASE_SETS = [
  ...IMAGE_SETS,
  'platform.cnameTarget=sites.example.net',
  'admissionPolicy.hostnameClaims.enabled=false',
  'admissionPolicy.rateLimitDescriptors.enabled=false',
  'admissionPolicy.externalNameServices.enabled=false',
];
const tempDirs: string[] = [];
const crdGroups: string[] = [];

afterAll(async () => {
  for (const group of crdGroups) {
    for (const name of copyCrdNames(group)) {
      await kubectl(['delete', 'crd', name, '--ignore-not-found', '--wait=false']);
    }
  }
  for (const dir of tempDirs) await rm(dir, { recursive: true, force: true });
}, 60_000);

const CRD_PLURALS = ['customdomains', 'hostnameclaims', 'projects', 'ratelimitpolicies'] as const;
/** Prefix of the copies' kinds and resource names (see chartCopy). */
const COPY_PREFIX = 'copy';

/** The CRD names chartCopy gives in `group`: copy<plural>.<group>, in CRD_PLURALS' order. */
function copyCrdNames(group: string): string[] {
  return CRD_PLURALS.map((plural) => `${COPY_PREFIX}${plural}.${group}`);
}

/**
 * A copy of the chart whose CRDs are in API group `group` (names copy<plural>.<group>), with
 * `change` applied to the CustomDomain CRD. Returns the copy's directory.
 *
 * The copies' kinds, resource names, short names and categories are their own (Copy<Kind>,
 * copy<plural>, none, none): kubectl resolves `hostnameclaim`, `cd` or the `portico` category
 * across every group that serves it and prefers the group that sorts first, so a copy with the
 * stack's names would answer, or vanish under, other test files' kubectl commands (a CI run saw
 * `kubectl get hostnameclaim` read an empty copy group, and `kubectl get portico` fail on a copy
 * deleted in the middle).
 */
async function chartCopy(
  group: string,
  change?: (customDomains: Manifest) => void,
  into?: string,
): Promise<string> {
  const dir = into ?? path.join(await mkdtemp(path.join(tmpdir(), 'portico-chart-')), 'portico');
  if (!into) {
    tempDirs.push(path.dirname(dir));
    await cp(CHART, dir, { recursive: true });
  }
  for (const file of (await readdir(`${CHART}/crds`)).filter((f) => f.endsWith('.yaml'))) {
    const crd = parse(await readFile(`${CHART}/crds/${file}`, 'utf8')) as Manifest & {
      spec: { group: string; names: CrdNames };
    };
    const names = crd.spec.names;
    const original = names.plural;
    crd.spec.group = group;
    crd.spec.names = {
      kind: `Copy${names.kind}`,
      listKind: `Copy${names.listKind ?? `${names.kind}List`}`,
      plural: `${COPY_PREFIX}${names.plural}`,
      singular: `${COPY_PREFIX}${names.singular ?? names.kind.toLowerCase()}`,
    };
    crd.metadata.name = `${crd.spec.names.plural}.${group}`;
    if (original === 'customdomains') change?.(crd);
    await writeFile(`${dir}/crds/${file}`, stringify(crd));
  }
  if (!crdGroups.includes(group)) crdGroups.push(group);
  return dir;
}

interface CrdNames {
  kind: string;
  listKind?: string;
  plural: string;
  singular?: string;
  shortNames?: string[];
  categories?: string[];
}

/** Adds the optional field spec.upgradeMarker to every version of the CustomDomain CRD. */
function addUpgradeMarker(crd: Manifest): void {
  const versions = (crd.spec as { versions: { schema: { openAPIV3Schema: SchemaNode } }[] }).versions;
  for (const v of versions) {
    const spec = v.schema.openAPIV3Schema.properties?.['spec'];
    if (!spec?.properties) throw new Error('the CustomDomain CRD has no spec properties');
    spec.properties['upgradeMarker'] = { type: 'string', maxLength: 63, description: 'Added by the test.' };
  }
}

interface SchemaNode {
  type?: string;
  properties?: Record<string, SchemaNode>;
  [key: string]: unknown;
}

/** The stack's admin kubeconfig, for API clients. */
function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return kc;
}

async function liveCrd(name: string): Promise<V1CustomResourceDefinition> {
  return kubeConfig().makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name });
}

/** The fields of `spec` in the first version's schema of a live CRD. */
function specFields(crd: V1CustomResourceDefinition): string[] {
  return Object.keys(crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.['spec']?.properties ?? {});
}

describe.concurrent('crds.install in the API server (helm install and upgrade)', () => {
  it('a first install with --skip-crds creates the CRDs; helm upgrade applies a changed one; helm uninstall keeps them', async () => {
    const group = `${unique('crds-a')}.portico.dev`;
    const chart = await chartCopy(group);
    const release = unique('crds-a');
    const sets = [...RELEASE_SETS, 'crds.install=true'].flatMap((s) => ['--set', s]);
    const install = await helm(['install', release, chart, '-n', NAMESPACE, '--skip-crds', ...sets]);
    expect(install.code, install.stderr).toBe(0);
    expect(install.stdout).toContain('the CRDs are part of this release (crds.install)');
    const [customDomains = ''] = copyCrdNames(group);
    const installed = await liveCrd(customDomains);
    expect(installed.metadata?.annotations).toMatchObject({
      'helm.sh/resource-policy': 'keep',
      'meta.helm.sh/release-name': release,
    });
    expect(specFields(installed)).not.toContain('upgradeMarker');

    await chartCopy(group, addUpgradeMarker, chart);
    const upgrade = await helm(['upgrade', release, chart, '-n', NAMESPACE, '--reuse-values']);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(specFields(await liveCrd(customDomains))).toContain('upgradeMarker');

    const uninstall = await helm(['uninstall', release, '-n', NAMESPACE]);
    expect(uninstall.code, uninstall.stderr).toBe(0);
    expect(uninstall.stdout + uninstall.stderr).toContain('kept due to the resource policy');
    for (const name of copyCrdNames(group)) {
      expect((await kubectl(['get', 'crd', name])).code, name).toBe(0);
    }
  });

  it('a release that installed its CRDs from crds/ takes them over (docs/install.md) and then upgrades them', async () => {
    const group = `${unique('crds-b')}.portico.dev`;
    const chart = await chartCopy(group);
    const release = unique('crds-b');
    const sets = RELEASE_SETS.flatMap((s) => ['--set', s]);
    const install = await helm(['install', release, chart, '-n', NAMESPACE, ...sets]);
    expect(install.code, install.stderr).toBe(0);
    expect(install.stdout).toContain('Helm does not update CRDs it installed from the chart');
    const names = copyCrdNames(group);
    expect(
      (await liveCrd(names[0] ?? '')).metadata?.labels?.['app.kubernetes.io/managed-by'],
    ).toBeUndefined();

    await chartCopy(group, addUpgradeMarker, chart);
    // Without the take-over Helm refuses, and changes nothing.
    const refused = await helm([
      'upgrade',
      release,
      chart,
      '-n',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'crds.install=true',
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /exists and cannot be imported into the current release: invalid ownership metadata/,
    );
    expect(specFields(await liveCrd(names[0] ?? ''))).not.toContain('upgradeMarker');

    // The take-over of docs/install.md: Helm's ownership label and annotations on each CRD.
    const labelled = await kubectl([
      'label',
      'crd',
      ...names,
      'app.kubernetes.io/managed-by=Helm',
      '--overwrite',
    ]);
    expect(labelled.code, labelled.stderr).toBe(0);
    const annotated = await kubectl([
      'annotate',
      'crd',
      ...names,
      `meta.helm.sh/release-name=${release}`,
      `meta.helm.sh/release-namespace=${NAMESPACE}`,
      '--overwrite',
    ]);
    expect(annotated.code, annotated.stderr).toBe(0);
    const upgrade = await helm([
      'upgrade',
      release,
      chart,
      '-n',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'crds.install=true',
    ]);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    const upgraded = await liveCrd(names[0] ?? '');
    expect(specFields(upgraded)).toContain('upgradeMarker');
    expect(upgraded.metadata?.annotations).toMatchObject({ 'helm.sh/resource-policy': 'keep' });
    const uninstall = await helm(['uninstall', release, '-n', NAMESPACE]);
    expect(uninstall.code, uninstall.stderr).toBe(0);
    expect((await kubectl(['get', 'crd', names[0] ?? ''])).code).toBe(0);
  });
});

/** A LabelSelector as a `labelSelector` query parameter (`kubectl -l`) takes it. */
function selectorString(selector: V1LabelSelector): string {
  const terms = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector.matchExpressions ?? []) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') terms.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') terms.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') terms.push(e.key);
    else terms.push(`!${e.key}`);
  }
  return terms.join(',');
}

/**
 * The rules kube-controller-manager's ClusterRole aggregation (pkg/controller/clusterroleaggregation)
 * gives `role`: those of the ClusterRoles its selectors match (the API server selects), by name,
 * itself left out, without duplicates.
 */
async function aggregatedRules(rbac: RbacAuthorizationV1Api, role: V1ClusterRole): Promise<V1PolicyRule[]> {
  const rules: V1PolicyRule[] = [];
  for (const selector of role.aggregationRule?.clusterRoleSelectors ?? []) {
    const matched = await rbac.listClusterRole({ labelSelector: selectorString(selector) });
    const roles = matched.items
      .filter((r) => r.metadata?.name !== role.metadata?.name)
      .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
    for (const rule of roles.flatMap((r) => r.rules ?? [])) {
      if (!rules.some((r) => isDeepStrictEqual(r, rule))) rules.push(rule);
    }
  }
  return rules;
}

/**
 * The ClusterRole aggregation, played by the test because the e2e stack runs no
 * kube-controller-manager: every ClusterRole with an aggregationRule gets its aggregatedRules,
 * repeated until nothing changes, as view's rules reach edit and edit's reach admin through the
 * built-in roles' own labels.
 */
async function aggregateClusterRoles(): Promise<void> {
  const rbac = kubeConfig().makeApiClient(RbacAuthorizationV1Api);
  for (let round = 0; round < 5; round++) {
    let changed = false;
    for (const role of (await rbac.listClusterRole()).items.filter((r) => r.aggregationRule)) {
      const rules = await aggregatedRules(rbac, role);
      if (isDeepStrictEqual(rules, role.rules ?? [])) continue;
      await rbac.replaceClusterRole({ name: role.metadata?.name ?? '', body: { ...role, rules } });
      changed = true;
    }
    if (!changed) return;
  }
  throw new Error('ClusterRole aggregation did not settle in 5 rounds');
}

/**
 * `verb resource[.group][/subresource] [namespace]`, e.g. "create customdomains.portico.dev ns",
 * as the authorizer sees a request. A request on the Namespace object itself (`namespaces/<ns>`)
 * carries that namespace, as the API server's request info gives it.
 */
function attributes(request: string): V1ResourceAttributes {
  const [verb = '', target = '', namespace] = request.split(' ');
  const [resourceAndGroup = '', nameOrSub] = target.split('/');
  const dot = resourceAndGroup.indexOf('.');
  const resource = dot < 0 ? resourceAndGroup : resourceAndGroup.slice(0, dot);
  const group = dot < 0 ? '' : resourceAndGroup.slice(dot + 1);
  const attrs: V1ResourceAttributes = { verb, resource, group };
  if (resource === 'namespaces' && nameOrSub) return { ...attrs, name: nameOrSub, namespace: nameOrSub };
  if (nameOrSub) attrs.subresource = nameOrSub;
  if (namespace) attrs.namespace = namespace;
  return attrs;
}

describe('tenant roles (rbac.aggregateClusterRoles) with the built-in view, edit and admin', () => {
  const release = unique('tenants');
  const [home, other] = [unique('tenant-home'), unique('tenant-other')];
  const subject = (sa: string): string => `system:serviceaccount:${home}:${sa}`;

  /**
   * What `kubectl auth can-i` asks: a SubjectAccessReview for ServiceAccount `sa` of the tenant's
   * namespace (its user name and groups), answered by the API server's authorizers.
   */
  async function can(sa: string, request: string): Promise<boolean> {
    const review = await kubeConfig()
      .makeApiClient(AuthorizationV1Api)
      .createSubjectAccessReview({
        body: {
          spec: {
            user: subject(sa),
            groups: ['system:serviceaccounts', `system:serviceaccounts:${home}`, 'system:authenticated'],
            resourceAttributes: attributes(request),
          },
        },
      });
    return review.status?.allowed === true;
  }

  beforeAll(async () => {
    // The chart's own CRDs are the stack's: --skip-crds.
    const install = await helm([
      'install',
      release,
      CHART,
      '-n',
      NAMESPACE,
      '--skip-crds',
      ...RELEASE_SETS.flatMap((s) => ['--set', s]),
    ]);
    expect(install.code, install.stderr).toBe(0);
    await aggregateClusterRoles();
    // A tenant namespace with a viewer, an editor and an admin, each bound with a RoleBinding to
    // the built-in role of that name, as docs/tenant-rbac.md shows.
    const objects: object[] = [home, other].map((name) => ({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name },
    }));
    for (const role of ['view', 'edit', 'admin']) {
      objects.push(
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: `${role}er`, namespace: home } },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: `tenant-${role}`, namespace: home },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
          subjects: [{ kind: 'ServiceAccount', name: `${role}er`, namespace: home }],
        },
      );
    }
    const applied = await kubectl(['apply', '-f', '-'], {
      input: objects.map((o) => JSON.stringify(o)).join('\n'),
    });
    expect(applied.code, applied.stderr).toBe(0);
    // The RBAC authorizer reads roles from its cache: wait until the aggregated rules are in it.
    await waitFor('the aggregated rules to authorize', async () =>
      (await can('editer', `create customdomains.portico.dev ${home}`)) ? true : undefined,
    );
  }, 120_000);

  afterAll(async () => {
    await helm(['uninstall', release, '-n', NAMESPACE]);
    // The built-in roles lose Portico's rules again, as the aggregation controller would do.
    await aggregateClusterRoles();
    await kubectl(['delete', 'namespace', home, other, '--wait=false']);
  }, 120_000);

  it('the chart adds its rules to the built-in roles only through the aggregation labels', async () => {
    const roles = await kubeConfig()
      .makeApiClient(RbacAuthorizationV1Api)
      .listClusterRole({
        labelSelector: `app.kubernetes.io/instance=${release}`,
      });
    const byName = new Map(roles.items.map((r) => [r.metadata?.name, r]));
    expect(byName.get(`${release}-portico-view`)?.metadata?.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-view': 'true',
      'rbac.authorization.k8s.io/aggregate-to-edit': 'true',
      'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
    });
    expect(byName.get(`${release}-portico-edit`)?.metadata?.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-edit': 'true',
      'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
    });
    expect(byName.get(`${release}-portico-edit`)?.metadata?.labels).not.toHaveProperty(
      'rbac.authorization.k8s.io/aggregate-to-view',
    );
    // Bound to nobody: the built-in roles carry the rights.
    const bindings = await kubectl(['get', 'clusterrolebindings,rolebindings', '-A', '-o', 'json']);
    const refs = (JSON.parse(bindings.stdout) as { items: { roleRef: { name: string } }[] }).items.map(
      (b) => b.roleRef.name,
    );
    expect(refs).not.toContain(`${release}-portico-view`);
    expect(refs).not.toContain(`${release}-portico-edit`);
  });

  it('edit creates a CustomDomain in its namespace (a real create request, server dry run) and not in another', async () => {
    const domain = (namespace: string): string =>
      JSON.stringify({
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'CustomDomain',
        metadata: { name: 'www', namespace },
        spec: { hostname: `www.${namespace}.example`, service: { name: 'web', port: 80 } },
      });
    const created = await kubectl(['create', '--dry-run=server', '-f', '-', '--as', subject('editer')], {
      input: domain(home),
    });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('customdomain.portico.dev/www created (server dry run)');
    const refused = await kubectl(['create', '--dry-run=server', '-f', '-', '--as', subject('editer')], {
      input: domain(other),
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      `cannot create resource "customdomains" in API group "portico.dev" in the namespace "${other}"`,
    );
  });

  // `verb resource[/subresource] [namespace]`: "home" is the tenant's namespace, "other" another
  // one; no namespace is a cluster-wide request (all namespaces, or a cluster-scoped kind).
  it.each([
    // edit: the namespace's CustomDomains, nothing of the controller's, RateLimitPolicies read-only.
    ['editer', 'create customdomains.portico.dev home', true],
    ['editer', 'patch customdomains.portico.dev home', true],
    ['editer', 'delete customdomains.portico.dev home', true],
    ['editer', 'list customdomains.portico.dev home', true],
    ['editer', 'create customdomains.portico.dev other', false],
    ['editer', 'list customdomains.portico.dev', false],
    ['editer', 'update customdomains.portico.dev/status home', false],
    ['editer', 'get ratelimitpolicies.portico.dev home', true],
    ['editer', 'create ratelimitpolicies.portico.dev home', false],
    ['editer', 'patch ratelimitpolicies.portico.dev home', false],
    ['editer', 'update ratelimitpolicies.portico.dev/status home', false],
    ['editer', 'create hostnameclaims.portico.dev', false],
    ['editer', 'get hostnameclaims.portico.dev', false],
    ['editer', 'patch namespaces/home', false],
    // view: read only, Events included, Secrets not.
    ['viewer', 'get customdomains.portico.dev home', true],
    ['viewer', 'watch customdomains.portico.dev home', true],
    ['viewer', 'get ratelimitpolicies.portico.dev home', true],
    ['viewer', 'list events home', true],
    ['viewer', 'create customdomains.portico.dev home', false],
    ['viewer', 'patch customdomains.portico.dev home', false],
    ['viewer', 'get customdomains.portico.dev other', false],
    ['viewer', 'get secrets home', false],
    // admin: what edit may, and no more of Portico's.
    ['adminer', 'create customdomains.portico.dev home', true],
    ['adminer', 'deletecollection customdomains.portico.dev home', true],
    ['adminer', 'update customdomains.portico.dev/status home', false],
    ['adminer', 'create ratelimitpolicies.portico.dev home', false],
    ['adminer', 'delete hostnameclaims.portico.dev', false],
    ['adminer', 'patch namespaces/home', false],
  ] as [string, string, boolean][])('%s: %s → %s', async (sa, request, allowed) => {
    const named = request.replace(/\bhome\b/g, home).replace(/\bother\b/g, other);
    expect(await can(sa, named)).toBe(allowed);
  });

  it('without the aggregation labels edit grants nothing of Portico (the checks above have teeth)', async () => {
    const upgrade = await helm([
      'upgrade',
      release,
      CHART,
      '-n',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'rbac.aggregateClusterRoles=false',
    ]);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    await aggregateClusterRoles();
    await waitFor('edit to lose the CustomDomain rules', async () =>
      (await can('editer', `create customdomains.portico.dev ${home}`)) ? undefined : true,
    );
    expect(await can('viewer', `get customdomains.portico.dev ${home}`)).toBe(false);
  });
});
