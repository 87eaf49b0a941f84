/**
 * The Helm chart against the real tools and the real API server: the generated files are in step
 * (chart CRDs, deploy/), `helm lint` and `helm template` pass for the defaults and each variation in
 * charts/portico/ci/, the API server accepts every rendered object (`kubectl apply --dry-run=server`,
 * with Prometheus Operator's real ServiceMonitor CRD), the binary accepts the configuration the
 * chart gives each component, bad values fail with a message that names the value, and every Pod
 * template is admitted where the restricted Pod Security Standard is enforced.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  CHART,
  CLI,
  REPO,
  VARIATIONS,
  containerEnv,
  findDeployment,
  kubectl,
  knownVariables,
  parseManifests,
  podSpec,
  run,
  runOk,
  template,
  toolsBin,
  type Manifest,
} from './support/helm.js';

/** Server-side dry runs go here; it enforces the restricted Pod Security Standard. */
const NAMESPACE = 'helm-chart-checks';

beforeAll(async () => {
  // The optional ServiceMonitor is checked against Prometheus Operator's own CRD.
  const crd = (await runOk(`${REPO}scripts/fetch-servicemonitor-crd.sh`, [])).trim();
  const installed = await kubectl(['apply', '--server-side', '-f', crd]);
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

async function rendered(file: string | undefined, sets: readonly string[] = []): Promise<Manifest[]> {
  const out = await template(NAMESPACE, file, sets);
  expect(out.code, out.stderr).toBe(0);
  return parseManifests(out.stdout);
}

describe('generated files', () => {
  it('charts/portico/crds/ holds exactly crds/, and deploy/ is what the chart renders', async () => {
    const check = await run(`${REPO}scripts/render-deploy.sh`, ['--check'], {
      env: { ...process.env, HELM: `${await toolsBin()}/helm` },
    });
    expect(check.code, `${check.stderr}\n${check.stdout}`).toBe(0);
  });
});

describe.each(VARIATIONS)('values %s', (file) => {
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
    const out = await template(NAMESPACE, file);
    expect(out.code, out.stderr).toBe(0);
    const applied = await kubectl(['apply', '--dry-run=server', '-f', '-'], { input: out.stdout });
    expect(applied.code, applied.stderr).toBe(0);
    const objects = parseManifests(out.stdout);
    for (const m of objects) {
      expect(applied.stdout).toContain(`${m.metadata.name} created (server dry run)`);
    }
    // The namespace warns on workloads whose Pods the restricted standard would refuse.
    expect(applied.stderr).not.toContain('PodSecurity');
  });

  it('configures the controller only with variables `portico controller --help` lists, and the binary takes them', async () => {
    const controller = podSpec(findDeployment(await rendered(file), 'controller')).containers[0];
    expect(controller?.args).toEqual(['controller']);
    const env = containerEnv(controller ?? { name: '' }, NAMESPACE);
    const known = await knownVariables('controller');
    const unknown = Object.keys(env).filter((n) => n.startsWith('PORTICO_') && !known.has(n));
    expect(unknown, 'variables the controller does not read').toEqual([]);
    // With the chart's environment the configuration parses (a bad one exits 2 with a ConfigError);
    // the process then stops at the kubeconfig this test withholds.
    const started = await run(process.execPath, [CLI, 'controller'], {
      env: { PATH: process.env.PATH ?? '', ...env, KUBECONFIG: '/nonexistent/kubeconfig' },
      timeoutMs: 30_000,
    });
    expect(started.stderr).toContain('/nonexistent/kubeconfig');
    expect(started.code, started.stderr).toBe(1);
  });

  it('starts the rate-limit service only with flags and variables `portico ratelimit-server --help` lists', async () => {
    const objects = await rendered(file);
    if (!objects.some((m) => m.metadata.labels?.['app.kubernetes.io/component'] === 'ratelimit')) return;
    const container = podSpec(findDeployment(objects, 'ratelimit')).containers[0] ?? { name: '' };
    const [command, ...flags] = container.args ?? [];
    expect(command).toBe('ratelimit-server');
    const env = containerEnv(container, NAMESPACE, { 'portico-redis/url': 'redis://127.0.0.1:1' });
    const known = await knownVariables('ratelimit-server');
    expect(Object.keys(env).filter((n) => n.startsWith('PORTICO_') && !known.has(n))).toEqual([]);
    const started = await run(
      process.execPath,
      [CLI, 'ratelimit-server', ...flags, '--kubeconfig', '/nonexistent/kubeconfig'],
      {
        env: { PATH: process.env.PATH ?? '', ...env },
        timeoutMs: 30_000,
      },
    );
    expect(started.stderr).toContain('/nonexistent/kubeconfig');
    expect(started.code, started.stderr).toBe(1);
  });
});

describe('the defaults', () => {
  it('give two controller replicas on a Lease, PDBs, probes, and the restricted security context', async () => {
    const objects = await rendered('default-values.yaml');
    const kinds = objects.map((m) => `${m.kind}/${m.metadata.name}`).sort();
    expect(kinds).toEqual([
      'ClusterRole/portico-controller',
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
    message: /at '\/rateLimit\/failureMode': value must be one of 'allow', 'deny'/,
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
    name: 'two replicas without leader election',
    sets: ['platform.cnameTarget=sites.example.net', 'controller.leaderElection.enabled=false'],
    message: /controller.replicas is 2 but controller.leaderElection.enabled is false/,
  },
];

describe('values.schema.json and the template checks', () => {
  it.each(BAD_VALUES)('refuse $name with a message naming the value', async ({ sets, message }) => {
    const out = await template(NAMESPACE, undefined, sets);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toMatch(message);
  });
});

describe('restricted Pod Security', () => {
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
    for (const file of VARIATIONS) {
      const created = await dryRunPods(await rendered(file));
      expect(created.code, `${file}: ${created.stderr}`).toBe(0);
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
