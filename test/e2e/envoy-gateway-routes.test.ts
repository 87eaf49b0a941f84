/**
 * Gateway API mode judged by a real Envoy Gateway v1.9.1 (docs/routing.md, "Envoy Gateway"): the
 * file starts Envoy Gateway in the stack (support/envoy-gateway.ts) with the sandbox's GatewayClass
 * and Gateway, and runs an operator of its own in gateway mode with the acknowledgement on and
 * `--data-plane-name "Envoy Gateway"`. Every assertion about the data plane reads what Envoy
 * Gateway wrote (HTTPRoute and ListenerSet status) or what it serves an Envoy over xDS (its ADS
 * stream, asked as Envoy asks: support/envoy-gateway.ts). The test writes no status.
 *
 * No Envoy runs here: Envoy Gateway's Envoy Deployment never starts, so the Gateway stays
 * `Programmed=False` (`AddressNotAssigned`); Portico does not read the Gateway's conditions, only
 * the HTTPRoute's and the ListenerSet's, which Envoy Gateway sets from its translation
 * (docs/routing.md, "Envoy Gateway").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import type {
  HTTPRouteWithStatus,
  ListenerSetWithStatus,
  StatusCondition,
} from '../../src/routing/acknowledgement.js';
import {
  ENVOY_GATEWAY_CONTROLLER_NAME,
  SANDBOX_GATEWAY,
  gatewayParentRefsArg,
} from '../../src/data-planes/envoy-gateway/sandbox-process.js';
import {
  createCustomDomain,
  createProject,
  createServingDomain,
  deleteCreatedDomains,
  deleteCustomDomain,
  dns,
  domainCondition,
  getCustomDomain,
  kube,
  renewalWindowInThePast,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  ENVOY_GATEWAY_OPERATOR_FLAGS,
  XDS_TYPE,
  filterChainsFor,
  normalSerial,
  routesFor,
  sdsSecretName,
  sdsSerial,
  startStackEnvoyGateway,
  stopStackEnvoyGateway,
  xdsResources,
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
import { selfSignedCertificate } from '../support/stand-in-ingress.js';

const GATEWAY_API = { group: 'gateway.networking.k8s.io', version: 'v1' } as const;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let egStarted = false;
/** The CustomDomains this file made: deleted before its operator stops, so none is left to the next file's. */
const created: { namespace: string; name: string }[] = [];

beforeAll(async () => {
  await startStackEnvoyGateway();
  egStarted = true;
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'envoy-gateway-routes', ENVOY_GATEWAY_OPERATOR_FLAGS);
});

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await deleteCreatedDomains(created, 'envoy-gateway-routes');
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

async function read<T>(plural: string, namespace: string, name: string): Promise<T> {
  return (await kube().custom.getNamespacedCustomObject({ ...GATEWAY_API, plural, namespace, name })) as T;
}

function condition(conditions: StatusCondition[] | undefined, type: string): StatusCondition | undefined {
  return conditions?.find((c) => c.type === type);
}

describe('Envoy Gateway takes the HTTPRoute and ListenerSet of a serving domain', () => {
  let ns: string;
  let hostname: string;
  let live: CustomDomain;

  beforeAll(async () => {
    ({ ns, hostname } = await createServingDomain('eg'));
    created.push({ namespace: ns, name: 'www' });
    live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 90_000);
  });

  it("is Live once Envoy Gateway accepted the HTTPRoute and programmed the ListenerSet, and Routed says so in Envoy Gateway's name", async () => {
    const route = await read<HTTPRouteWithStatus>('httproutes', ns, 'portico-www');
    const parents = route.status?.parents ?? [];
    expect(parents.length).toBe(2); // the Gateway and the domain's ListenerSet
    for (const parent of parents) {
      expect(parent.controllerName).toBe(ENVOY_GATEWAY_CONTROLLER_NAME);
      expect(condition(parent.conditions, 'Accepted')).toMatchObject({ status: 'True' });
      expect(condition(parent.conditions, 'ResolvedRefs')).toMatchObject({ status: 'True' });
    }
    const set = await read<ListenerSetWithStatus>('listenersets', ns, 'portico-www');
    expect(condition(set.status?.conditions, 'Accepted')).toMatchObject({ status: 'True' });
    expect(condition(set.status?.conditions, 'Programmed')).toMatchObject({ status: 'True' });
    const listener = set.status?.listeners?.find((l) => l.name === 'https');
    expect(condition(listener?.conditions, 'ResolvedRefs')).toMatchObject({ status: 'True' });

    const routed = domainCondition(live, 'Routed');
    expect(routed).toMatchObject({ status: 'True' });
    expect(routed.message).toContain(
      `Envoy Gateway (${ENVOY_GATEWAY_CONTROLLER_NAME}) accepted HTTPRoute portico-www on Gateway ${gatewayParentRefsArg(SANDBOX_GATEWAY)}`,
    );
    expect(routed.message).toContain('Envoy Gateway programmed ListenerSet portico-www.');
    expect(routed.message).not.toContain('unconfirmed');
    // No Envoy runs here, so no serving check: Ready names the acknowledgement, not serving.
    const ready = domainCondition(live, 'Ready').message ?? '';
    expect(ready).toContain(
      `${hostname} has certificate ${live.status?.certificate?.serialNumber}, and its route is acknowledged: `,
    );
    expect(ready).toContain(
      `Envoy Gateway (${ENVOY_GATEWAY_CONTROLLER_NAME}) accepted HTTPRoute portico-www on Gateway ${gatewayParentRefsArg(SANDBOX_GATEWAY)}`,
    );
    expect(ready).toContain('Envoy Gateway programmed ListenerSet portico-www.');
    expect(ready).toContain('Serving was not observed');
    expect(ready).not.toContain('serves over HTTPS');
  });

  it('leaves the Gateway Programmed=False (AddressNotAssigned: its Envoy never runs here), which Portico does not wait for', async () => {
    const gateway = await read<{ status?: { conditions?: StatusCondition[] } }>(
      'gateways',
      SANDBOX_GATEWAY.namespace,
      SANDBOX_GATEWAY.name,
    );
    expect(condition(gateway.status?.conditions, 'Accepted')).toMatchObject({ status: 'True' });
    expect(condition(gateway.status?.conditions, 'Programmed')).toMatchObject({
      status: 'False',
      reason: 'AddressNotAssigned',
    });
    expect(live.status?.phase).toBe('Live');
  });

  it("has, in Envoy Gateway's xDS, a TLS filter chain for the hostname whose certificate is the one in Portico's Secret", async () => {
    const serial = normalSerial(live.status?.certificate?.serialNumber);
    expect(serial).not.toBe('');
    const chains = await waitFor('a TLS filter chain for the hostname in LDS', async () => {
      const found = await filterChainsFor(hostname);
      return found.length > 0 ? found : undefined;
    });
    expect(chains).toHaveLength(1);
    const secretName = sdsSecretName(chains[0] ?? {});
    // Envoy Gateway names SDS secrets <namespace>/<name> of the Kubernetes Secret.
    expect(secretName).toBe(`${ns}/www-tls`);
    const served = await waitFor('the secret in SDS', async () => sdsSerial(secretName ?? ''));
    expect(normalSerial(served)).toBe(serial);
  });

  it("routes the hostname to the project's Service", async () => {
    const hosts = await routesFor(hostname);
    expect(hosts.length).toBeGreaterThan(0);
    const clusters = hosts.flatMap((h) => h.routes.map((r) => r.route?.cluster)).filter(Boolean);
    // Envoy Gateway's cluster per HTTPRoute rule: httproute/<namespace>/<name>/rule/<index>.
    expect(clusters).toContainEqual(`httproute/${ns}/portico-www/rule/0`);
    const clusterNames = (await xdsResources(XDS_TYPE.cluster)).map((c) => c.name);
    expect(clusterNames).toContain(`httproute/${ns}/portico-www/rule/0`);
  });

  it('serves the renewed certificate after a renewal (a new serial in SDS)', async () => {
    const before = normalSerial(live.status?.certificate?.serialNumber);
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    await renewalWindowInThePast(pem);
    await requestVerify(ns, 'www', 'renew-on-envoy-gateway');
    const renewed = await waitFor(
      'a renewed certificate in status',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const serial = normalSerial(cd.status?.certificate?.serialNumber);
        return serial !== '' && serial !== before ? serial : undefined;
      },
      90_000,
    );
    const served = await waitFor('the renewed serial in SDS', async () => {
      const serial = normalSerial(await sdsSerial(`${ns}/www-tls`));
      return serial === renewed ? serial : undefined;
    });
    expect(served).toBe(renewed);
    expect(served).not.toBe(before);
  });

  it('leaves nothing for the hostname in Envoy Gateway after the domain is deleted', async () => {
    await deleteCustomDomain(ns, 'www');
    await waitFor('no filter chain and no virtual host for the hostname', async () => {
      const [chains, hosts] = await Promise.all([filterChainsFor(hostname), routesFor(hostname)]);
      return chains.length === 0 && hosts.length === 0 ? true : undefined;
    });
    expect(await filterChainsFor(hostname)).toEqual([]);
    expect(await routesFor(hostname)).toEqual([]);
  });
});

describe('Envoy Gateway takes a redirect domain', () => {
  it('answers the hostname with the redirect: https, the target host, response code 308 (PERMANENT_REDIRECT), and 301 by default', async () => {
    const ns = unique('eg-redir');
    await createProject(ns);
    const target = `www.${ns}.example`;
    const hostname = `old.${ns}.example`;
    await dns.setCname(target, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname: target, service: { name: 'web', port: 80 } });
    created.push({ namespace: ns, name: 'www' });
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'old', {
      hostname,
      service: { name: 'web', port: 80 },
      redirect: { to: target, statusCode: 308 },
    });
    created.push({ namespace: ns, name: 'old' });
    await waitForCondition(ns, 'old', 'Ready', 'True', 'Live', 90_000);
    const hosts = await waitFor('the redirect route in RDS', async () => {
      const found = await routesFor(hostname);
      return found.some((h) => h.routes.some((r) => r.redirect !== undefined)) ? found : undefined;
    });
    const redirects = hosts.flatMap((h) => h.routes.map((r) => r.redirect)).filter((r) => r !== undefined);
    expect(redirects.length).toBeGreaterThan(0);
    for (const redirect of redirects)
      expect(redirect).toMatchObject({
        scheme_redirect: 'https',
        host_redirect: target,
        response_code: 'PERMANENT_REDIRECT',
      });

    // The spec's default status (no statusCode): 301. The HTTPRoute says 301; Envoy's RedirectAction
    // has MOVED_PERMANENTLY (301) as its enum's zero value, which the decoded message leaves out
    // (protobufjs toObject without defaults): a redirect with no response_code is a 301
    // (envoy/config/route/v3/route_components.proto).
    const moved = `moved.${ns}.example`;
    await dns.setCname(moved, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'moved', { hostname: moved, redirect: { to: target } });
    created.push({ namespace: ns, name: 'moved' });
    await waitForCondition(ns, 'moved', 'Ready', 'True', 'Live', 90_000);
    const route = (await kube().custom.getNamespacedCustomObject({
      group: 'gateway.networking.k8s.io',
      version: 'v1',
      plural: 'httproutes',
      namespace: ns,
      name: 'portico-moved',
    })) as { spec: { rules: { filters?: { requestRedirect?: { statusCode?: number } }[] }[] } };
    expect(
      route.spec.rules.flatMap((r) => r.filters ?? []).map((f) => f.requestRedirect?.statusCode),
    ).toEqual([301]);
    const movedHosts = await waitFor('the default redirect route in RDS', async () => {
      const found = await routesFor(moved);
      return found.some((h) => h.routes.some((r) => r.redirect !== undefined)) ? found : undefined;
    });
    const movedRedirects = movedHosts
      .flatMap((h) => h.routes.map((r) => r.redirect))
      .filter((r) => r !== undefined);
    expect(movedRedirects.length).toBeGreaterThan(0);
    for (const redirect of movedRedirects) {
      expect(redirect).toMatchObject({ scheme_redirect: 'https', host_redirect: target });
      expect(redirect.response_code ?? 'MOVED_PERMANENTLY').toBe('MOVED_PERMANENTLY');
    }
  });
});

describe("Envoy Gateway's refusals reach Routed with its own reason", () => {
  it("a ListenerSet whose Secret does not exist (the certificate held back by a CAA record for another CA): Routed=False with Envoy Gateway's InvalidCertificateRef", async () => {
    const ns = unique('eg-nocert');
    await createProject(ns);
    const zone = `${ns}.example`;
    const hostname = `www.${zone}`;
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    // At the parent: a CAA record beside the hostname's CNAME is never seen (RFC 8659 §3 follows
    // the CNAME, then climbs the original name's parents), so the CA would issue.
    await dns.post('/add-caa', { host: zone, policies: [{ tag: 'issue', value: 'digicert.com' }] });
    try {
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
      created.push({ namespace: ns, name: 'www' });
      // The CA's refusal first, so nothing can replace the Secret while Routed is read.
      await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance', 60_000);
      const cd = await waitForCondition(ns, 'www', 'Routed', 'False', 'InvalidCertificateRef', 60_000);
      const set = await read<ListenerSetWithStatus>('listenersets', ns, 'portico-www');
      const listener = set.status?.listeners?.find((l) => l.name === 'https');
      const resolved = condition(listener?.conditions, 'ResolvedRefs');
      expect(resolved).toMatchObject({ status: 'False', reason: 'InvalidCertificateRef' });
      expect(domainCondition(cd, 'Routed').message).toContain(
        `ListenerSet portico-www listener https: ResolvedRefs=False (InvalidCertificateRef): ${resolved?.message ?? ''}`,
      );
      expect(domainCondition(cd, 'Ready').status).toBe('False');
    } finally {
      // Deleted before the CAA record goes, so no certificate is ordered for it afterwards.
      await deleteCreatedDomains(created, 'envoy-gateway-routes');
      await dns.post('/clear-caa', { host: zone });
    }
  });

  it("a Secret that is not a usable certificate (its tls.crt no PEM; the CA held back by CAA, so Portico issues none to replace it): Routed=False with Envoy Gateway's InvalidCertificateRef and its parse error", async () => {
    const ns = unique('eg-badcert');
    await createProject(ns);
    const zone = `${ns}.example`;
    const hostname = `www.${zone}`;
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    // At the parent: a CAA record beside the hostname's CNAME is never seen (RFC 8659 §3 follows
    // the CNAME, then climbs the original name's parents), so the CA would issue.
    await dns.post('/add-caa', { host: zone, policies: [{ tag: 'issue', value: 'digicert.com' }] });
    try {
      await kube().core.createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: 'www-tls' },
          type: 'kubernetes.io/tls',
          data: {
            'tls.crt': Buffer.from('not a certificate').toString('base64'),
            'tls.key': Buffer.from('not a key').toString('base64'),
          },
        },
      });
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
      created.push({ namespace: ns, name: 'www' });
      await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance', 60_000);
      // Envoy Gateway's words for a Secret that holds data but no certificate (not the "does not
      // exist" of a missing one): what its listener says is what Routed carries.
      const cd = await waitFor(
        "Envoy Gateway's verdict on the unusable Secret in Routed",
        async () => {
          const found = await getCustomDomain(ns, 'www');
          const routed = domainCondition(found, 'Routed');
          return routed.status === 'False' &&
            routed.reason === 'InvalidCertificateRef' &&
            !(routed.message ?? '').includes('does not exist')
            ? found
            : undefined;
        },
        60_000,
      );
      const set = await read<ListenerSetWithStatus>('listenersets', ns, 'portico-www');
      const listener = set.status?.listeners?.find((l) => l.name === 'https');
      const resolved = condition(listener?.conditions, 'ResolvedRefs');
      expect(resolved).toMatchObject({ status: 'False', reason: 'InvalidCertificateRef' });
      expect(resolved?.message).not.toContain('does not exist');
      expect(resolved?.message).toContain('www-tls');
      expect(domainCondition(cd, 'Routed').message).toContain(
        `ListenerSet portico-www listener https: ResolvedRefs=False (InvalidCertificateRef): ${resolved?.message ?? ''}`,
      );
      expect(domainCondition(cd, 'Ready').status).toBe('False');
    } finally {
      // Deleted before the CAA record goes, so no certificate is ordered for it afterwards.
      await deleteCreatedDomains(created, 'envoy-gateway-routes');
      await dns.post('/clear-caa', { host: zone });
    }
  });

  it("a hostname another ListenerSet on the Gateway holds already: Routed=False with Envoy Gateway's HostnameConflict", async () => {
    const ns = unique('eg-taken');
    await createProject(ns);
    const hostname = `www.${ns}.example`;
    const other = unique('eg-other');
    await kube().core.createNamespace({ body: { metadata: { name: other } } });
    const pem = await selfSignedCertificate('CN=first', [hostname]);
    await kube().core.createNamespacedSecret({
      namespace: other,
      body: {
        metadata: { name: 'first-tls' },
        type: 'kubernetes.io/tls',
        data: {
          'tls.crt': Buffer.from(pem.certPem).toString('base64'),
          'tls.key': Buffer.from(pem.keyPem).toString('base64'),
        },
      },
    });
    await kube().custom.createNamespacedCustomObject({
      ...GATEWAY_API,
      plural: 'listenersets',
      namespace: other,
      body: {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'ListenerSet',
        metadata: { name: 'first', namespace: other },
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
              tls: { mode: 'Terminate', certificateRefs: [{ kind: 'Secret', name: 'first-tls' }] },
            },
          ],
        },
      },
    });
    await waitFor(
      'Envoy Gateway to accept the other ListenerSet',
      async () => {
        const set = await read<ListenerSetWithStatus>('listenersets', other, 'first');
        const accepted = condition(set.status?.conditions, 'Accepted');
        if (accepted?.status === 'False') throw new Error(`refused: ${JSON.stringify(set.status)}`);
        return accepted?.status === 'True' ? true : undefined;
      },
      20_000,
    );
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
    created.push({ namespace: ns, name: 'www' });
    // Until the certificate is issued the listener's ResolvedRefs is False (InvalidCertificateRef);
    // the conflict is what stays.
    const cd = await waitForCondition(ns, 'www', 'Routed', 'False', 'HostnameConflict', 60_000);
    const set = await read<ListenerSetWithStatus>('listenersets', ns, 'portico-www');
    const listener = set.status?.listeners?.find((l) => l.name === 'https');
    const refusal = condition(listener?.conditions, 'Conflicted');
    expect(refusal).toMatchObject({ status: 'True', reason: 'HostnameConflict' });
    expect(domainCondition(cd, 'Ready').status).toBe('False');
    expect(domainCondition(cd, 'Routed').message).toContain(refusal?.message ?? '');
  });
});
