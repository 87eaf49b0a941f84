/**
 * The chart installed with `helm install` into the e2e stack's API server (RBAC authorization on),
 * then each component run from dist/ as the chart's ServiceAccount, with a token from the
 * TokenRequest API and the configuration the installed Deployment gives it:
 *
 *   - the controller takes a CustomDomain through the whole flow (accepted, DNS verified, ACME
 *     order, TLS Secret, Ingress and challenge Service, Ready) and removes it again: the RBAC is
 *     enough;
 *   - the rate-limit service reads its config and writes its load report;
 *   - `kubectl auth can-i --as system:serviceaccount:...` shows what each identity must not do;
 *   - `helm upgrade` and `helm uninstall` (CRDs and the Secrets the controller made stay).
 *
 * No kubelet runs, so the Deployments' Pods never start: the test starts the processes itself. The
 * stack's own operator is stopped meanwhile (the CA validates HTTP-01 on the port it listens on) and
 * started again afterwards with the same command line.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { reportKey } from '../../src/ratelimit/load-report.js';
import { renderCompiledConfig } from '../../src/ratelimit/config-schema.js';
import {
  httpStatus,
  restartStackController as restartStack,
  runAll,
  stopChild,
  stopStackController as stopStack,
  type ControllerCommand,
} from './support/stack-controller.js';
import {
  createCustomDomain,
  createProject,
  dns,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  deleteCustomDomain,
} from './support/cluster.js';
import {
  CHART,
  CLI,
  IMAGE_SETS,
  containerEnv,
  helm,
  knownVariables,
  kubectl,
  podSpec,
  type Manifest,
} from './support/helm.js';

const NAMESPACE = 'portico-rbac';
const RELEASE = 'portico';
const CONTROLLER_SA = 'portico-controller';
const RATELIMIT_SA = 'portico-ratelimit';
const CA_CONFIGMAP = 'acme-ca';
const LOGS = path.join(sandbox.sandboxDir, 'logs');

let stackController: ControllerCommand | undefined;
const started: { child: ChildProcess; log: string }[] = [];
/** Temporary directories of the service accounts' kubeconfigs, removed after the file. */
const tempDirs: string[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

/**
 * The requests the API server refused in a process log, one line each ("create events in
 * namespace x"): RBAC errors surface as 403 Forbidden in the logged errors.
 */
function refusals(log: string): string[] {
  const text = log.replaceAll('\\', '');
  const found = new Set<string>();
  for (const m of text.matchAll(
    /cannot (\w+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)")?/g,
  )) {
    found.add(`${m[1]} ${m[2]}${m[3] ? `.${m[3]}` : ''} ${m[4] ? `in namespace ${m[4]}` : 'cluster-wide'}`);
  }
  if (found.size === 0 && /"code":\s*403\b/.test(text)) found.add('a request (see the log)');
  return [...found];
}

/** A kubeconfig that authenticates with a TokenRequest token of `serviceAccount`, and only with it. */
async function serviceAccountKubeconfig(serviceAccount: string): Promise<string> {
  const token = await kube().core.createNamespacedServiceAccountToken({
    namespace: NAMESPACE,
    name: serviceAccount,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  const admin = new KubeConfig();
  admin.loadFromFile(sandbox.kubeconfig);
  const cluster = admin.getCurrentCluster();
  const caData = cluster?.caData ?? Buffer.from(await readFile(cluster?.caFile ?? '')).toString('base64');
  const name = `${NAMESPACE}-${serviceAccount}`;
  const dir = await mkdtemp(path.join(tmpdir(), 'portico-rbac-'));
  tempDirs.push(dir);
  const file = path.join(dir, `${serviceAccount}.kubeconfig`);
  await writeFile(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name, cluster: { server: sandbox.apiServerUrl, 'certificate-authority-data': caData } }],
      users: [{ name, user: { token: token.status?.token } }],
      contexts: [{ name, context: { cluster: name, user: name } }],
      'current-context': name,
    }),
    { mode: 0o600 },
  );
  return file;
}

async function installedDeployment(name: string): Promise<Manifest> {
  const got = await kubectl(['get', 'deployment', name, '-n', NAMESPACE, '-o', 'json']);
  expect(got.code, got.stderr).toBe(0);
  return JSON.parse(got.stdout) as Manifest;
}

/** Starts `node dist/cli.js <args>` with exactly `env` (plus PATH), output to `<stack>/logs/<log>`. */
function startProcess(args: string[], env: Record<string, string>, log: string): ChildProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = createWriteStream(path.join(LOGS, log));
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  started.push({ child, log: path.join(LOGS, log) });
  return child;
}

async function stopStackController(): Promise<void> {
  stackController = await stopStack();
}

async function restartStackController(): Promise<void> {
  await restartStack(stackController);
}

let installOutput = '';

beforeAll(async () => {
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
  const ca = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: CA_CONFIGMAP, namespace: NAMESPACE },
    data: { 'ca.crt': await readFile(sandbox.acmeCaBundle, 'utf8') },
  };
  const applied = await kubectl(['apply', '-f', '-'], {
    input: [ns, ca].map((o) => JSON.stringify(o)).join('\n'),
  });
  expect(applied.code, applied.stderr).toBe(0);
  const install = await helm([
    'install',
    RELEASE,
    CHART,
    '--namespace',
    NAMESPACE,
    ...IMAGE_SETS.flatMap((set) => ['--set', set]),
    '--set',
    `platform.cnameTarget=${sandbox.platformCnameTarget}`,
    '--set',
    `dns.resolvers={${sandbox.dnsServer}}`,
    '--set',
    `acme.directoryUrl=${sandbox.acmeDirectoryUrl}`,
    '--set',
    'acme.email=ops@portico.test',
    '--set',
    `acme.caBundle.configMapName=${CA_CONFIGMAP}`,
    '--set',
    `acme.http01.selfCheckPort=${sandbox.http01Port}`,
    // No ingress controller runs here to publish the Ingress's address (docs/routing.md).
    '--set',
    'routing.dataPlaneAcknowledgement=false',
    '--set',
    'rateLimit.enabled=true',
    '--set',
    `rateLimit.redis.url=${sandbox.redisUrl}`,
  ]);
  expect(install.code, install.stderr).toBe(0);
  installOutput = install.stdout;
}, 120_000);

afterAll(async () => {
  await runAll(
    ...started.map(
      ({ child, log }) =>
        () =>
          stopChild(child, `portico ${child.spawnargs[2] ?? ''}`, log),
    ),
    ...tempDirs.map((dir) => () => rm(dir, { recursive: true, force: true })),
    () => restartStackController(),
  );
}, 120_000);

describe('helm install', () => {
  it('creates every object of the chart and prints what to do next', async () => {
    expect(installOutput).toContain('STATUS: deployed');
    expect(installOutput).toContain(`kubectl -n ${NAMESPACE} rollout status deployment/portico-controller`);
    expect(installOutput).toContain(`portico-ratelimit.${NAMESPACE}.svc.cluster.local:8081`);
    const namespaced = await kubectl([
      'get',
      'deployments,services,serviceaccounts,roles,rolebindings,poddisruptionbudgets',
      '-n',
      NAMESPACE,
      '-l',
      `app.kubernetes.io/instance=${RELEASE}`,
      '-o',
      'name',
    ]);
    expect(namespaced.stdout.trim().split('\n').sort()).toEqual([
      'deployment.apps/portico-controller',
      'deployment.apps/portico-ratelimit',
      'poddisruptionbudget.policy/portico-controller',
      'poddisruptionbudget.policy/portico-ratelimit',
      'role.rbac.authorization.k8s.io/portico-controller',
      'role.rbac.authorization.k8s.io/portico-ratelimit',
      'rolebinding.rbac.authorization.k8s.io/portico-controller',
      'rolebinding.rbac.authorization.k8s.io/portico-ratelimit',
      'service/portico-controller',
      'service/portico-ratelimit',
      'serviceaccount/portico-controller',
      'serviceaccount/portico-ratelimit',
    ]);
    const cluster = await kubectl([
      'get',
      'clusterroles,clusterrolebindings',
      '-l',
      `app.kubernetes.io/instance=${RELEASE}`,
      '-o',
      'name',
    ]);
    expect(cluster.stdout.trim().split('\n').sort()).toEqual([
      'clusterrole.rbac.authorization.k8s.io/portico-controller',
      // The tenant roles, aggregated into view / edit / admin (rbac.aggregateClusterRoles).
      'clusterrole.rbac.authorization.k8s.io/portico-edit',
      'clusterrole.rbac.authorization.k8s.io/portico-view',
      'clusterrolebinding.rbac.authorization.k8s.io/portico-controller',
    ]);
  });
});

describe('the controller as its ServiceAccount', () => {
  it('takes a CustomDomain to Ready and removes it again, with no request refused', async () => {
    const deployment = await installedDeployment('portico-controller');
    const container = podSpec(deployment).containers[0] ?? { name: '' };
    const env = containerEnv(container, NAMESPACE);
    // The chart mounts the ACME CA ConfigMap there; here it is the stack's file.
    expect(env['NODE_EXTRA_CA_CERTS']).toBe('/etc/portico/acme-ca/ca.crt');
    const metricsPort = await freePort();
    await stopStackController();
    const logName = 'rbac-controller.log';
    const controller = startProcess(
      container.args ?? [],
      {
        ...env,
        NODE_EXTRA_CA_CERTS: sandbox.acmeCaBundle,
        KUBECONFIG: await serviceAccountKubeconfig(CONTROLLER_SA),
        // 0.0.0.0:8089 and :8080 in a Pod; here the port the CA validates on, and a free one.
        PORTICO_HTTP01_LISTEN_ADDRESS: `127.0.0.1:${sandbox.http01Port}`,
        PORTICO_METRICS_LISTEN_ADDRESS: `127.0.0.1:${metricsPort}`,
        // The test's hostname is under .example (RFC 6761), which the chart does not allow.
        PORTICO_ALLOW_SPECIAL_USE_HOSTNAMES: 'true',
      },
      logName,
    );
    await waitFor('the controller to be ready', async () =>
      (await httpStatus(`http://127.0.0.1:${metricsPort}/readyz`)) === 200 ? true : undefined,
    );
    if ((await knownVariables('controller')).has('PORTICO_LEADER_ELECT')) {
      // Leader election (on in the chart) with this identity: it takes the Lease of its namespace.
      await waitFor('the controller to hold the Lease portico-controller', async () => {
        const lease = await kubectl([
          'get',
          'lease',
          'portico-controller',
          '-n',
          NAMESPACE,
          '-o',
          'jsonpath={.spec.holderIdentity}',
        ]);
        return lease.code === 0 && lease.stdout !== '' ? true : undefined;
      });
    }

    const project = unique('rbac');
    const hostname = `www.${project}.example`;
    await createProject(project, { plan: 'pro' });
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(project, 'www', { hostname, service: { name: 'web', port: 80 } });
    const ready = await waitForCondition(project, 'www', 'Ready', 'True', undefined, 90_000);
    const secretName = ready.status?.certificate?.secretName ?? '';
    const { core, networking } = kube();
    expect((await core.readNamespacedSecret({ namespace: project, name: secretName })).type).toBe(
      'kubernetes.io/tls',
    );
    const ingress = await networking.readNamespacedIngress({ namespace: project, name: 'portico-www' });
    expect(ingress.spec?.tls?.[0]?.secretName).toBe(secretName);
    const challenge = await core.readNamespacedService({ namespace: project, name: 'portico-acme-http01' });
    expect(challenge.spec?.externalName).toBe(`portico-controller.${NAMESPACE}.svc.cluster.local`);
    // The ACME account key, created in the release namespace by this identity.
    const account = await core.readNamespacedSecret({ namespace: NAMESPACE, name: 'portico-acme-account' });
    expect(Object.keys(account.data ?? {})).toEqual(['private-key.pem']);
    // The hostname's claim, taken by this identity.
    const claim = await kubectl([
      'get',
      'hostnameclaims.portico.dev',
      hostname,
      '-o',
      'jsonpath={.spec.customDomainRef.namespace}/{.spec.customDomainRef.name}',
    ]);
    expect(claim.stdout, claim.stderr).toBe(`${project}/www`);

    await deleteCustomDomain(project, 'www');
    await waitFor('the CustomDomain, its Ingress and its Secret to be gone', async () => {
      const left = await kubectl(['get', 'customdomains,ingresses,secrets', '-n', project, '-o', 'name']);
      return left.code === 0 && left.stdout.trim() === '' ? true : undefined;
    });
    expect((await kubectl(['get', 'hostnameclaim', hostname])).stderr).toContain('NotFound');

    await stopChild(controller, 'portico controller', path.join(LOGS, logName));
    expect(refusals(await readFile(path.join(LOGS, logName), 'utf8')), 'refused requests').toEqual([]);
  });
});

describe('the rate-limit service as its ServiceAccount', () => {
  it('reads its config and writes its load report, with no request refused', async () => {
    const deployment = await installedDeployment('portico-ratelimit');
    const container = podSpec(deployment).containers[0] ?? { name: '' };
    const env = containerEnv(container, NAMESPACE);
    expect(env['PORTICO_RATELIMIT_REDIS_URL']).toBe(sandbox.redisUrl);
    // Written by the operator in a cluster; here by the test, as the admin. The operator run by the
    // test above may have written it already (as portico-controller): the test takes the field over.
    const config = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'portico-ratelimit-config',
        namespace: NAMESPACE,
        labels: { 'app.kubernetes.io/managed-by': 'portico', 'app.kubernetes.io/component': 'ratelimit' },
      },
      data: { 'config.json': renderCompiledConfig([]) },
    };
    const applied = await kubectl(
      ['apply', '--server-side', '--force-conflicts', '--field-manager=e2e', '-f', '-'],
      { input: JSON.stringify(config) },
    );
    expect(applied.code, applied.stderr).toBe(0);

    const [grpcPort, metricsPort] = [await freePort(), await freePort()];
    const args = (container.args ?? []).map((a) =>
      a.startsWith('--grpc-listen-address=')
        ? `--grpc-listen-address=127.0.0.1:${grpcPort}`
        : a.startsWith('--metrics-listen-address=')
          ? `--metrics-listen-address=127.0.0.1:${metricsPort}`
          : a,
    );
    const logName = 'rbac-ratelimit.log';
    const instance = 'rbac-e2e';
    const server = startProcess(
      [...args, '--kubeconfig', await serviceAccountKubeconfig(RATELIMIT_SA), '--instance', instance],
      env,
      logName,
    );
    await waitFor('the rate-limit service to be ready', async () =>
      (await httpStatus(`http://127.0.0.1:${metricsPort}/readyz`)) === 200 ? true : undefined,
    );
    const report = await waitFor('its load report', async () => {
      const status = await kube().core.readNamespacedConfigMap({
        namespace: NAMESPACE,
        name: 'portico-ratelimit-status',
      });
      return status.data?.[reportKey(instance)];
    });
    expect(JSON.parse(report)).toMatchObject({ instance, policies: {} });

    await stopChild(server, 'portico ratelimit-server', path.join(LOGS, logName));
    expect(refusals(await readFile(path.join(LOGS, logName), 'utf8')), 'refused requests').toEqual([]);
  });
});

/** `kubectl auth can-i` as a ServiceAccount of the release: true for yes. */
async function can(serviceAccount: string, args: string[]): Promise<boolean> {
  const result = await kubectl([
    'auth',
    'can-i',
    ...args,
    '--as',
    `system:serviceaccount:${NAMESPACE}:${serviceAccount}`,
  ]);
  if (result.code !== 0 && result.code !== 1) throw new Error(result.stderr);
  return result.stdout.trim() === 'yes';
}

const TENANT = 'shop';

describe('kubectl auth can-i: no more than needed', () => {
  it.each([
    // What the flow above used.
    [['list', 'customdomains.portico.dev', '--all-namespaces'], true],
    [['patch', 'customdomains.portico.dev', '-n', TENANT], true],
    [['update', 'customdomains.portico.dev', '--subresource=status', '-n', TENANT], true],
    [['list', 'namespaces'], true],
    [['watch', 'endpointslices.discovery.k8s.io', '--all-namespaces'], true],
    [['patch', 'ingresses.networking.k8s.io', '-n', TENANT], true],
    [['delete', 'ingresses.networking.k8s.io', '-n', TENANT], true],
    [['patch', 'services/portico-acme-http01', '-n', TENANT], true],
    [['patch', 'secrets', '-n', TENANT], true],
    [['create', 'events', '-n', TENANT], true],
    [['update', 'leases.coordination.k8s.io/portico-controller', '-n', NAMESPACE], true],
    [['list', 'ratelimitpolicies.portico.dev', '--all-namespaces'], true],
    [['create', 'hostnameclaims.portico.dev'], true],
    [['delete', 'hostnameclaims.portico.dev'], true],
    // The caches the reconcile reads instead of the API server.
    [['watch', 'hostnameclaims.portico.dev'], true],
    [['watch', 'services', '--all-namespaces'], true],
    // Secrets: the TLS Secrets may be in any namespace and RBAC cannot select by label, so list is
    // cluster-wide (docs/adr/2026-11-22-rbac-secret-access.md); but never update or delete them in bulk.
    [['update', 'secrets', '-n', TENANT], false],
    [['deletecollection', 'secrets', '-n', TENANT], false],
    // The CustomDomains a Project keeps, one per hostname (controllers/project/controller.ts).
    [['create', 'customdomains.portico.dev', '-n', TENANT], true],
    [['update', 'customdomains.portico.dev', '-n', TENANT], true],
    [['delete', 'customdomains.portico.dev', '-n', TENANT], true],
    [['deletecollection', 'customdomains.portico.dev', '-n', TENANT], false],
    // Projects belong to the platform: read, and their status written.
    [['watch', 'projects.portico.dev', '--all-namespaces'], true],
    [['update', 'projects.portico.dev', '--subresource=status', '-n', TENANT], true],
    [['update', 'projects.portico.dev', '-n', TENANT], false],
    [['create', 'projects.portico.dev', '-n', TENANT], false],
    [['delete', 'projects.portico.dev', '-n', TENANT], false],
    [['patch', 'ratelimitpolicies.portico.dev', '-n', TENANT], false],
    // A hostname claim never changes hands in place.
    [['update', 'hostnameclaims.portico.dev'], false],
    [['patch', 'hostnameclaims.portico.dev'], false],
    // Only the challenge Service, and nothing else of a project.
    [['patch', 'services/web', '-n', TENANT], false],
    [['delete', 'services', '-n', TENANT], false],
    [['get', 'pods', '-n', TENANT], false],
    [['get', 'configmaps', '-n', TENANT], false],
    [['patch', 'namespaces/' + TENANT], false],
    [['create', 'endpointslices.discovery.k8s.io', '-n', TENANT], false],
    // Its own Lease only, and only in its namespace.
    [['update', 'leases.coordination.k8s.io/kube-scheduler', '-n', NAMESPACE], false],
    [['get', 'leases.coordination.k8s.io', '-n', 'kube-system'], false],
    // The rate-limit config shards (as many as the policies need) in its namespace, no ConfigMap
    // elsewhere, and no deletion (the service's report is not its to write, but RBAC cannot name a
    // set of shards that grows: patch covers its namespace's ConfigMaps).
    [['patch', 'configmaps/portico-ratelimit-config-7', '-n', NAMESPACE], true],
    [['patch', 'configmaps', '-n', TENANT], false],
    [['delete', 'configmaps', '-n', NAMESPACE], false],
    // Nothing that widens its own rights.
    [['create', 'clusterrolebindings'], false],
    [['bind', 'clusterroles'], false],
    [['escalate', 'clusterroles'], false],
    [['impersonate', 'serviceaccounts'], false],
    [['create', 'serviceaccounts/token', '-n', NAMESPACE], false],
    [['get', 'nodes'], false],
  ] as [string[], boolean][])('controller: %j → %s', async (args, allowed) => {
    expect(await can(CONTROLLER_SA, args)).toBe(allowed);
  });

  it.each([
    [['list', 'configmaps', '-n', NAMESPACE], true],
    [['watch', 'configmaps', '-n', NAMESPACE], true],
    [['patch', 'configmaps/portico-ratelimit-status', '-n', NAMESPACE], true],
    [['patch', 'configmaps/portico-ratelimit-config', '-n', NAMESPACE], false],
    [['delete', 'configmaps', '-n', NAMESPACE], false],
    [['list', 'configmaps', '-n', TENANT], false],
    [['get', 'secrets', '-n', NAMESPACE], false],
    [['list', 'secrets', '--all-namespaces'], false],
    [['list', 'ratelimitpolicies.portico.dev', '--all-namespaces'], false],
    [['create', 'events', '-n', NAMESPACE], false],
  ] as [string[], boolean][])('rate-limit service: %j → %s', async (args, allowed) => {
    expect(await can(RATELIMIT_SA, args)).toBe(allowed);
  });
});

describe('helm upgrade and uninstall', () => {
  it('upgrade changes the Deployment in place', async () => {
    const upgrade = await helm([
      'upgrade',
      RELEASE,
      CHART,
      '-n',
      NAMESPACE,
      '--reuse-values',
      '--set',
      'controller.logLevel=debug',
    ]);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(upgrade.stdout).toContain('REVISION: 2');
    const env = containerEnv(
      podSpec(await installedDeployment('portico-controller')).containers[0] ?? { name: '' },
      NAMESPACE,
    );
    expect(env['PORTICO_LOG_LEVEL']).toBe('debug');
  });

  it('uninstall removes the release, and leaves the CRDs and the Secrets the controller made', async () => {
    const uninstall = await helm(['uninstall', RELEASE, '-n', NAMESPACE]);
    expect(uninstall.code, uninstall.stderr).toBe(0);
    const left = await kubectl([
      'get',
      'deployments,serviceaccounts,roles',
      '-n',
      NAMESPACE,
      '-l',
      `app.kubernetes.io/instance=${RELEASE}`,
      '-o',
      'name',
    ]);
    expect(left.stdout.trim()).toBe('');
    const clusterRole = await kubectl(['get', 'clusterrole', 'portico-controller']);
    expect(clusterRole.code).not.toBe(0);
    for (const crd of [
      'customdomains.portico.dev',
      'hostnameclaims.portico.dev',
      'ratelimitpolicies.portico.dev',
    ]) {
      expect((await kubectl(['get', 'crd', crd])).code).toBe(0);
    }
    expect((await kubectl(['get', 'secret', 'portico-acme-account', '-n', NAMESPACE])).code).toBe(0);
  });
});
