/**
 * A real ingress controller judges Portico's Ingresses (docs/routing.md, "Contour"): the stack's
 * Contour takes them, writes their `status.loadBalancer`, and builds the Envoy configuration it
 * would push. No Envoy runs here, so Contour's status writes and its xDS (read with `contour cli`,
 * support/contour.ts) are the evidence: the TLS filter chain for each hostname carries the
 * certificate in Portico's Secret (compared by serial, before and after a renewal), the route goes
 * to the project's Service, and after deletion nothing is left for the hostname.
 *
 * The stack's operator runs in ingress mode with the acknowledgement on and `--data-plane-name
 * Contour` (src/sandbox/stack.ts), so Routed is Contour's word, not the test's.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import {
  createServingDomain,
  deleteCustomDomain,
  domainCondition,
  getCustomDomain,
  kube,
  renewalWindowInThePast,
  requestVerify,
  sandbox,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  httpsFilterChains,
  sdsCertificateSerial,
  sdsSecretName,
  virtualHostsFor,
  withContourPaused,
} from './support/contour.js';

/**
 * A serial as uppercase hex without separators or leading zeros: Node's X509Certificate prints
 * whole bytes (a leading 0 nibble kept), the status may not.
 */
function normalSerial(serial: string | undefined): string {
  return (serial ?? '').replaceAll(':', '').toUpperCase().replace(/^0+/, '');
}

describe('Contour takes the Ingress of a domain', () => {
  let ns: string;
  let hostname: string;
  let live: CustomDomain;

  beforeAll(async () => {
    expect(sandbox.dataPlane).toBe('contour');
    ({ ns, hostname } = await createServingDomain('contour'));
    live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 90_000);
  });

  it("is Live once Contour published its address on the Ingress, and Routed says so in Contour's name", async () => {
    const ingress = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' });
    expect(ingress.status?.loadBalancer?.ingress).toEqual([{ ip: '127.0.0.1' }]);
    expect(domainCondition(live, 'Routed')).toMatchObject({ status: 'True' });
    expect(domainCondition(live, 'Routed').message).toContain(
      'Contour took Ingress portico-www (published address 127.0.0.1).',
    );
    expect(domainCondition(live, 'Routed').message).not.toContain('unconfirmed');
    // No Envoy runs here, so no serving check: Ready names what it rests on, not serving.
    const ready = domainCondition(live, 'Ready').message;
    expect(ready).toBe(
      `${hostname} has certificate ${live.status?.certificate?.serialNumber}, and its route is acknowledged: Contour took Ingress portico-www (published address 127.0.0.1). ` +
        'Serving was not observed: no HTTPS request is made while the serving check is off (--serving-check-address, chart value routing.servingCheck.address).',
    );
    expect(ready).not.toContain('serves over HTTPS');
  });

  it("has, in Contour's xDS, a TLS filter chain for the hostname whose certificate is the one in Portico's Secret", async () => {
    const serial = normalSerial(live.status?.certificate?.serialNumber);
    expect(serial).not.toBe('');
    const chains = await waitFor('a TLS filter chain for the hostname in LDS', async () => {
      const found = await httpsFilterChains(hostname);
      return found.length > 0 ? found : undefined;
    });
    expect(chains).toHaveLength(1);
    const [chain] = chains;
    const secretName = chain === undefined ? undefined : sdsSecretName(chain);
    // Contour names SDS secrets <namespace>/<name>/<hash of the content>.
    expect(secretName).toMatch(new RegExp(`^${ns}/www-tls/[0-9a-f]+$`));
    expect(normalSerial(await sdsCertificateSerial(secretName ?? ''))).toBe(serial);
  });

  it("routes the hostname to the project's Service, on HTTP and HTTPS", async () => {
    const hosts = await virtualHostsFor(hostname);
    const configs = hosts.map((h) => h.routeConfig).sort();
    expect(configs).toEqual(['https/' + hostname, 'ingress_http']);
    for (const host of hosts) {
      const clusters = host.routes.map((r) => r.route?.cluster).filter(Boolean);
      // Contour's cluster name: <namespace>/<service>/<port>/<hash>.
      expect(clusters).toContainEqual(expect.stringMatching(new RegExp(`^${ns}/web/80/[0-9a-f]+$`)));
    }
  });

  it('serves the renewed certificate on the listener after a renewal (a new serial in SDS)', async () => {
    const before = normalSerial(live.status?.certificate?.serialNumber);
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    await renewalWindowInThePast(pem);
    await requestVerify(ns, 'www', 'renew-on-contour');
    const renewed = await waitFor(
      'a renewed certificate in status',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const serial = normalSerial(cd.status?.certificate?.serialNumber);
        return serial !== '' && serial !== before ? serial : undefined;
      },
      90_000,
    );
    const onListener = await waitFor('the renewed serial on the listener', async () => {
      const [chain] = await httpsFilterChains(hostname);
      const name = chain === undefined ? undefined : sdsSecretName(chain);
      const serial = name === undefined ? undefined : normalSerial(await sdsCertificateSerial(name));
      return serial === renewed ? serial : undefined;
    });
    expect(onListener).toBe(renewed);
    expect(onListener).not.toBe(before);
  });

  it('leaves nothing for the hostname in Contour after the domain is deleted', async () => {
    await deleteCustomDomain(ns, 'www');
    await waitFor('no filter chain and no virtual host for the hostname', async () => {
      const [chains, hosts] = await Promise.all([httpsFilterChains(hostname), virtualHostsFor(hostname)]);
      return chains.length === 0 && hosts.length === 0 ? true : undefined;
    });
    expect(await httpsFilterChains(hostname)).toEqual([]);
    expect(await virtualHostsFor(hostname)).toEqual([]);
  });
});

describe('Contour not answering', () => {
  it('keeps a new domain waiting with a message naming Contour and since when, and Ready once Contour runs again', async () => {
    const { ns, hostname } = await withContourPaused(async () => {
      const made = await createServingDomain('contour-paused');
      const waiting = await waitForCondition(made.ns, 'www', 'Routed', 'False', 'AwaitingDataPlane', 60_000);
      await waitForCondition(made.ns, 'www', 'CertificateReady', 'True', undefined, 90_000);
      const held = await getCustomDomain(made.ns, 'www');
      expect(domainCondition(held, 'Ready')).toMatchObject({ status: 'False', reason: 'AwaitingDataPlane' });
      expect(held.status?.phase).not.toBe('Live');
      const message = domainCondition(waiting, 'Routed').message ?? '';
      expect(message).toMatch(
        /^Ingress portico-www is written since \d{4}-\d\d-\d\dT[\d:.]+Z, but no address/,
      );
      expect(message).toContain(
        "Contour (the controller of the cluster's default ingress class) has not taken it",
      );
      const ingress = await kube().networking.readNamespacedIngress({
        namespace: made.ns,
        name: 'portico-www',
      });
      expect(ingress.status?.loadBalancer?.ingress ?? []).toEqual([]);
      return made;
    });
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', 'Live', 60_000);
    expect(domainCondition(live, 'Routed').message).toContain('Contour took Ingress portico-www');
    expect(domainCondition(live, 'Ready').message).toContain(
      `${hostname} has certificate ${live.status?.certificate?.serialNumber}, and its route is acknowledged: Contour took Ingress portico-www`,
    );
  });
});
