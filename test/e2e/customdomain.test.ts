/**
 * The CustomDomain lifecycle on the real stack: kube-apiserver + etcd, Pebble as the ACME CA,
 * pebble-challtestsrv as the DNS server, the operator from dist/. Nothing here is mocked.
 */
import { X509Certificate } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  getPebble,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  customDomainApi,
  requestVerify,
} from './support/cluster.js';
import { scrape } from './support/metrics.js';

const target = sandbox.platformCnameTarget;

function splitPem(chain: string): X509Certificate[] {
  return (chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (pem) => new X509Certificate(pem),
  );
}

describe('a subdomain whose CNAME is right', () => {
  const ns = unique('live');
  const hostname = `www.${ns}.example`;

  beforeAll(async () => {
    await createProject(ns);
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
  });

  it('reaches Ready with a certificate from Pebble in a TLS Secret and an Ingress', async () => {
    const cd = await waitForCondition(ns, 'www', 'Ready', 'True');
    expect(cd.status?.phase).toBe('Live');
    expect(cd.status?.observedGeneration).toBe(cd.metadata.generation);
    expect(cd.status?.dnsRecords).toEqual([
      { type: 'CNAME', name: hostname, relativeName: 'www', zone: `${ns}.example`, value: target, ttl: 3600 },
    ]);
    for (const type of ['DNSVerified', 'CertificateReady', 'Routed', 'Ready']) {
      const c = cd.status?.conditions?.find((x) => x.type === type);
      expect(c?.status, type).toBe('True');
      expect(c?.observedGeneration, type).toBe(cd.metadata.generation);
    }
    expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.reason).toBe('RecordMatches');

    const { core, networking } = kube();
    const secret = await core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    expect(secret.type).toBe('kubernetes.io/tls');
    const chain = splitPem(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8'));
    const [leaf, ...intermediates] = chain;
    if (!leaf) throw new Error('no certificate in tls.crt');
    expect(leaf.checkHost(hostname)).toBe(hostname);
    expect(leaf.serialNumber).toBe(cd.status?.certificate?.serialNumber);
    expect(cd.status?.certificate?.dnsNames).toEqual([hostname]);
    expect(Date.parse(cd.status?.certificate?.notAfter ?? '')).toBe(Date.parse(leaf.validTo));

    // The chain verifies up to the root Pebble serves on its management API.
    const root = new X509Certificate(await getPebble(`${sandbox.acmeMgmtUrl}/roots/0`));
    const links = [leaf, ...intermediates];
    for (let i = 0; i < links.length - 1; i++) {
      expect(links[i]?.verify(links[i + 1]?.publicKey ?? root.publicKey)).toBe(true);
    }
    expect(links.at(-1)?.verify(root.publicKey)).toBe(true);
    expect(leaf.verify(root.publicKey)).toBe(false);

    const ingress = await networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' });
    expect(ingress.spec?.tls).toEqual([{ hosts: [hostname], secretName: 'www-tls' }]);
    const rule = ingress.spec?.rules?.[0];
    expect(rule?.host).toBe(hostname);
    expect(rule?.http?.paths.at(-1)?.backend.service).toEqual({ name: 'web', port: { number: 80 } });
  });

  it('tells the story in Events, one Normal Event per status write', async () => {
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    const mine = events.items.filter((e) => e.involvedObject.name === 'www');
    expect(mine.map((e) => e.reason)).toContain('Live');
    const story = mine.map((e) => e.message ?? '').join('\n');
    expect(story).toContain('DNSVerified RecordMatches:');
    expect(story).toContain('CertificateReady Issued:');
    // At most three status writes on the way to Live: verified and ordering; Contour's
    // acknowledgement of the Ingress, when it arrives while the order is still running (a real
    // controller answers on its own time); issued (and routed, if Contour had not answered yet).
    expect(mine.filter((e) => e.type === 'Normal').length).toBeLessThanOrEqual(3);
  });

  it("shows the issuance's ACME requests on the operator's /metrics by endpoint and status, and the certificate's expiry", async () => {
    const samples = await scrape(sandbox.controllerMetricsUrl);
    const requests = samples.filter((s) => s.name === 'portico_acme_requests_total');
    const count = (endpoint: string, status: string): number =>
      requests.find((s) => s.labels['endpoint'] === endpoint && s.labels['status'] === status)?.value ?? 0;
    // What an issuance against Pebble asks (RFC 8555 §7.4): newOrder answers 201, the order's
    // authorization, challenge, finalize and certificate resources 200.
    expect(count('newOrder', '201')).toBeGreaterThanOrEqual(1);
    for (const endpoint of ['authz', 'challenge', 'finalize', 'certificate'])
      expect(count(endpoint, '200'), endpoint).toBeGreaterThanOrEqual(1);
    expect(count('directory', '200')).toBeGreaterThanOrEqual(1);
    // Labels are the fixed endpoint names and status codes, never a URL.
    const endpoints = new Set(requests.map((s) => s.labels['endpoint']));
    expect([...endpoints].every((e) => /^[a-zA-Z]+$/.test(e ?? ''))).toBe(true);
    expect(requests.every((s) => /^(\d{3}|timeout|cancelled|error)$/.test(s.labels['status'] ?? ''))).toBe(
      true,
    );
    const latency = samples.find(
      (s) => s.name === 'portico_acme_request_duration_seconds_count' && s.labels['endpoint'] === 'newOrder',
    );
    expect(latency?.value).toBeGreaterThanOrEqual(1);

    const cd = await getCustomDomain(ns, 'www');
    const expiry = samples.find(
      (s) =>
        s.name === 'portico_certificate_expiration_timestamp_seconds' && s.labels['hostname'] === hostname,
    );
    expect(expiry?.value).toBe(Date.parse(cd.status?.certificate?.notAfter ?? '') / 1000);
    // The order budget counted the order; the stack's operator leads its Lease.
    const one = (name: string): number | undefined => samples.find((s) => s.name === name)?.value;
    expect(one('portico_acme_order_budget_used')).toBeGreaterThanOrEqual(1);
    expect(one('portico_acme_order_budget_limit')).toBeGreaterThan(0);
    expect(one('portico_leader_election_leading')).toBe(1);
  });
});

describe('a subdomain whose DNS is wrong stays unverified', () => {
  const ns = unique('wrong');

  beforeAll(async () => {
    await createProject(ns);
  });

  it('names the A record found where the CNAME should be, and the CNAME wanted', async () => {
    const hostname = `a-record.${ns}.example`;
    await dns.post('/add-a', { host: hostname, addresses: ['192.0.2.10'] });
    await createCustomDomain(ns, 'a-record', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'a-record', 'DNSVerified', 'False', 'ConflictingRecord');
    const message = cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
    expect(message).toContain(`A ${hostname} -> 192.0.2.10`);
    expect(message).toContain(`CNAME ${hostname} -> ${target}`);
    expect(cd.status?.phase).toBe('AwaitingDNS');
    expect(cd.status?.observed?.records).toEqual([{ type: 'A', name: hostname, value: '192.0.2.10' }]);
    expect(Date.parse(cd.status?.observed?.nextCheckAt ?? '')).toBeGreaterThan(
      Date.parse(cd.status?.observed?.checkedAt ?? ''),
    );
    await expect(
      kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-a-record' }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it("names a TXT record at the name as conflicting, with the rule, not as a missing CNAME (MX and NS: unit tests, the stack's DNS server cannot serve them)", async () => {
    const hostname = `txt-record.${ns}.example`;
    await dns.post('/set-txt', { host: `${hostname}.`, value: 'v=spf1 -all' });
    await createCustomDomain(ns, 'txt-record', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'txt-record', 'DNSVerified', 'False', 'ConflictingRecord');
    const message = cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
    expect(message).toContain(
      `Found TXT ${hostname} -> v=spf1 -all where CNAME ${hostname} -> ${target} is wanted`,
    );
    expect(message).toContain('a name with a CNAME can have no other records (RFC 1034 §3.6.2)');
    expect(cd.status?.observed?.records).toEqual([{ type: 'TXT', name: hostname, value: 'v=spf1 -all' }]);
    // Once the customer removes it and creates the CNAME, the domain is verified.
    await dns.post('/clear-txt', { host: `${hostname}.` });
    await dns.setCname(hostname, target);
    await requestVerify(ns, 'txt-record');
    await waitForCondition(ns, 'txt-record', 'DNSVerified', 'True', 'RecordMatches');
  });

  it('names the CNAME to another value, and the CNAME wanted', async () => {
    const hostname = `other-cname.${ns}.example`;
    await dns.setCname(hostname, 'elsewhere.hosting.example');
    await createCustomDomain(ns, 'other-cname', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'other-cname', 'DNSVerified', 'False', 'CNAMEMismatch');
    const message = cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
    expect(message).toContain(`CNAME ${hostname} -> elsewhere.hosting.example`);
    expect(message).toContain(`CNAME ${hostname} -> ${target}`);
    expect(cd.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
  });

  it('says there is no record yet, with the 48-hour propagation note', async () => {
    const hostname = `nothing.${ns}.example`;
    await createCustomDomain(ns, 'nothing', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'nothing', 'DNSVerified', 'False', 'RecordNotFound');
    const message = cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
    expect(message).toContain('48 hours');
    expect(message).toContain(`CNAME ${hostname} -> ${target}`);
  });

  it('goes Live on its own once the customer fixes the record', async () => {
    const hostname = `fixed.${ns}.example`;
    await dns.post('/add-a', { host: hostname, addresses: ['192.0.2.11'] });
    await createCustomDomain(ns, 'fixed', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'fixed', 'DNSVerified', 'False', 'ConflictingRecord');
    await dns.post('/clear-a', { host: hostname });
    await dns.setCname(hostname, target);
    await waitForCondition(ns, 'fixed', 'Ready', 'True', undefined, 90_000);
  });
});

describe('removal', () => {
  const ns = unique('remove');
  const hostname = `shop.${ns}.example`;
  const hold = 'e2e.portico.dev/hold';

  beforeAll(async () => {
    await createProject(ns);
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'shop', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'shop', 'Ready', 'True');
  });

  it('removes the Ingress and the Secret before the object disappears', async () => {
    const { custom, core, networking } = kube();
    const ref = {
      ...customDomainApi,
      namespace: ns,
      name: 'shop',
    };
    // A finalizer of the test's own keeps the object visible after Portico's finalizer is done, so
    // the order is observed, not inferred from timing.
    const cd = await getCustomDomain(ns, 'shop');
    expect(cd.metadata.finalizers).toContain('portico.dev/finalizer');
    await custom.replaceNamespacedCustomObject({
      ...ref,
      body: { ...cd, metadata: { ...cd.metadata, finalizers: [...(cd.metadata.finalizers ?? []), hold] } },
    });
    await custom.deleteNamespacedCustomObject(ref);
    const held = await waitFor('Portico to release its finalizer', async () => {
      const current = await getCustomDomain(ns, 'shop');
      return current.metadata.finalizers?.includes('portico.dev/finalizer') ? undefined : current;
    });
    expect(held.metadata.deletionTimestamp).toBeDefined();
    await expect(
      networking.readNamespacedIngress({ namespace: ns, name: 'portico-shop' }),
    ).rejects.toMatchObject({ code: 404 });
    await expect(core.readNamespacedSecret({ namespace: ns, name: 'shop-tls' })).rejects.toMatchObject({
      code: 404,
    });

    await custom.replaceNamespacedCustomObject({
      ...ref,
      body: { ...held, metadata: { ...held.metadata, finalizers: [] } },
    });
    await waitFor('the CustomDomain to disappear', async () => {
      try {
        await getCustomDomain(ns, 'shop');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
  });
});

describe('removal of many Live domains at once', () => {
  const ns = unique('bulk-rm');
  const names = Array.from({ length: 20 }, (_, i) => `d${i}`);
  const controllerLog = path.join(sandbox.sandboxDir, 'logs', 'portico-controller.log');

  beforeAll(async () => {
    await createProject(ns);
    for (const name of names) await dns.setCname(`${name}.${ns}.example`, target);
    await Promise.all(
      names.map((name) =>
        createCustomDomain(ns, name, {
          hostname: `${name}.${ns}.example`,
          service: { name: 'web', port: 80 },
        }),
      ),
    );
    for (const name of names) await waitForCondition(ns, name, 'Ready', 'True', 'Live', 120_000);
  }, 180_000);

  it('logs no error and records one Removed Event per domain (a key queued twice while its removal ran is no failure)', async () => {
    const from = (await stat(controllerLog)).size;
    await Promise.all(
      names.map((name) =>
        kube().custom.deleteNamespacedCustomObject({ ...customDomainApi, namespace: ns, name }),
      ),
    );
    for (const name of names)
      await waitFor(`${ns}/${name} to disappear`, async () => {
        try {
          await getCustomDomain(ns, name);
          return undefined;
        } catch (err) {
          return (err as { code?: number }).code === 404 ? true : undefined;
        }
      });
    // A failed reconcile is logged when it fails; give a queued second reconcile time to run.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const lines = (await readFile(controllerLog, 'utf8'))
      .slice(from)
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level?: number; namespace?: string; msg?: string });
    const errors = lines.filter((l) => (l.level ?? 0) >= 50 && JSON.stringify(l).includes(ns));
    expect(errors.map((l) => l.msg)).toEqual([]);
    expect(lines.filter((l) => l.namespace === ns && l.msg === 'removed')).toHaveLength(names.length);
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    const removed = events.items.filter((e) => e.reason === 'Removed');
    expect(removed.map((e) => e.involvedObject.name).sort()).toEqual([...names].sort());
    for (const e of removed) expect(e.count ?? 1).toBe(1);
  });
});

describe('resolver failures and removal before verification', () => {
  it('tells a SERVFAIL from a missing record', async () => {
    const ns = unique('servfail');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.post('/set-servfail', { host: hostname });
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'DNSServerFailure');
    expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message).toContain('SERVFAIL');
    // Resolver failures are retried sooner than a missing record (15 s).
    const next =
      Date.parse(cd.status?.observed?.nextCheckAt ?? '') - Date.parse(cd.status?.observed?.checkedAt ?? '');
    expect(next).toBe(15_000);
  });

  it('removes a domain still awaiting DNS at once, leaving nothing behind', async () => {
    const ns = unique('early-remove');
    await createProject(ns);
    await createCustomDomain(ns, 'www', { hostname: `www.${ns}.example`, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'RecordNotFound');
    const ref = {
      ...customDomainApi,
      namespace: ns,
      name: 'www',
    };
    await kube().custom.deleteNamespacedCustomObject(ref);
    await waitFor('the CustomDomain to disappear', async () => {
      try {
        await getCustomDomain(ns, 'www');
        return undefined;
      } catch (err) {
        return (err as { code?: number }).code === 404 ? true : undefined;
      }
    });
    const ingresses = await kube().networking.listNamespacedIngress({ namespace: ns });
    const secrets = await kube().core.listNamespacedSecret({ namespace: ns });
    expect(ingresses.items).toEqual([]);
    expect(secrets.items.filter((s) => s.type === 'kubernetes.io/tls')).toEqual([]);
  });
});
