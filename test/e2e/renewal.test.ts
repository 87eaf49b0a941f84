/**
 * Renewal driven by the CA's ARI window (RFC 9773) on the real stack: Pebble's management API moves
 * the suggested window into the past; Portico, asked to re-check, orders a new certificate with
 * `replaces` naming the old one and swaps it into the same Secret, which serves throughout.
 */
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  failedAcmeOrders,
  getCustomDomain,
  kube,
  renewalWindowInThePast,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';

describe('ARI-driven renewal', () => {
  const ns = unique('renew');
  const hostname = `www.${ns}.example`;

  beforeAll(async () => {
    await createProject(ns);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Ready', 'True');
  });

  it('renews into the same Secret with replaces, without a moment of no valid certificate', async () => {
    const { core } = kube();
    const before = await getCustomDomain(ns, 'www');
    const old = before.status?.certificate;
    expect(old?.ari?.certId).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(Date.parse(old?.renewalTime ?? '')).toBeGreaterThanOrEqual(
      Date.parse(old?.ari?.windowStart ?? ''),
    );
    expect(Date.parse(old?.renewalTime ?? '')).toBeLessThanOrEqual(Date.parse(old?.ari?.windowEnd ?? ''));

    const secret = await core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const oldPem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');

    // Watch the Secret while the renewal runs: every read must hold a certificate valid for the host.
    let watching = true;
    const gaps: string[] = [];
    const serials = new Set<string>();
    const watcher = (async () => {
      while (watching) {
        const s = await core.readNamespacedSecret({ namespace: ns, name: 'www-tls' }).catch(() => undefined);
        const pem = Buffer.from(s?.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
        try {
          const cert = new X509Certificate(pem);
          if (cert.checkHost(hostname) === undefined || new Date(cert.validToDate) < new Date())
            gaps.push('invalid');
          serials.add(cert.serialNumber);
        } catch {
          gaps.push(s ? 'unparsable' : 'missing');
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    })();

    await renewalWindowInThePast(oldPem);
    await requestVerify(ns, 'www', 'renew-now');

    const renewed = await waitFor('a new certificate in status', async () => {
      const cd = await getCustomDomain(ns, 'www');
      const c = cd.status?.certificate;
      return c && c.serialNumber !== old?.serialNumber ? cd : undefined;
    });
    watching = false;
    await watcher;

    expect(renewed.status?.certificate?.replaces).toBe(old?.ari?.certId);
    expect(renewed.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    const after = await core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    expect(after.metadata?.uid).toBe(secret.metadata?.uid);
    expect(after.metadata?.annotations?.['portico.dev/replaces']).toBe(old?.ari?.certId);
    const leaf = new X509Certificate(Buffer.from(after.data?.['tls.crt'] ?? '', 'base64').toString('utf8'));
    expect(leaf.serialNumber).toBe(renewed.status?.certificate?.serialNumber);
    expect(gaps).toEqual([]);
    expect(serials.size).toBe(2);
  });

  it('retries a failed renewal on the backoff, not at once, and keeps serving', async () => {
    // A CAA record excluding the CA makes every renewal attempt fail before it reaches the CA.
    await dns.post('/add-caa', {
      host: `${ns}.example`,
      policies: [{ tag: 'issue', value: 'digicert.com' }],
    });
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const servingPem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    await renewalWindowInThePast(servingPem);
    const failedBefore = await failedAcmeOrders();
    await requestVerify(ns, 'www', 'renew-again');
    let lastSeen = '';
    await waitFor('the renewal attempt to fail', async () => {
      const now = await getCustomDomain(ns, 'www');
      const ready = now.status?.conditions?.find((c) => c.type === 'CertificateReady');
      lastSeen = `CertificateReady ${ready?.status} ${ready?.reason}: ${ready?.message}; failed orders ${await failedAcmeOrders()} (before: ${failedBefore})`;
      return ready?.reason === 'RenewalFailed' && (await failedAcmeOrders()) > failedBefore
        ? true
        : undefined;
    }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; last seen: ${lastSeen}`);
    });
    // The next attempt is a minute away (the published backoff): none in the next 8 s.
    const failedAfterFirst = await failedAcmeOrders();
    await new Promise((r) => setTimeout(r, 8_000));
    expect((await failedAcmeOrders()) - failedAfterFirst).toBe(0);
    const cd = await getCustomDomain(ns, 'www');
    const servingSerial = new X509Certificate(servingPem).serialNumber;
    expect(cd.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(cd.status?.phase).toBe('Live');
    expect(cd.status?.certificate?.serialNumber).toBe(servingSerial);
    // The failed renewal shows: the certificate still serves, why the renewal failed, and when next.
    const certificateReady = cd.status?.conditions?.find((c) => c.type === 'CertificateReady');
    expect(certificateReady).toMatchObject({ status: 'True', reason: 'RenewalFailed' });
    expect(certificateReady?.message).toContain(`Certificate ${servingSerial} from`);
    expect(certificateReady?.message).toContain('still serves, but its renewal failed (CAAForbidsIssuance)');
    expect(certificateReady?.message).toContain(`CAA ${ns}.example 0 issue "digicert.com"`);
    expect(certificateReady?.message).toMatch(/Next attempt at \d{4}-\d\d-\d\dT/);
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.some(
        (e) => e.reason === 'RenewalFailed' && e.type === 'Warning' && e.message?.includes('CAA'),
      ),
    ).toBe(true);

    // Fixed, then re-verified: a fresh renewal at once, and the condition is back to Issued.
    await dns.post('/clear-caa', { host: `${ns}.example` });
    await requestVerify(ns, 'www', 'renew-after-fix');
    const renewed = await waitFor('the renewal to succeed', async () => {
      const now = await getCustomDomain(ns, 'www');
      const ready = now.status?.conditions?.find((c) => c.type === 'CertificateReady');
      return ready?.reason === 'Issued' && now.status?.certificate?.serialNumber !== servingSerial
        ? now
        : undefined;
    });
    expect(renewed.status?.phase).toBe('Live');
  });
});
