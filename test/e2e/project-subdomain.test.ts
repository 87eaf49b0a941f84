/**
 * A Project's auto-generated subdomain (docs/customdomains.md, "The auto-generated subdomain" and
 * "Replace or supplement") on real parts: Knot DNS serves the platform's apps zone
 * `apps.portico.test` and takes TSIG-signed RFC 2136 updates; a BIND 9 resolver forwards that zone to
 * Knot for a second Pebble, which validates DNS-01 through it; this file's operator runs with that
 * Pebble, `--apps-domain apps.portico.test`, the RFC 2136 flags and `--ingress-flavor contour` while
 * the stack's operator is stopped; the stack's Contour (no Envoy runs) judges the HTTPProxies and
 * builds the xDS the tests read. Nothing is mocked.
 *
 * - ONE wildcard certificate `*.apps.portico.test`, issued by the second Pebble over DNS-01 (its TXT
 *   record written into Knot and withdrawn after), serves every project's subdomain: Contour's
 *   HTTPS filter chain for each subdomain names the Secret in the operator's namespace, whose
 *   certificate is the one SDS carries.
 * - A project below Pro is served at its subdomain (custom domains need Pro; the subdomain does
 *   not), once it has had a deploy.
 * - Supplement (default): the subdomain keeps serving the content once the primary is Live.
 *   Replace: once the primary is Live it answers a 301 to the primary; a downgrade below Pro stops
 *   the custom domain and the subdomain serves the content again.
 *
 * - The apps domain is the platform's (docs/routing.md, "The apps domain's routes"): a route another
 *   tenant made before the chart's policy reserving it is reported on the Project it concerns
 *   (ForeignRoute); once the policy is applied (deploy/portico-admission-apps-domain.yaml with its
 *   placeholder replaced, as the sandbox applies it: src/sandbox/admission.ts), a ServiceAccount of
 *   another project's namespace may not create one, and the subdomain keeps serving. This file's
 *   operator runs as the chart's controller ServiceAccount (a TokenRequest token, the identity the
 *   policy admits), from the start; the policy stays on for the rest of the file.
 *
 * What it starts, and stops in `afterAll` (the stack is left as found): Knot and BIND, the second
 * Pebble, its operator; the Projects, the wildcard Secret and the TLSCertificateDelegation are
 * deleted, then the policy and the controller ServiceAccount's binding; the stack's operator is
 * restarted.
 */
import { X509Certificate } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import type { Project } from '../../src/api/project.js';
import { SUBDOMAIN_DELEGATION_NAME } from '../../src/data-planes/contour/subdomain-route.js';
import { subdomainProxyName } from '../../src/controllers/project/subdomain.js';
import { APPS_DOMAIN_SECRET } from '../../src/controller/main.js';
import {
  CONTROLLER_SERVICE_ACCOUNT,
  applyAppsDomainAdmission,
  writeControllerKubeconfig,
  type Manifest,
} from '../../src/sandbox/admission.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import { deleteAppsDomainObjects, deleteProjects } from './support/apps-domain-cleanup.js';
import {
  createProjectObject as createProjectIn,
  getProject,
  leafOf,
  projectApi,
  readAppsSecret as readSecret,
  startAppsDomainOperator,
  stopAppsDomainOperator,
  waitForSubdomain,
  wildcardRenewedFrom,
  wildcardWindowInThePast,
  wildcardWithDecision,
  type AppsDomainStack,
} from './support/apps-domain.js';
import {
  createProject,
  customDomainApi,
  dns,
  getPebble,
  kube,
  markDeployed,
  sandbox,
  unique,
  waitFor,
} from './support/cluster.js';
import {
  httpsFilterChains,
  readProxy,
  sdsCertificateSerial,
  sdsSecretName,
  virtualHostsFor,
} from './support/contour.js';
import { impersonationFlags, kubectl, kubectlObjects, toolsBin, type RunResult } from './support/helm.js';
import { installRoutingCrds } from './support/routing-crds.js';
import { operatorLogLines, type OperatorProcess } from './support/stack-controller.js';

const APPS_DOMAIN = 'apps.portico.test';
const PEBBLE_NAME = 'pebble-subdomain';
/**
 * The validity of the second Pebble's certificates, in seconds: a week, so that Pebble's ARI window
 * (two thirds in, ± a day) is days away and no renewal comes by itself during the file.
 */
const CERTIFICATE_SECONDS = 7 * 86_400;
const proxyApi = { group: 'projectcontour.io', version: 'v1', plural: 'httpproxies' } as const;
const REPO = path.resolve(import.meta.dirname, '../..');
/** The chart's controller, as the policy names it (deploy/ renders release portico in portico-system). */
const CONTROLLER = `system:serviceaccount:${OPERATOR_NAMESPACE}:${CONTROLLER_SERVICE_ACCOUNT}`;

let started: AppsDomainStack | undefined;
/** The apps-domain policy and binding applied by the policy's test, deleted in `afterAll`. */
let policy: Manifest[] = [];
let operator: OperatorProcess | undefined;
let knot: Resolver;
const projects: { namespace: string; name: string }[] = [];

async function createProjectObject(namespace: string, spec: Project['spec']): Promise<void> {
  await createProjectIn(namespace, spec);
  projects.push({ namespace, name: 'site' });
}

/** What Envoy's route for `hostname` on HTTPS does: `cluster:<name>`, `redirect:<host>/<code>` or none. */
async function httpsRouteOf(hostname: string): Promise<string> {
  const hosts = await virtualHostsFor(hostname);
  const https = hosts.find((h) => h.routeConfig === `https/${hostname}`);
  const route = https?.routes.find((r) => (r.match?.prefix ?? '') === '/');
  if (route?.redirect)
    return `redirect:${route.redirect.host_redirect ?? ''}/${route.redirect.response_code ?? '301'}`;
  if (route?.route?.cluster) return `cluster:${route.route.cluster}`;
  return 'none';
}

/** The serial of the certificate Contour's HTTPS filter chain for `hostname` carries over SDS. */
async function servedSerial(hostname: string): Promise<string | undefined> {
  const [chain] = await httpsFilterChains(hostname);
  const name = chain === undefined ? undefined : sdsSecretName(chain);
  return name === undefined ? undefined : sdsCertificateSerial(name);
}

async function setPlan(namespace: string, plan: string): Promise<void> {
  await kube().core.patchNamespace(
    { name: namespace, body: { metadata: { labels: { 'portico.dev/plan': plan } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function customDomain(namespace: string, name: string): Promise<CustomDomain | undefined> {
  return (await kube()
    .custom.getNamespacedCustomObject({ ...customDomainApi, namespace, name })
    .catch(() => undefined)) as CustomDomain | undefined;
}

/** kubectl as it is run for the sandbox's admin. */
async function adminKubectl(): Promise<{ binary: string; kubeconfig: string }> {
  return { binary: `${await toolsBin()}/kubectl`, kubeconfig: sandbox.kubeconfig };
}

beforeAll(async () => {
  // The operator as the chart's controller ServiceAccount: the identity the apps-domain policy admits.
  const controllerKubeconfig = await writeControllerKubeconfig(
    await adminKubectl(),
    sandboxPaths(sandbox.sandboxDir),
    OPERATOR_NAMESPACE,
  );
  started = await startAppsDomainOperator('project-subdomain', APPS_DOMAIN, {
    pebbleName: PEBBLE_NAME,
    certificateSeconds: CERTIFICATE_SECONDS,
    // The longest wait between two looks at the wildcard Secret: the renewal's verify request.
    flags: { '--ingress-flavor': 'contour', '--resync-seconds': '5', '--kubeconfig': controllerKubeconfig },
  });
  operator = started.operator;
  knot = new Resolver({ timeout: 2000, tries: 1 });
  knot.setServers([`${started.zone.zoneServer.host}:${started.zone.zoneServer.port}`]);
}, 180_000);

afterAll(async () => {
  await stopAppsDomainOperator(
    started,
    () => deleteProjects(projects.splice(0)),
    () => deleteAppsDomainObjects([]),
    // After the operator's last write: the policy admits no other writer of routes under the domain.
    async () => {
      if (policy.length > 0) await kubectlObjects(['delete', '--ignore-not-found'], policy);
    },
    () =>
      kubectl([
        'delete',
        '--ignore-not-found',
        'clusterrolebinding',
        `portico-sandbox-${CONTROLLER_SERVICE_ACCOUNT}`,
      ]),
  );
}, 240_000);

describe("a project's auto-generated subdomain", () => {
  it(
    'ONE wildcard certificate for the apps domain, issued by DNS-01 through Knot, serves a project below Pro once it has deployed',
    { timeout: 180_000 },
    async () => {
      const ns = unique('sub-free');
      const hostname = `${ns}.${APPS_DOMAIN}`;
      // Free plan, no deploy yet: custom domains would be refused; the subdomain waits for the deploy.
      await createProject(ns, { plan: 'free', deployed: false });
      await createProjectObject(ns, {
        service: { name: 'web', port: 80 },
        domains: { primary: `www.${ns}.example` },
      });
      const waiting = await waitForSubdomain(ns, { reason: 'NotDeployed' });
      expect(waiting.status?.subdomain).toMatchObject({ hostname, serving: 'False' });
      expect(
        await kube()
          .custom.getNamespacedCustomObject({ ...proxyApi, namespace: ns, name: subdomainProxyName(waiting) })
          .catch(() => 'none'),
      ).toBe('none');

      await markDeployed(ns);
      const serving = await waitForSubdomain(ns, { serving: 'True' }, 150_000);
      expect(serving.status?.subdomain).toMatchObject({ hostname, answer: 'Content', reason: 'Serving' });

      // The certificate: *.apps.portico.test only, signed by the second Pebble's intermediate.
      const secret = await readSecret();
      if (!secret) throw new Error('no wildcard Secret');
      const leaf = leafOf(secret);
      expect(leaf.subjectAltName).toBe(`DNS:*.${APPS_DOMAIN}`);
      const intermediate = new X509Certificate(
        await getPebble(`${started?.pebble.managementUrl ?? ''}/intermediates/0`),
      );
      expect(leaf.verify(intermediate.publicKey)).toBe(true);
      // Ordered over DNS-01: the TXT record was written into Knot's zone, and is gone again.
      const written = await operatorLogLines(
        operator as OperatorProcess,
        'dns-01 TXT record written in the challenge zone',
        (e) => e['recordName'] === `_acme-challenge.${APPS_DOMAIN}`,
      );
      expect(written.length).toBeGreaterThanOrEqual(1);
      expect(
        await knot
          .resolveTxt(`_acme-challenge.${APPS_DOMAIN}`)
          .catch((err: unknown) => (err as { code?: string }).code),
      ).toMatch(/ENODATA|ENOTFOUND/);

      // The route: Contour accepted it with the Secret of the operator's namespace, and its HTTPS
      // filter chain for the subdomain carries that very certificate.
      const proxy = await readProxy(ns, subdomainProxyName(serving));
      expect(proxy.spec.virtualhost).toEqual({
        fqdn: hostname,
        tls: { secretName: `${OPERATOR_NAMESPACE}/${APPS_DOMAIN_SECRET}` },
      });
      expect((proxy as unknown as { status?: { currentStatus?: string } }).status?.currentStatus).toBe(
        'valid',
      );
      expect(await waitFor(`xDS to serve ${hostname}`, () => servedSerial(hostname), 30_000)).toBe(
        leaf.serialNumber,
      );
      expect(await httpsRouteOf(hostname)).toMatch(/^cluster:/);
      // No CustomDomain serves anything on the free plan.
      const primary = await customDomain(ns, `www.${ns}.example`);
      expect(primary?.status?.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({
        status: 'False',
        reason: 'PlanNotEligible',
      });
    },
  );

  it(
    'a second project gets its own subdomain under the same certificate: no second order',
    { timeout: 90_000 },
    async () => {
      const ns = unique('sub-two');
      const hostname = `${ns}.${APPS_DOMAIN}`;
      const before = leafOf((await readSecret()) ?? {}).serialNumber;
      await createProject(ns, { plan: 'free' });
      await createProjectObject(ns, {
        service: { name: 'web', port: 80 },
        domains: { primary: `www.${ns}.example` },
      });
      await waitForSubdomain(ns, { serving: 'True', hostname });
      expect(await waitFor(`xDS to serve ${hostname}`, () => servedSerial(hostname), 30_000)).toBe(before);
      expect(leafOf((await readSecret()) ?? {}).serialNumber).toBe(before);
      const orders = await operatorLogLines(
        operator as OperatorProcess,
        'ordering the apps domain wildcard certificate (dns-01)',
      );
      expect(orders).toHaveLength(1);
    },
  );

  it(
    "a tenant's HTTPProxy for another project's subdomain made before the apps-domain policy (a cluster that had none, or an allowed user): Contour refuses both (its own status), the owner's route is kept and its Project names the hostname, not the tenant; the tenant's Project reports its route for a name it does not hold",
    { timeout: 120_000 },
    async () => {
      const victim = projects[0]?.namespace ?? '';
      const tenant = projects[1]?.namespace ?? '';
      const hostname = `${victim}.${APPS_DOMAIN}`;
      const unheld = `nobody-${tenant}.${APPS_DOMAIN}`;
      const proxy = (name: string, fqdn: string): object => ({
        apiVersion: 'projectcontour.io/v1',
        kind: 'HTTPProxy',
        metadata: { name, namespace: tenant },
        spec: {
          virtualhost: { fqdn },
          routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
        },
      });
      const deleteProxy = (name: string): Promise<unknown> =>
        kube()
          .custom.deleteNamespacedCustomObject({ ...proxyApi, namespace: tenant, name })
          .catch(() => undefined);
      try {
        await kube().custom.createNamespacedCustomObject({
          ...proxyApi,
          namespace: tenant,
          body: proxy('grab', hostname),
        });
        const reported = await waitForSubdomain(victim, { reason: 'ForeignRoute' });
        const message = reported.status?.subdomain?.message ?? '';
        expect(message).toContain(hostname);
        expect(message).toContain('1 route of another namespace');
        expect(message).not.toContain(tenant);
        expect(reported.status?.subdomain?.serving).toBe('False');
        // Contour's verdict, written by Contour: both HTTPProxies of the fqdn are invalid.
        const grab = await waitFor(
          'Contour to judge the tenant HTTPProxy',
          async () => {
            const p = (await readProxy(tenant, 'grab')) as unknown as { status?: { currentStatus?: string } };
            return p.status?.currentStatus === 'invalid' ? p : undefined;
          },
          30_000,
        );
        expect(JSON.stringify(grab.status)).toContain('DuplicateVhost');
        // The owner's route is kept as it was: still the Project's, for its subdomain.
        const own = await readProxy(victim, subdomainProxyName(reported));
        expect(own.spec.virtualhost.fqdn).toBe(hostname);
        expect(own.metadata.ownerReferences?.[0]).toMatchObject({
          kind: 'Project',
          uid: reported.metadata.uid,
        });
        // Nor does the tenant take the traffic: Envoy has no HTTPS route for the hostname at all.
        expect(
          await waitFor(
            `Envoy to drop the duplicated ${hostname}`,
            async () => ((await httpsRouteOf(hostname)) === 'none' ? true : undefined),
            30_000,
          ),
        ).toBe(true);

        // The tenant's own route for a name under the apps domain that its project does not hold.
        await kube().custom.createNamespacedCustomObject({
          ...proxyApi,
          namespace: tenant,
          body: proxy('stray', unheld),
        });
        // Its HTTPProxy grab names a name the tenant does not hold too: both are listed.
        const strays = await waitFor(
          `${tenant}/site to report its routes for names under the apps domain`,
          async () => {
            const s = (await getProject(tenant)).status?.subdomain;
            return s?.reason === 'ForeignRoute' &&
              s.message.includes(`HTTPProxy ${tenant}/stray names ${unheld}`)
              ? s.message
              : undefined;
          },
        );
        expect(strays).toContain(`HTTPProxy ${tenant}/grab names ${hostname}`);
      } finally {
        await deleteProxy('grab');
        await deleteProxy('stray');
      }
      // Once they are gone, both subdomains serve again.
      await waitForSubdomain(victim, { serving: 'True', reason: 'Serving' });
      await waitForSubdomain(tenant, { serving: 'True', reason: 'Serving' });
      expect(
        await waitFor(
          `Envoy to route ${hostname} again`,
          async () => ((await httpsRouteOf(hostname)).startsWith('cluster:') ? true : undefined),
          30_000,
        ),
      ).toBe(true);
    },
  );

  it(
    "with the chart's apps-domain policy: a ServiceAccount of another project's namespace may not create an HTTPProxy, an Ingress or an HTTPRoute for a project's subdomain, and is told why; its route made before the policy may be deleted, not edited; the controller's routes go on, and the subdomain stays in Contour's xDS",
    { timeout: 240_000 },
    async () => {
      const victim = projects[0]?.namespace ?? '';
      const tenant = projects[1]?.namespace ?? '';
      const hostname = `${victim}.${APPS_DOMAIN}`;
      const deployer = `system:serviceaccount:${tenant}:deployer`;
      const asDeployer = {
        user: deployer,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${tenant}`],
      };
      const byDeployer = (args: string[], objects: object[] = []): Promise<RunResult> =>
        objects.length > 0
          ? kubectlObjects(args, objects, asDeployer)
          : kubectl([...args, ...impersonationFlags(asDeployer)]);
      await installRoutingCrds();
      // The tenant's deploy identity: a ServiceAccount of its namespace that may write the three kinds there.
      const rbac = await kubectlObjects(
        ['apply'],
        [
          { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'deployer', namespace: tenant } },
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'Role',
            metadata: { name: 'deployer', namespace: tenant },
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
              {
                apiGroups: ['gateway.networking.k8s.io'],
                resources: ['httproutes'],
                verbs: ['get', 'create', 'update', 'patch', 'delete'],
              },
            ],
          },
          {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name: 'deployer', namespace: tenant },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'deployer' },
            subjects: [{ kind: 'ServiceAccount', name: 'deployer', namespace: tenant }],
          },
        ],
      );
      expect(rbac.code, rbac.stderr).toBe(0);
      for (const resource of [
        'httpproxies.projectcontour.io',
        'ingresses.networking.k8s.io',
        'httproutes.gateway.networking.k8s.io',
      ])
        await waitFor(`${deployer} to be allowed to create ${resource}`, async () =>
          (await byDeployer(['auth', 'can-i', 'create', resource, '-n', tenant])).stdout.trim() === 'yes'
            ? true
            : undefined,
        );
      const grabs = [
        {
          apiVersion: 'projectcontour.io/v1',
          kind: 'HTTPProxy',
          metadata: { name: 'grab', namespace: tenant },
          spec: {
            virtualhost: { fqdn: hostname },
            routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
          },
        },
        {
          apiVersion: 'networking.k8s.io/v1',
          kind: 'Ingress',
          metadata: { name: 'grab', namespace: tenant },
          spec: {
            rules: [
              {
                host: hostname,
                http: {
                  paths: [
                    {
                      path: '/',
                      pathType: 'Prefix',
                      backend: { service: { name: 'web', port: { number: 80 } } },
                    },
                  ],
                },
              },
            ],
          },
        },
        {
          apiVersion: 'gateway.networking.k8s.io/v1',
          kind: 'HTTPRoute',
          metadata: { name: 'grab', namespace: tenant },
          spec: { hostnames: [hostname], rules: [{ backendRefs: [{ name: 'web', port: 80 }] }] },
        },
      ];
      // Before the policy: the tenant's HTTPProxy for a name under the apps domain it does not hold.
      const unheld = `before-${tenant}.${APPS_DOMAIN}`;
      const early = {
        ...grabs[0],
        metadata: { name: 'before', namespace: tenant },
        spec: {
          virtualhost: { fqdn: unheld },
          routes: [{ conditions: [{ prefix: '/' }], services: [{ name: 'web', port: 80 }] }],
        },
      };
      const before = await byDeployer(['create'], [early]);
      expect(before.code, before.stderr).toBe(0);

      policy = await applyAppsDomainAdmission(await adminKubectl(), REPO, tenant, APPS_DOMAIN);

      for (const grab of grabs) {
        const refused = await byDeployer(['create'], [grab]);
        expect(refused.code, `${grab.kind}: ${refused.stdout}`).not.toBe(0);
        expect(refused.stderr, grab.kind).toContain(
          `${deployer} may not create the ${grab.kind} ${tenant}/grab: it names ${hostname}, in the apps domain ${APPS_DOMAIN}, which is the platform's: each project's subdomain <project>.${APPS_DOMAIN} is routed by the Portico controller (${CONTROLLER}) alone`,
        );
        expect(refused.stderr, grab.kind).toContain(
          `attach it with a CustomDomain or list it in your Project's spec.domains (kubectl get projects,customdomains -n ${tenant})`,
        );
        const kept = await kubectl(['get', grab.kind.toLowerCase(), 'grab', '-n', tenant]);
        expect(kept.stderr, grab.kind).toContain('NotFound');
      }
      // The route made before the policy: an edit that keeps it is refused, its deletion is not.
      const edited = await byDeployer([
        'patch',
        'httpproxy',
        'before',
        '-n',
        tenant,
        '--type=merge',
        '-p',
        JSON.stringify({
          spec: { routes: [{ conditions: [{ prefix: '/admin' }], services: [{ name: 'web', port: 80 }] }] },
        }),
      ]);
      expect(edited.code).not.toBe(0);
      expect(edited.stderr).toContain(
        `${deployer} may not update the HTTPProxy ${tenant}/before: it names ${unheld}`,
      );
      const deleted = await byDeployer(['delete', 'httpproxy', 'before', '-n', tenant]);
      expect(deleted.code, deleted.stderr).toBe(0);

      // The controller's identity may: a dry run of the HTTPProxy as its ServiceAccount, and a new
      // project's subdomain route, written by the operator under the policy and valid in Contour.
      const asController = await kubectlObjects(['create', '--dry-run=server'], [grabs[0] ?? {}], CONTROLLER);
      expect(asController.code, asController.stderr).toBe(0);
      const ns = unique('sub-adm');
      await createProject(ns, { plan: 'free' });
      await createProjectObject(ns, {
        service: { name: 'web', port: 80 },
        domains: { primary: `www.${ns}.example` },
      });
      const fresh = await waitForSubdomain(ns, { serving: 'True', reason: 'Serving' }, 90_000);
      const freshProxy = await readProxy(ns, subdomainProxyName(fresh));
      expect(freshProxy.spec.virtualhost.fqdn).toBe(`${ns}.${APPS_DOMAIN}`);
      expect(freshProxy.status?.currentStatus).toBe('valid');

      // The victim's subdomain: its route is the Project's and valid, its status Serving, and
      // Contour's xDS routes it to the project with the wildcard certificate.
      const project = await waitForSubdomain(victim, { serving: 'True', reason: 'Serving' });
      const own = await readProxy(victim, subdomainProxyName(project));
      expect(own.spec.virtualhost.fqdn).toBe(hostname);
      expect(own.status?.currentStatus).toBe('valid');
      expect(own.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Project', uid: project.metadata.uid });
      expect(await httpsRouteOf(hostname)).toMatch(/^cluster:/);
      // (the short-lived wildcard may be renewed meanwhile: the served certificate is the Secret's)
      expect(
        await waitFor(`xDS to serve the wildcard Secret's certificate for ${hostname}`, async () =>
          (await servedSerial(hostname)) === leafOf((await readSecret()) ?? {}).serialNumber
            ? true
            : undefined,
        ),
      ).toBe(true);
    },
  );

  it(
    'Supplement (default): the subdomain keeps serving the content once the primary is Live',
    { timeout: 180_000 },
    async () => {
      const ns = unique('sub-sup');
      const hostname = `${ns}.${APPS_DOMAIN}`;
      const primary = `www.${ns}.example`;
      await createProject(ns, { plan: 'pro' });
      await dns.setCname(primary, sandbox.platformCnameTarget);
      await createProjectObject(ns, { service: { name: 'web', port: 80 }, domains: { primary } });
      const live = await waitFor(
        `${ns}/site servingPrimary ${primary}`,
        async () => {
          const p = await getProject(ns);
          return p.status?.servingPrimary === primary && p.status.subdomain?.serving === 'True'
            ? p
            : undefined;
        },
        150_000,
      );
      expect(live.spec.domains.generatedSubdomain).toBe('Supplement');
      expect(live.status?.subdomain).toMatchObject({ hostname, answer: 'Content', reason: 'Serving' });
      expect(await httpsRouteOf(hostname)).toMatch(/^cluster:/);
    },
  );

  it(
    'Replace: a 301 to the primary once it is Live; a downgrade below Pro stops the custom domain and the subdomain serves again',
    { timeout: 240_000 },
    async () => {
      const ns = unique('sub-rep');
      const hostname = `${ns}.${APPS_DOMAIN}`;
      const primary = `www.${ns}.example`;
      await createProject(ns, { plan: 'pro' });
      await dns.setCname(primary, sandbox.platformCnameTarget);
      await createProjectObject(ns, {
        service: { name: 'web', port: 80 },
        domains: { primary, generatedSubdomain: 'Replace' },
      });
      const redirecting = await waitForSubdomain(ns, { answer: 'Redirect', serving: 'True' }, 150_000);
      expect(redirecting.status?.servingPrimary).toBe(primary);
      expect(redirecting.status?.subdomain).toMatchObject({
        hostname,
        redirectTo: primary,
        reason: 'Serving',
      });
      const proxy = await readProxy(ns, subdomainProxyName(redirecting));
      expect(proxy.spec.routes).toEqual([
        {
          conditions: [{ prefix: '/' }],
          permitInsecure: true,
          requestRedirectPolicy: { scheme: 'https', hostname: primary, statusCode: 301 },
        },
      ]);
      expect(
        await waitFor(
          `Envoy's route for ${hostname} to redirect`,
          async () =>
            (await httpsRouteOf(hostname)).startsWith('redirect:') ? httpsRouteOf(hostname) : undefined,
          30_000,
        ),
      ).toBe(`redirect:${primary}/301`);

      // Downgrade: the custom domain stops (as today), the subdomain serves the content again.
      await setPlan(ns, 'free');
      const downgraded = await waitForSubdomain(ns, { answer: 'Content', serving: 'True' }, 90_000);
      expect(downgraded.status?.servingPrimary).toBeUndefined();
      const cd = await customDomain(ns, primary);
      expect(cd?.status?.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({
        status: 'False',
        reason: 'PlanNotEligible',
      });
      expect(
        await waitFor(
          `Envoy's route for ${hostname} to serve`,
          async () => ((await httpsRouteOf(hostname)).startsWith('cluster:') ? true : undefined),
          30_000,
        ),
      ).toBe(true);
      // The primary's own route is gone from the data plane.
      expect(
        await waitFor(
          `the route of ${primary} to be gone`,
          async () => ((await virtualHostsFor(primary)).length === 0 ? true : undefined),
          30_000,
        ),
      ).toBe(true);
    },
  );

  it('the CRD refuses a generatedSubdomain other than Supplement or Replace, and defaults it to Supplement', async () => {
    const ns = projects[0]?.namespace ?? '';
    const body = (name: string, generatedSubdomain?: string): object => ({
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'Project',
      metadata: { name, namespace: ns },
      spec: {
        service: { name: 'web' },
        domains: {
          primary: `${name}.${ns}.example`,
          ...(generatedSubdomain === undefined ? {} : { generatedSubdomain }),
        },
      },
    });
    const refused: unknown = await kube()
      .custom.createNamespacedCustomObject({
        ...projectApi,
        namespace: ns,
        body: body('both', 'Both'),
        dryRun: 'All',
      })
      .catch((err: unknown) => err);
    expect(String((refused as { body?: unknown }).body ?? refused)).toContain(
      'generatedSubdomain must be Supplement (the subdomain keeps serving beside the custom domains) or Replace (it redirects to the primary once the primary is Live)',
    );
    const defaulted = (await kube().custom.createNamespacedCustomObject({
      ...projectApi,
      namespace: ns,
      body: body('plain'),
      dryRun: 'All',
    })) as Project;
    expect(defaulted.spec.domains.generatedSubdomain).toBe('Supplement');
  });

  it(
    "renews the wildcard when the CA's ARI window says so, and the data plane serves the new one",
    { timeout: 150_000 },
    async () => {
      // The time the operator chose in Pebble's window for a week's certificate: days away.
      const { leaf: first, decision } = await wildcardWithDecision();
      const chosen = Date.parse(decision.renewalTime);
      expect(chosen).toBeGreaterThan(Date.now() + 86_400_000);
      if (!started) throw new Error('the apps domain operator did not start');
      await wildcardWindowInThePast(first, started.pebble.managementUrl);
      const { leaf: renewed } = await wildcardRenewedFrom(first, 90_000);
      // Renewed now, at the CA's word, days before the time first chosen; for the same name.
      expect(Date.now()).toBeLessThan(chosen);
      expect(renewed.subjectAltName).toBe(`DNS:*.${APPS_DOMAIN}`);
      const hostname = `${projects[0]?.namespace ?? ''}.${APPS_DOMAIN}`;
      expect(
        await waitFor(
          `xDS to serve the renewed certificate for ${hostname}`,
          async () => ((await servedSerial(hostname)) === renewed.serialNumber ? true : undefined),
          30_000,
        ),
      ).toBe(true);
      const orders = await operatorLogLines(
        operator as OperatorProcess,
        'ordering the apps domain wildcard certificate (dns-01)',
      );
      // The first order and the renewal: none came by itself.
      expect(orders).toHaveLength(2);
    },
  );

  it('the TLSCertificateDelegation lists the namespaces with a subdomain, and the key stays in the operator namespace', async () => {
    const delegation = (await kube().custom.getNamespacedCustomObject({
      group: 'projectcontour.io',
      version: 'v1',
      plural: 'tlscertificatedelegations',
      namespace: OPERATOR_NAMESPACE,
      name: SUBDOMAIN_DELEGATION_NAME,
    })) as KubernetesObject & { spec: { delegations: { secretName: string; targetNamespaces: string[] }[] } };
    expect(delegation.spec.delegations).toHaveLength(1);
    expect(delegation.spec.delegations[0]?.secretName).toBe(APPS_DOMAIN_SECRET);
    expect([...(delegation.spec.delegations[0]?.targetNamespaces ?? [])].sort()).toEqual(
      projects.map((p) => p.namespace).sort(),
    );
    for (const { namespace } of projects) {
      const secrets = await kube().core.listNamespacedSecret({ namespace });
      expect(
        secrets.items.filter(
          (s) => s.type === 'kubernetes.io/tls' && s.metadata?.name === APPS_DOMAIN_SECRET,
        ),
      ).toEqual([]);
    }
  });
});
