/**
 * A routing class of Portico's own (docs/routing.md, "A routing class of Portico's own": leave no
 * way to split a claimed hostname's traffic), against REAL Contours: the stack's Contour (no
 * `--ingress-class-name`, so it serves objects with no class, as a cluster's shared ingress does)
 * and a second one started here with `--ingress-class-name portico-edge`, serving only Portico's
 * routes. An operator of this file's own runs with `--ingress-flavor contour --ingress-class
 * portico-edge`, and the chart's `admissionPolicy.routingClass` (rendered with `helm template`) is
 * applied to the real API server.
 *
 * What is asserted comes from the real components: the HTTPProxy statuses the Contours write, what
 * each would push to Envoy (`contour cli rds`), and the API server's admission answers. The test
 * writes no status. While the policy is in place, the class can be written only by the admin (the
 * stack's credentials, which the operator uses) and the controller's ServiceAccount; a team's user
 * (`--as`) writes the foreign routes. The policy is removed after this file.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HTTPProxy } from '../../src/data-planes/contour/httpproxy.js';
import { startContour, type StartedContour } from '../../src/data-planes/contour/sandbox-process.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { stopProcess } from '../../src/sandbox/processes.js';
import {
  createProject,
  createCustomDomain,
  deleteCustomDomain,
  dns,
  domainCondition,
  getCustomDomain,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { contourXdsAddr, virtualHostsFor, readProxy, matchedPath } from './support/contour.js';
import { kubectl, kubectlObjects, renderChartTemplate, type RunResult } from './support/helm.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const CLASS = 'portico-edge';
const EDGE = 'contour-edge';
const HTTP01_SERVICE = 'portico-controller.portico-system.svc.cluster.local:8089';
/** The chart's release namespace here: names the controller's ServiceAccount in the policy. */
const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
/** A team's user: writes Ingresses and HTTPProxies in every namespace (RBAC below), not the class. */
const TEAM_USER = 'team-dev@example.com';
const RBAC_NAME = 'e2e-route-writer';

const paths = sandboxPaths(sandbox.sandboxDir);
let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let edge: StartedContour | undefined;
let policy = '';

function foreignProxy(
  namespace: string,
  name: string,
  fqdn: string,
  klass?: { spec?: string; annotation?: string },
): HTTPProxy {
  return {
    apiVersion: 'projectcontour.io/v1',
    kind: 'HTTPProxy',
    metadata: {
      name,
      namespace,
      ...(klass?.annotation ? { annotations: { 'projectcontour.io/ingress.class': klass.annotation } } : {}),
    },
    spec: {
      ...(klass?.spec ? { ingressClassName: klass.spec } : {}),
      virtualhost: { fqdn },
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
    },
  };
}

function foreignIngress(namespace: string, name: string, host: string, ingressClassName?: string): unknown {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name, namespace },
    spec: {
      ...(ingressClassName ? { ingressClassName } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              {
                path: '/hijacked',
                pathType: 'Prefix',
                backend: { service: { name: 'web', port: { number: 80 } } },
              },
            ],
          },
        },
      ],
    },
  };
}

beforeAll(async () => {
  contourXdsAddr(); // throws unless the stack runs Contour
  const ports = await pickFreePorts({ xds: 'tcp', metrics: 'tcp', health: 'tcp', debug: 'tcp' });
  edge = await startContour(
    paths,
    path.join(sandbox.toolsBinDir, 'contour'),
    sandbox.kubeconfig,
    ports,
    RELEASE_NAMESPACE,
    { name: EDGE, ingressClassName: CLASS },
  );

  policy = await renderChartTemplate('portico', RELEASE_NAMESPACE, 'routing-class-admission.yaml', [
    `routing.ingress.className=${CLASS}`,
    'routing.ingress.flavor=contour',
    'admissionPolicy.routingClass.enabled=true',
    // The stack's operator runs with the admin's credentials (CN=portico-admin).
    'admissionPolicy.routingClass.extraAllowedUsernames={portico-admin}',
  ]);
  // RBAC for the team's user and the controller's ServiceAccount (the policy comes after RBAC).
  const rbac = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RBAC_NAME },
      rules: [
        {
          apiGroups: ['networking.k8s.io'],
          resources: ['ingresses'],
          verbs: ['get', 'create', 'update', 'patch', 'delete'],
        },
        {
          apiGroups: ['projectcontour.io'],
          resources: ['httpproxies'],
          verbs: ['get', 'create', 'update', 'patch', 'delete'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: RBAC_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RBAC_NAME },
      subjects: [
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TEAM_USER },
        { kind: 'ServiceAccount', name: 'portico-controller', namespace: RELEASE_NAMESPACE },
      ],
    },
  ];
  const applied = await kubectlObjects(['apply'], rbac);
  expect(applied.code, applied.stderr).toBe(0);
  const installed = await kubectl(['apply', '-f', '-'], { input: policy });
  expect(installed.code, installed.stderr).toBe(0);
  const probeNs = unique('rc-probe');
  await createProject(probeNs);
  await waitFor('the policy to refuse a route of the class from the team', async () => {
    const probe = foreignProxy(probeNs, 'probe', `${unique('probe')}.example`, { spec: CLASS });
    const result = await kubectlObjects(['create', '--dry-run=server'], [probe], TEAM_USER);
    return result.code === 0 ? undefined : true;
  });

  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'contour-routing-class', {
    '--ingress-flavor': 'contour',
    '--ingress-class': CLASS,
    '--data-plane-acknowledgement': 'true',
    '--http01-service': HTTP01_SERVICE,
  });
}, 180_000);

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
    async () => {
      if (edge) await stopProcess(paths, EDGE);
    },
    async () => {
      if (policy !== '') await kubectl(['delete', '--ignore-not-found', '-f', '-'], { input: policy });
    },
    () => kubectl(['delete', '--ignore-not-found', 'clusterrolebinding,clusterrole', RBAC_NAME]),
  );
}, 120_000);

describe(`a routing class of Portico's own (${CLASS}), a Contour serving only it, and the chart's admission policy`, () => {
  let ns = '';
  let hostname = '';

  it("routes the domain through the class's Contour only: Ready from its status, its virtual host in that Contour's RDS and not in the shared one's", async () => {
    ns = unique('rc');
    hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 120_000);
    expect(domainCondition(live, 'Routed').message).toContain(
      'Contour took HTTPProxy portico-www (currentStatus valid).',
    );
    const proxy = await readProxy(ns, 'portico-www');
    expect(proxy.spec.ingressClassName).toBe(CLASS);
    expect(proxy.status?.currentStatus).toBe('valid');
    const edgeHosts = await waitFor(`${hostname} in the edge Contour's RDS`, async () => {
      const hosts = await virtualHostsFor(hostname, edge?.xdsAddr);
      return hosts.some((h) => h.routeConfig === `https/${hostname}`) ? hosts : undefined;
    });
    const https = edgeHosts.find((h) => h.routeConfig === `https/${hostname}`);
    expect(https?.routes.find((r) => r.match?.prefix === '/')?.route?.cluster).toContain(`${ns}/web/80`);
    expect(await virtualHostsFor(hostname)).toEqual([]);
  });

  it('leaves the domain Live when a team writes a classless HTTPProxy and Ingress for its hostname: the shared Contour takes them, the edge Contour never sees them, nothing is Conflicted', async () => {
    const team = unique('rc-team');
    await createProject(team);
    const written = await kubectlObjects(
      ['create'],
      [foreignProxy(team, 'theirs', hostname), foreignIngress(team, 'theirs', hostname)],
      TEAM_USER,
    );
    expect(written.code, written.stderr).toBe(0);
    // The shared Contour serves both: it marks the HTTPProxy valid (the only fqdn it holds) and
    // routes the Ingress's path. That is the moment the edge Contour would have acted, had it seen them.
    await waitFor("the shared Contour's valid status on the team's HTTPProxy", async () =>
      (await readProxy(team, 'theirs')).status?.currentStatus === 'valid' ? true : undefined,
    );
    await waitFor(`the team's /hijacked in the shared Contour's RDS`, async () => {
      const hosts = await virtualHostsFor(hostname);
      if (hosts.some((h) => h.routes.map(matchedPath).includes('/hijacked'))) return true;
      throw new Error(`its virtual hosts for ${hostname}: ${JSON.stringify(hosts).slice(0, 2000)}`);
    });
    // Contour rebuilds its DAG within a second of a change; give the edge one several times over.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const ours = await readProxy(ns, 'portico-www');
    expect(ours.status?.currentStatus).toBe('valid');
    expect(JSON.stringify(ours.status)).not.toContain('DuplicateVhost');
    const edgeHosts = await virtualHostsFor(hostname, edge?.xdsAddr);
    expect(edgeHosts.length).toBeGreaterThan(0);
    for (const host of edgeHosts) expect(host.routes.map((r) => r.match?.prefix)).not.toContain('/hijacked');
    const domain = await getCustomDomain(ns, 'www');
    expect(domainCondition(domain, 'Ready')).toMatchObject({ status: 'True', reason: 'Live' });
    expect(domainCondition(domain, 'Conflicted').status).not.toBe('True');
  });

  it("refuses the team's HTTPProxy and Ingress of the class, by field or annotation, created or changed into it, naming the class and the controller", async () => {
    const team = unique('rc-class');
    await createProject(team);
    const refusals: [string, RunResult][] = [
      [
        'HTTPProxy with spec.ingressClassName',
        await kubectlObjects(
          ['create', '--dry-run=server'],
          [foreignProxy(team, 'by-field', hostname, { spec: CLASS })],
          TEAM_USER,
        ),
      ],
      [
        'HTTPProxy with the annotation',
        await kubectlObjects(
          ['create', '--dry-run=server'],
          [foreignProxy(team, 'by-annotation', hostname, { annotation: CLASS })],
          TEAM_USER,
        ),
      ],
      [
        'Ingress with spec.ingressClassName',
        await kubectlObjects(
          ['create', '--dry-run=server'],
          [foreignIngress(team, 'by-field', hostname, CLASS)],
          TEAM_USER,
        ),
      ],
    ];
    for (const [what, result] of refusals) {
      expect(result.code, what).not.toBe(0);
      expect(result.stderr, what).toContain(`${TEAM_USER} may not create the`);
      expect(result.stderr, what).toContain(`of ingress class ${CLASS}`);
      expect(result.stderr, what).toContain(`only the Portico controller (${CONTROLLER})`);
    }
    // A classless HTTPProxy the team owns may not be moved into the class.
    const made = await kubectlObjects(
      ['create'],
      [foreignProxy(team, 'later', `${unique('later')}.example`)],
      TEAM_USER,
    );
    expect(made.code, made.stderr).toBe(0);
    const moved = await kubectl([
      'annotate',
      '-n',
      team,
      'httpproxy',
      'later',
      `projectcontour.io/ingress.class=${CLASS}`,
      '--as',
      TEAM_USER,
    ]);
    expect(moved.code).not.toBe(0);
    expect(moved.stderr).toContain(`may not update the HTTPProxy ${team}/later of ingress class ${CLASS}`);
    // The controller's ServiceAccount may write the class.
    const byController = await kubectlObjects(
      ['create', '--dry-run=server'],
      [foreignProxy(team, 'by-controller', `${unique('ctl')}.example`, { spec: CLASS })],
      CONTROLLER,
    );
    expect(byController.code, byController.stderr).toBe(0);
  });

  it('removes the domain: nothing left for the hostname in the edge Contour', async () => {
    await deleteCustomDomain(ns, 'www');
    await waitFor(`no virtual host for ${hostname} in the edge Contour`, async () =>
      (await virtualHostsFor(hostname, edge?.xdsAddr)).length === 0 ? true : undefined,
    );
  });
});
