/**
 * The chart's policy reserving the apps domain's routes to the controller
 * (templates/apps-domain-routes-admission.yaml; docs/routing.md, "The apps domain's routes"), on the
 * real kube-apiserver (v1.37) with the routing CRDs of Contour, Gateway API and Traefik: rendered
 * with `helm template`, compared with what the sandbox applies (deploy/portico-admission-apps-domain.yaml
 * with its placeholder replaced, src/sandbox/admission.ts), applied, and then every route kind it
 * matches is created (server dry run) by the sandbox's admin, whom RBAC never limits, and by the
 * controller's ServiceAccount (impersonated, with RBAC to write routes).
 *
 * The stack's own operator has no apps domain, so nothing it writes is refused meanwhile; the policy
 * is removed after this file.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  ADMISSION_MANIFEST,
  APPS_DOMAIN_ADMISSION_MANIFEST,
  applyAppsDomainAdmission,
  type Manifest,
} from '../../src/sandbox/admission.js';
import { createProject, sandbox, unique } from './support/cluster.js';
import { kubectl, kubectlObjects, renderChartTemplate, run, toolsBin } from './support/helm.js';
import { installRoutingCrds } from './support/routing-crds.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const APPS = 'apps-admission.portico.test';
const RELEASE_NAMESPACE = 'portico-system';
const CONTROLLER = `system:serviceaccount:${RELEASE_NAMESPACE}:portico-controller`;
const ADMIN = 'portico-admin';
const RBAC_NAME = 'e2e-apps-domain-routes';
/** The values the chart needs with appsDomain.domain set (dns01's server and key), besides it. */
const APPS_SETS = [
  `appsDomain.domain=${APPS}`,
  'dns01.server=ns1.example.net:53',
  'dns01.tsig.keyName=portico-apps',
  'dns01.tsig.secretRef.name=portico-apps-tsig',
];

let ns = '';
let applied: Manifest[] = [];

const backend = { service: { name: 'web', port: { number: 80 } } };

function ingress(name: string, hosts: string[], tlsHosts: string[] = []): object {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name, namespace: ns },
    spec: {
      rules: hosts.map((host) => ({
        host,
        http: { paths: [{ path: '/', pathType: 'Prefix', backend }] },
      })),
      ...(tlsHosts.length > 0 ? { tls: [{ hosts: tlsHosts, secretName: 'tls' }] } : {}),
    },
  };
}

function httpProxy(name: string, fqdn: string): object {
  return {
    apiVersion: 'projectcontour.io/v1',
    kind: 'HTTPProxy',
    metadata: { name, namespace: ns },
    spec: {
      virtualhost: { fqdn },
      routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
    },
  };
}

function httpRoute(name: string, hostnames: string[]): object {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'HTTPRoute',
    metadata: { name, namespace: ns },
    spec: { hostnames, rules: [{ backendRefs: [{ name: 'web', port: 80 }] }] },
  };
}

function listenerSet(name: string, hostnames: string[]): object {
  return {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'ListenerSet',
    metadata: { name, namespace: ns },
    spec: {
      parentRef: { name: 'shared-gateway', namespace: 'infra' },
      listeners: hostnames.map((hostname, i) => ({ name: `l${i}`, hostname, port: 80, protocol: 'HTTP' })),
    },
  };
}

function ingressRoute(name: string, match: string, kind = 'IngressRoute'): object {
  return {
    apiVersion: 'traefik.io/v1alpha1',
    kind,
    metadata: { name, namespace: ns },
    spec: {
      routes: [
        kind === 'IngressRoute'
          ? { match, kind: 'Rule', services: [{ name: 'web', port: 80 }] }
          : { match, services: [{ name: 'web', port: 80 }] },
      ],
      ...(kind === 'IngressRoute' ? {} : { tls: { passthrough: true } }),
    },
  };
}

/** `kubectl patch` of the HTTPProxy `name`'s fqdn to `fqdn`, as `user` (default: the admin). */
function moveProxy(name: string, fqdn: string, user?: string): ReturnType<typeof kubectl> {
  return kubectl([
    'patch',
    'httpproxy',
    name,
    '-n',
    ns,
    '--type=merge',
    '-p',
    JSON.stringify({ spec: { virtualhost: { fqdn } } }),
    ...(user ? ['--as', user] : []),
  ]);
}

/** `kubectl create --dry-run=server` of `object` as `user` (default: the admin). */
function tryCreate(object: object, user?: string): ReturnType<typeof kubectlObjects> {
  return kubectlObjects(['create', '--dry-run=server'], [object], user);
}

beforeAll(async () => {
  await installRoutingCrds();
  ns = unique('apps-adm');
  await createProject(ns);
  // RBAC for the controller's ServiceAccount (the policy comes after RBAC).
  const rbac = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RBAC_NAME },
      rules: [
        {
          apiGroups: ['networking.k8s.io'],
          resources: ['ingresses'],
          verbs: ['get', 'create', 'update', 'patch'],
        },
        {
          apiGroups: ['projectcontour.io'],
          resources: ['httpproxies'],
          verbs: ['get', 'create', 'update', 'patch'],
        },
        {
          apiGroups: ['gateway.networking.k8s.io'],
          resources: ['httproutes'],
          verbs: ['get', 'create', 'update', 'patch'],
        },
        {
          apiGroups: ['gateway.networking.k8s.io'],
          resources: ['listenersets'],
          verbs: ['get', 'create', 'update', 'patch'],
        },
        {
          apiGroups: ['traefik.io'],
          resources: ['ingressroutes'],
          verbs: ['get', 'create', 'update', 'patch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: RBAC_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: RBAC_NAME },
      subjects: [{ kind: 'ServiceAccount', name: 'portico-controller', namespace: RELEASE_NAMESPACE }],
    },
  ];
  const granted = await kubectlObjects(['apply'], rbac);
  expect(granted.code, granted.stderr).toBe(0);
  applied = await applyAppsDomainAdmission(
    { binary: `${await toolsBin()}/kubectl`, kubeconfig: sandbox.kubeconfig },
    REPO,
    ns,
    APPS,
  );
}, 360_000);

afterAll(async () => {
  if (applied.length > 0) await kubectlObjects(['delete', '--ignore-not-found'], applied);
  await kubectl(['delete', '--ignore-not-found', 'clusterrolebinding,clusterrole', RBAC_NAME]);
}, 120_000);

describe('rendering', () => {
  it('renders, with appsDomain.domain set, the policy the sandbox applies from deploy/ (its placeholder replaced)', async () => {
    const rendered = parseAllDocuments(
      await renderChartTemplate('portico', RELEASE_NAMESPACE, 'apps-domain-routes-admission.yaml', APPS_SETS),
    )
      .map((d) => d.toJS() as Manifest | null)
      .filter((m): m is Manifest => m !== null);
    expect(rendered.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual(
      applied.map((m) => `${m.kind}/${m.metadata.name}`),
    );
    expect(rendered).toEqual(applied);
    expect(JSON.stringify(rendered)).toContain(`"'${APPS}'"`);
    expect(JSON.stringify(rendered)).toContain(`[\\"${CONTROLLER}\\"]`);
  });

  it('adds extraAllowedUsernames beside the controller', async () => {
    const rendered = await renderChartTemplate(
      'portico',
      RELEASE_NAMESPACE,
      'apps-domain-routes-admission.yaml',
      [
        ...APPS_SETS,
        'admissionPolicy.appsDomainRoutes.extraAllowedUsernames={system:serviceaccount:ops:gitops}',
      ],
    );
    expect(rendered).toContain(`["${CONTROLLER}","system:serviceaccount:ops:gitops"]`);
  });

  it('renders nothing without appsDomain.domain, with enabled=false, or where the API server has no ValidatingAdmissionPolicy', async () => {
    const vap = ['--api-versions', 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'];
    const names = async (args: string[], sets: string[]): Promise<string[]> => {
      const out = await run(`${await toolsBin()}/helm`, [
        'template',
        'portico',
        `${REPO}/charts/portico`,
        '--namespace',
        RELEASE_NAMESPACE,
        '--kube-version',
        '1.37.0',
        ...args,
        ...[
          'image.repository=localhost/portico',
          'image.tag=e2e',
          'platform.cnameTarget=t.example',
          ...sets,
        ].flatMap((s) => ['--set', s]),
      ]);
      expect(out.code, out.stderr).toBe(0);
      return parseAllDocuments(out.stdout)
        .map((d) => (d.toJS() as Manifest | null)?.metadata?.name ?? '')
        .filter((n) => n.endsWith('-apps-domain-routes'));
    };
    // The check has teeth: with all three it renders.
    expect(await names(vap, APPS_SETS)).toEqual([
      'portico-controller-apps-domain-routes',
      'portico-controller-apps-domain-routes',
    ]);
    expect(await names(vap, [])).toEqual([]);
    expect(await names(vap, [...APPS_SETS, 'admissionPolicy.appsDomainRoutes.enabled=false'])).toEqual([]);
    expect(await names([], APPS_SETS)).toEqual([]);
    // So the default install's policies (deploy/portico-admission.yaml) do not hold it; its own file does.
    expect(await readFile(path.join(REPO, ADMISSION_MANIFEST), 'utf8')).not.toContain('-apps-domain-routes');
    expect(await readFile(path.join(REPO, APPS_DOMAIN_ADMISSION_MANIFEST), 'utf8')).toContain(
      `name: portico-controller-apps-domain-routes`,
    );
  });
});

describe('the policy on the API server', () => {
  it("refuses the admin's route of every kind it matches that names the apps domain or a name under it, naming the object, the hostname and what to do", async () => {
    const cases: [string, object, string][] = [
      ['Ingress rule', ingress('rule', [`www.${ns}.example`, `victim.${APPS}`]), `victim.${APPS}`],
      ['Ingress wildcard', ingress('wildcard', [`*.${APPS}`]), `*.${APPS}`],
      ['Ingress of the apps domain itself', ingress('apex', [APPS]), APPS],
      [
        'Ingress TLS hosts alone',
        ingress('tls', [`www.${ns}.example`], [`www.${ns}.example`, `t.${APPS}`]),
        `t.${APPS}`,
      ],
      ['HTTPProxy', httpProxy('proxy', `victim.${APPS}`), `victim.${APPS}`],
      ['HTTPRoute', httpRoute('route', [`www.${ns}.example`, `victim.${APPS}`]), `victim.${APPS}`],
      ['ListenerSet', listenerSet('listeners', [`www.${ns}.example`, `*.${APPS}`]), `*.${APPS}`],
      [
        'IngressRoute Host, upper case',
        ingressRoute('host', `Host(\`VICTIM.${APPS.toUpperCase()}\`) && PathPrefix(\`/\`)`),
        `VICTIM.${APPS.toUpperCase()}`,
      ],
      [
        'IngressRoute Host, double quotes',
        ingressRoute('quoted', `PathPrefix("/") && Host("victim.${APPS}")`),
        `victim.${APPS}`,
      ],
      [
        'IngressRoute HostRegexp',
        ingressRoute('regexp', `HostRegexp(\`^[a-z]+\\.${APPS.replaceAll('.', '\\.')}$\`)`),
        `^[a-z]+.${APPS}`,
      ],
      [
        'IngressRouteTCP HostSNI',
        ingressRoute('sni', `HostSNI(\`victim.${APPS}\`)`, 'IngressRouteTCP'),
        `victim.${APPS}`,
      ],
    ];
    for (const [what, object, hostname] of cases) {
      const result = await tryCreate(object);
      const kind = (object as { kind: string }).kind;
      const name = (object as { metadata: { name: string } }).metadata.name;
      expect(result.code, `${what}: ${result.stdout}`).not.toBe(0);
      expect(result.stderr, what).toContain(
        `${ADMIN} may not create the ${kind} ${ns}/${name}: it names ${hostname}, in the apps domain ${APPS}, which is the platform's`,
      );
      expect(result.stderr, what).toContain(`routed by the Portico controller (${CONTROLLER}) alone`);
      expect(result.stderr, what).toContain('attach it with a CustomDomain');
    }
  });

  it('admits routes whose hostnames only look like the apps domain: a longer label, the domain as a prefix, a path', async () => {
    const objects = [
      ingress('lookalike', [`not${APPS}`, `${APPS}.example`]),
      httpProxy('lookalike', `x.${APPS}.example`),
      httpRoute('lookalike', [`not${APPS}`]),
      listenerSet('lookalike', [`not${APPS}`, `${APPS}.example`]),
      ingressRoute('lookalike', `Host(\`${APPS}.example\`) && PathPrefix(\`/apps\`)`),
    ];
    for (const object of objects) {
      const result = await tryCreate(object);
      expect(result.code, result.stderr).toBe(0);
    }
  });

  it("admits the controller's ServiceAccount for every kind", async () => {
    for (const object of [
      ingress('by-controller', [`victim.${APPS}`]),
      httpProxy('by-controller', `victim.${APPS}`),
      httpRoute('by-controller', [`victim.${APPS}`]),
      listenerSet('by-controller', [`victim.${APPS}`]),
      ingressRoute('by-controller', `Host(\`victim.${APPS}\`)`),
    ]) {
      const result = await tryCreate(object, CONTROLLER);
      expect(result.code, result.stderr).toBe(0);
    }
  });

  it("refuses anyone else's change to the controller's route, even one that moves it off the domain, but not a label or the deletion", async () => {
    const made = await kubectlObjects(['create'], [httpProxy('controllers', `own.${APPS}`)], CONTROLLER);
    expect(made.code, made.stderr).toBe(0);
    const moved = await moveProxy('controllers', `elsewhere.${ns}.example`);
    expect(moved.code).not.toBe(0);
    expect(moved.stderr).toContain(
      `${ADMIN} may not update the HTTPProxy ${ns}/controllers: it names own.${APPS}`,
    );
    const annotated = await kubectl([
      'annotate',
      '-n',
      ns,
      'httpproxy',
      'controllers',
      'projectcontour.io/ingress.class=other',
    ]);
    expect(annotated.code).not.toBe(0);
    expect(annotated.stderr).toContain(`may not update the HTTPProxy ${ns}/controllers`);
    const labelled = await kubectl(['label', '-n', ns, 'httpproxy', 'controllers', 'team=payments']);
    expect(labelled.code, labelled.stderr).toBe(0);
    const byController = await moveProxy('controllers', `again.${APPS}`, CONTROLLER);
    expect(byController.code, byController.stderr).toBe(0);
    const deleted = await kubectl(['delete', '-n', ns, 'httpproxy', 'controllers']);
    expect(deleted.code, deleted.stderr).toBe(0);
  });
});
