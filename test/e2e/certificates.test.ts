/**
 * Certificates on the real stack: CAA diagnosed before any order (RFC 8659), and re-verify (the
 * spec's Verify / Re-verify button, the `portico.dev/verify-requested-at` annotation) starting a
 * fresh attempt once the cause is fixed; a Secret edited by hand into an unusable state reported
 * and replaced at once.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createPrivateKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { lastGoodSecretName } from '../../src/controllers/customdomain/last-good-certificates.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createCustomDomain,
  domainEvents,
  createProject,
  dns,
  failedAcmeOrders,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  requestVerify,
} from './support/cluster.js';

const target = sandbox.platformCnameTarget;

describe('CAA that excludes the CA', () => {
  const ns = unique('caa');
  const zone = `${ns}.example`;
  const hostname = `www.${zone}`;

  beforeAll(async () => {
    await createProject(ns);
    await dns.setCname(hostname, target);
    await dns.post('/add-caa', { host: zone, policies: [{ tag: 'issue', value: 'digicert.com' }] });
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
  });

  it('blocks the order and names the record found and the record to add', async () => {
    const cd = await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance');
    const message = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
    expect(message).toContain(`CAA ${zone} 0 issue "digicert.com"`);
    expect(message).toContain(`add CAA ${zone} 0 issue "pebble.letsencrypt.org"`);
    expect(message).toMatch(/Next attempt at \d{4}-/);
    expect(cd.status?.phase).toBe('Failed');
    expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.status).toBe('True');
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    expect(events.items.some((e) => e.reason === 'CAAForbidsIssuance' && e.type === 'Warning')).toBe(true);
  });

  it('records a re-verify while CAA still excludes the CA, and tries it once, not over and over', async () => {
    const failedBefore = await failedAcmeOrders();
    const requestedAt = new Date().toISOString();
    await requestVerify(ns, 'www', requestedAt);
    // The reconcile that answers the request records it together with the new attempt (Issuing);
    // the attempt fails on CAA at once and the next status says so.
    await waitFor(
      'the verify request recorded and its attempt failed on CAA again',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const reason = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.reason;
        return cd.status?.lastVerifyRequest === requestedAt && reason === 'CAAForbidsIssuance'
          ? cd
          : undefined;
      },
      30_000,
    );
    // Longer than the status hold of a reconcile that places an order (5 s): a request answered
    // only by a held-back write would be met again and tried again and again.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    expect((await failedAcmeOrders()) - failedBefore).toBe(1);
  });

  it('goes Live on re-verify once the CAA record admits the CA, without waiting for the backoff', async () => {
    await dns.post('/clear-caa', { host: zone });
    await dns.post('/add-caa', { host: zone, policies: [{ tag: 'issue', value: 'pebble.letsencrypt.org' }] });
    const before = await getCustomDomain(ns, 'www');
    const retryAt = /Next attempt at (\S+)\./.exec(
      before.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '',
    )?.[1];
    await requestVerify(ns, 'www');
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 30_000);
    expect(Date.now()).toBeLessThan(Date.parse(retryAt ?? ''));
    expect(live.status?.lastVerifyRequest).toBe(
      live.metadata.annotations?.['portico.dev/verify-requested-at'],
    );
  });
});

describe('verify on demand', () => {
  it('checks DNS at once when the annotation changes, instead of waiting for the schedule', async () => {
    const ns = unique('verify');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const waiting = await waitForCondition(ns, 'www', 'DNSVerified', 'False', 'RecordNotFound');
    const checkedAt = waiting.status?.observed?.checkedAt ?? '';
    await dns.setCname(hostname, target);
    await requestVerify(ns, 'www');
    const verified = await waitForCondition(ns, 'www', 'DNSVerified', 'True', undefined, 10_000);
    expect(Date.parse(verified.status?.observed?.checkedAt ?? '')).toBeGreaterThan(Date.parse(checkedAt));
    await waitForCondition(ns, 'www', 'Ready', 'True');
  });
});

describe('a certificate Secret edited by hand (docs/customdomains.md, Reissuing and "The last good certificate")', () => {
  /** A Live domain in a namespace of its own; its serial and uid. */
  async function liveDomain(
    prefix: string,
  ): Promise<{ ns: string; hostname: string; serial: string; uid: string }> {
    const ns = unique(prefix);
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
    return {
      ns,
      hostname,
      serial: live.status?.certificate?.serialNumber ?? '',
      uid: live.metadata.uid ?? '',
    };
  }

  /** Replaces tls.key with an unrelated key: the Ingress could no longer serve TLS. Returns when. */
  async function replaceKey(ns: string): Promise<number> {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const unrelated = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const editedAt = Date.now();
    await kube().core.patchNamespacedSecret(
      {
        namespace: ns,
        name: 'www-tls',
        body: { data: { 'tls.key': Buffer.from(unrelated).toString('base64') } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    return editedAt;
  }

  /** The domain's Warning Event with `reason`, once recorded. */
  function warningEvent(ns: string, reason: string): Promise<CoreV1Event> {
    return waitFor(
      `a Warning Event with reason ${reason}`,
      async () => (await domainEvents(ns, 'www')).find((e) => e.reason === reason && e.type === 'Warning'),
      30_000,
    );
  }

  /** The Secret's certificate and key match and name `hostname`; returns the certificate's serial. */
  async function servableSerial(ns: string, hostname: string): Promise<string> {
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const certificate = new X509Certificate(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64'));
    const key = createPrivateKey(Buffer.from(secret.data?.['tls.key'] ?? '', 'base64'));
    expect(certificate.checkPrivateKey(key)).toBe(true);
    expect(certificate.checkHost(hostname)).toBe(hostname);
    return certificate.serialNumber;
  }

  it('is given the last good certificate back at once when its key is not the certificate key (no new order)', async () => {
    const { ns, hostname, serial } = await liveDomain('tampered');
    const editedAt = await replaceKey(ns);
    const restored = await warningEvent(ns, 'CertificateRestored');
    expect(restored.message).toContain(
      "Secret www-tls holds a tls.key that is not the certificate's private key: restored the last good certificate (serial ",
    );
    expect(restored.message).toContain(`in Secret ${OPERATOR_NAMESPACE}/portico-last-good-`);
    expect(new Date(restored.firstTimestamp ?? 0).getTime()).toBeLessThan(editedAt + 10_000);
    await waitFor(
      'the Secret to hold the last good certificate and its key again',
      async () => ((await servableSerial(ns, hostname).catch(() => '')) !== '' ? true : undefined),
      30_000,
    );
    expect((await servableSerial(ns, hostname)).toUpperCase().replace(/^0+/, '')).toBe(
      serial.toUpperCase().replace(/^0+/, ''),
    );
    const again = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
    expect(again.status?.certificate?.serialNumber).toBe(serial);
  });

  it('is reported and replaced by a new order when there is no last good copy (deleted by an admin)', async () => {
    const { ns, hostname, serial, uid } = await liveDomain('tampered-nocopy');
    await kube().core.deleteNamespacedSecret({
      namespace: OPERATOR_NAMESPACE,
      name: lastGoodSecretName(uid),
    });
    const editedAt = await replaceKey(ns);
    // Pebble re-issues in well under a second, faster than a poll of the status can see the
    // Reissuing state; the Warning Event it recorded stays.
    const warning = await warningEvent(ns, 'Reissuing');
    expect(warning.message).toContain(
      "CertificateReady: Secret www-tls holds a tls.key that is not the certificate's private key, so it cannot serve",
    );
    // Reported within seconds of the edit, not at the next resync.
    expect(new Date(warning.firstTimestamp ?? 0).getTime()).toBeLessThan(editedAt + 10_000);

    // A new certificate whose key matches is stored, and the domain is Live again.
    const again = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
    expect(again.status?.certificate?.serialNumber).not.toBe(serial);
    await servableSerial(ns, hostname);
  });
});
