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
 * What it starts, and stops in `afterAll` (the stack is left as found): Knot and BIND, the second
 * Pebble, its operator; the Projects, the wildcard Secret and the TLSCertificateDelegation are
 * deleted; the stack's operator is restarted.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import {
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Secret,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import type { Project } from '../../src/api/project.js';
import { SUBDOMAIN_DELEGATION_NAME } from '../../src/controllers/project/controller.js';
import { subdomainProxyName } from '../../src/controllers/project/subdomain.js';
import { APPS_DOMAIN_SECRET } from '../../src/controller/main.js';
import type { TsigKey } from '../../src/dns/dynamic-update.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import { deleteAppsDomainObjects, deleteProjects } from './support/apps-domain.js';
import { startChallengeZone, stopChallengeZone } from './support/challenge-zone.js';
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
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  challengePort,
  operatorLogLines,
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const APPS_DOMAIN = 'apps.portico.test';
const PEBBLE_NAME = 'pebble-subdomain';
/** The validity of the second Pebble's certificates, in seconds. */
const CERTIFICATE_SECONDS = 90;
const key: TsigKey = { name: 'portico-apps.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;
const proxyApi = { group: 'projectcontour.io', version: 'v1', plural: 'httpproxies' } as const;

let stack: ControllerCommand | undefined;
let pebble: SecondPebble | undefined;
let operator: OperatorProcess | undefined;
let knot: Resolver;
const accountSecret = `subdomain-${Date.now().toString(36)}`;
const projects: { namespace: string; name: string }[] = [];

async function createProjectObject(namespace: string, spec: Project['spec']): Promise<void> {
  await kube().custom.createNamespacedCustomObject({
    ...projectApi,
    namespace,
    body: {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'Project',
      metadata: { name: 'site', namespace },
      spec,
    },
  });
  projects.push({ namespace, name: 'site' });
}

async function getProject(namespace: string): Promise<Project> {
  return (await kube().custom.getNamespacedCustomObject({
    ...projectApi,
    namespace,
    name: 'site',
  })) as Project;
}

/** Waits until the Project's status.subdomain matches `want` for its current generation. */
async function waitForSubdomain(
  namespace: string,
  want: Partial<NonNullable<NonNullable<Project['status']>['subdomain']>>,
  timeoutMs = 60_000,
): Promise<Project> {
  return waitFor(
    `${namespace}/site status.subdomain ${JSON.stringify(want)}`,
    async () => {
      const p = await getProject(namespace);
      if (p.status?.observedGeneration !== p.metadata.generation) return undefined;
      const s = p.status?.subdomain;
      if (s === undefined) return undefined;
      return Object.entries(want).every(([k, v]) => (s as unknown as Record<string, unknown>)[k] === v)
        ? p
        : undefined;
    },
    timeoutMs,
  );
}

async function readSecret(): Promise<V1Secret | undefined> {
  return kube()
    .core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: APPS_DOMAIN_SECRET })
    .catch(() => undefined);
}

function leafOf(secret: V1Secret): X509Certificate {
  return new X509Certificate(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64'));
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

beforeAll(async () => {
  const zone = await startChallengeZone(APPS_DOMAIN, key);
  knot = new Resolver({ timeout: 2000, tries: 1 });
  knot.setServers([`${zone.zoneServer.host}:${zone.zoneServer.port}`]);
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  pebble = await startSecondPebble(
    PEBBLE_NAME,
    // Short certificates, so that the wildcard's renewal (two thirds in: 60 s) happens in this file.
    { default: { description: '90-second certificates', validityPeriod: CERTIFICATE_SECONDS } },
    { dnsServer: `${zone.resolver.host}:${zone.resolver.port}`, httpPort: challengePort(stack) },
  );
  operator = await startOperator(stack, 'project-subdomain', {
    '--acme-directory-url': pebble.directoryUrl,
    '--acme-account-secret': accountSecret,
    '--ingress-flavor': 'contour',
    '--apps-domain': APPS_DOMAIN,
    '--dns01-server': `${zone.zoneServer.host}:${zone.zoneServer.port}`,
    '--dns01-tsig-key-name': key.name,
    '--dns01-tsig-algorithm': key.algorithm,
    '--dns01-tsig-secret': key.secret.toString('base64'),
  });
}, 180_000);

afterAll(async () => {
  await runAll(
    () => deleteProjects(projects.splice(0)),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => stopSecondPebble(PEBBLE_NAME),
    () => stopChallengeZone(),
    () => deleteAppsDomainObjects([accountSecret]),
    () => restartStackController(stack),
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
        await getPebble(`${pebble?.managementUrl ?? ''}/intermediates/0`),
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
    'renews the wildcard like any other certificate, two thirds into its validity, and the data plane serves the new one',
    { timeout: 150_000 },
    async () => {
      const first = leafOf((await readSecret()) ?? {});
      const renewAt =
        Date.parse(first.validFrom) + ((Date.parse(first.validTo) - Date.parse(first.validFrom)) * 2) / 3;
      const renewed = await waitFor(
        'the wildcard Secret to hold a renewed certificate',
        async () => {
          const leaf = leafOf((await readSecret()) ?? {});
          return leaf.serialNumber !== first.serialNumber ? leaf : undefined;
        },
        CERTIFICATE_SECONDS * 1000 + 30_000,
        1000,
      );
      // Not before its time (a second of slack for the clocks), and for the same name.
      expect(Date.now()).toBeGreaterThanOrEqual(renewAt - 1000);
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
      expect(orders.length).toBeGreaterThanOrEqual(2);
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
