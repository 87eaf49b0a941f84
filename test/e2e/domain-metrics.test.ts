/**
 * The per-domain metrics on the operator's real `/metrics` (#12, docs/monitoring.md): the Ready
 * status gauge, the certificate's expiry and renewal timestamps and the fleet count, all read from
 * the CustomDomain cache at the scrape; and the verified-to-Live histogram, observed once per
 * transition of Ready to True. Real stack: kube-apiserver + etcd, Pebble, challtestsrv, the operator
 * from dist/.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import {
  createCustomDomain,
  createProject,
  deleteCustomDomain,
  dns,
  getCustomDomain,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { scrape, type Sample } from './support/metrics.js';

const HISTOGRAM = 'portico_customdomain_verified_to_live_seconds';

function find(samples: readonly Sample[], name: string, labels: Record<string, string>): Sample | undefined {
  return samples.find(
    (s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value),
  );
}

/** The histogram's count and sum now. */
async function verifiedToLive(): Promise<{ count: number; sum: number }> {
  const samples = await scrape(sandbox.controllerMetricsUrl);
  return {
    count: find(samples, `${HISTOGRAM}_count`, {})?.value ?? Number.NaN,
    sum: find(samples, `${HISTOGRAM}_sum`, {})?.value ?? Number.NaN,
  };
}

function transitionSeconds(cd: CustomDomain, type: string): number {
  return Date.parse(cd.status?.conditions?.find((c) => c.type === type)?.lastTransitionTime ?? '') / 1000;
}

describe('per-domain metrics after a domain goes Live, and one whose DNS is wrong', () => {
  const ns = unique('dmetrics');
  const live = `www.${ns}.example`;
  const wrong = `shop.${ns}.example`;
  let before: { count: number; sum: number };

  beforeAll(async () => {
    before = await verifiedToLive();
    await createProject(ns);
    await dns.setCname(live, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname: live, service: { name: 'web', port: 80 } });
    await createCustomDomain(ns, 'shop', { hostname: wrong, service: { name: 'web', port: 80 } });
  });

  it('reports Ready True, the expiry and renewal times of the Live domain, and Ready False of the other', async () => {
    const cd = await waitForCondition(ns, 'www', 'Ready', 'True');
    await waitForCondition(ns, 'shop', 'DNSVerified', 'False', 'RecordNotFound');
    // The scrape reads the operator's cache, which the status write reaches through the watch.
    const samples = await waitFor('the Live domain Ready on /metrics', async () => {
      const s = await scrape(sandbox.controllerMetricsUrl);
      const ready = find(s, 'portico_customdomain_ready_status', { hostname: live, condition: 'True' });
      return ready?.value === 1 ? s : undefined;
    });
    const www = { namespace: ns, name: 'www', hostname: live };
    const shop = { namespace: ns, name: 'shop', hostname: wrong };
    const ready = (labels: Record<string, string>, condition: string): number | undefined =>
      find(samples, 'portico_customdomain_ready_status', { ...labels, condition })?.value;
    expect([ready(www, 'True'), ready(www, 'False'), ready(www, 'Unknown')]).toEqual([1, 0, 0]);
    expect([ready(shop, 'True'), ready(shop, 'False'), ready(shop, 'Unknown')]).toEqual([0, 1, 0]);

    // Verified: the DNSVerified condition's transition time, while it is True.
    expect(find(samples, 'portico_customdomain_verified_timestamp_seconds', www)?.value).toBe(
      transitionSeconds(cd, 'DNSVerified'),
    );
    expect(find(samples, 'portico_customdomain_verified_timestamp_seconds', shop)).toBeUndefined();
    const certificate = cd.status?.certificate;
    expect(find(samples, 'portico_certificate_expiration_timestamp_seconds', www)?.value).toBe(
      Date.parse(certificate?.notAfter ?? '') / 1000,
    );
    expect(find(samples, 'portico_certificate_renewal_timestamp_seconds', www)?.value).toBe(
      Date.parse(certificate?.renewalTime ?? '') / 1000,
    );
    expect(find(samples, 'portico_certificate_expiration_timestamp_seconds', shop)).toBeUndefined();
    expect(find(samples, 'portico_certificate_renewal_timestamp_seconds', shop)).toBeUndefined();
    expect(
      find(samples, 'portico_customdomains', { phase: 'Live', reason: 'Live' })?.value,
    ).toBeGreaterThanOrEqual(1);
  });

  it('observes the time from verified to Live once, and not again on later status writes', async () => {
    const cd = await getCustomDomain(ns, 'www');
    const expected = transitionSeconds(cd, 'Ready') - transitionSeconds(cd, 'DNSVerified');
    const after = await verifiedToLive();
    expect(after.count - before.count).toBe(1);
    expect(after.sum - before.sum).toBeCloseTo(expected, 6);

    // A re-verify makes the operator check DNS and write status again; Ready stays True.
    const requestedAt = new Date().toISOString();
    await requestVerify(ns, 'www', requestedAt);
    await waitFor('the re-verify written to status', async () => {
      const now = await getCustomDomain(ns, 'www');
      return now.status?.lastVerifyRequest === requestedAt ? now : undefined;
    });
    const again = await waitForCondition(ns, 'www', 'Ready', 'True');
    expect(transitionSeconds(again, 'Ready')).toBe(transitionSeconds(cd, 'Ready'));
    // Time for the status write's watch event to reach the operator.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await verifiedToLive()).count - before.count).toBe(1);
  });

  it('drops the series of a deleted domain', async () => {
    await deleteCustomDomain(ns, 'shop');
    await waitFor('the deleted domain gone from /metrics', async () => {
      const s = await scrape(sandbox.controllerMetricsUrl);
      return s.some((x) => x.labels['hostname'] === wrong) ? undefined : true;
    });
    const samples = await scrape(sandbox.controllerMetricsUrl);
    expect(
      find(samples, 'portico_customdomain_ready_status', { hostname: live, condition: 'True' })?.value,
    ).toBe(1);
  });
});
