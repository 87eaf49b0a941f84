import type { KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { IssuanceTracker } from '../../../acme/issuance-tracker.js';
import type { IssuedByCertificate } from '../../../acme/issuer-set.js';
import type { CustomDomain } from '../../../api/customdomain.js';
import { createControllerMetrics } from '../../../observability/metrics.js';
import { testIssued, testRoot, type TestCertificate } from '../../../../test/support/test-ca.js';
import type { CustomDomainReconcilerDeps } from './deps.js';
import { Issuance, issuedCertificateProblem } from './issuance.js';
import type { OwnedObjects } from './objects.js';

const HOST = 'www.shop.example';
const domain = {
  apiVersion: 'portico.dev/v1alpha1',
  kind: 'CustomDomain',
  metadata: { namespace: 'shop', name: 'www', uid: 'u1' },
  spec: { hostname: HOST },
} as unknown as CustomDomain;
const log = pino({ level: 'silent' });

describe('an issued certificate is judged before it is written (docs/customdomains.md, "The last good certificate")', () => {
  let intermediate: TestCertificate;
  let otherIntermediate: TestCertificate;
  let sameNameOtherKey: TestCertificate;
  let good: TestCertificate;
  beforeAll(async () => {
    const root = await testRoot('Test Root');
    intermediate = await testIssued(root, ['Test Intermediate'], { ca: true });
    otherIntermediate = await testIssued(root, ['Test Intermediate'], { ca: true });
    sameNameOtherKey = await testIssued(root, ['Test Intermediate'], {
      ca: true,
      noSubjectKeyIdentifier: true,
    });
    good = await testIssued(intermediate, [HOST]);
  });

  const issued = (certPem: string, privateKeyPem: string) => ({ certificatePem: certPem, privateKeyPem });

  it('accepts a leaf for the hostname with its key and its issuer', () => {
    expect(
      issuedCertificateProblem(
        domain,
        issued(`${good.certPem}${intermediate.certPem}`, good.keyPem),
        new Date(),
      ),
    ).toBeUndefined();
  });

  it('says what is wrong, that nothing was stored and that the Secret keeps its certificate', async () => {
    const other = await testIssued(intermediate, ['shop.example']);
    const cases: [string, string, RegExp][] = [
      ['garbage', 'garbage', /has no tls\.crt and tls\.key that parse/],
      [good.certPem, other.keyPem, /holds a tls\.key that is not the certificate's private key/],
      [`${good.certPem}${otherIntermediate.certPem}`, good.keyPem, /holds a broken certificate chain/],
      // Same name, no key identifier to tell it apart: only the signature check finds it.
      [
        `${good.certPem}${sameNameOtherKey.certPem}`,
        good.keyPem,
        /holds a broken certificate chain: certificate 1 .* is not issued and signed by certificate 2/,
      ],
      [other.certPem, other.keyPem, /holds a certificate for shop\.example, not www\.shop\.example/],
    ];
    for (const [cert, key, what] of cases) {
      const problem = issuedCertificateProblem(domain, issued(cert, key), new Date());
      expect(problem).toMatch(what);
      expect(problem).toMatch(
        /^The certificate the CA issued was not stored, as Secret www-tls would then have been unable to serve: it .*\. The Secret keeps the certificate it holds\.$/,
      );
    }
    expect(
      issuedCertificateProblem(
        domain,
        issued(good.certPem, good.keyPem),
        new Date(Date.now() + 40 * 86_400_000),
      ),
    ).toMatch(/holds a certificate that expired at/);
  });

  // A CA that issues a certificate for another name is not something Pebble does: the issuer here is
  // a stand-in; the tracker, the judgment and the write path are the real ones.
  it('with a stand-in CA issuing for another name: writes neither the Secret nor the copy, and the attempt fails with reason IssuedCertificateUnusable', async () => {
    const other = await testIssued(intermediate, ['shop.example']);
    const written: KubernetesObject[] = [];
    const kept: unknown[] = [];
    const tracker = new IssuanceTracker(() => undefined);
    const deps = {
      issuer: {
        issue: (): Promise<IssuedByCertificate> =>
          Promise.resolve({
            certificatePem: `${other.certPem}${intermediate.certPem}`,
            privateKeyPem: other.keyPem,
            orderUrl: 'https://ca.test/order/1',
            acmeIssuer: 'test',
          } as IssuedByCertificate),
      },
      tracker,
      lastGood: { keep: (...args: unknown[]) => (kept.push(args), Promise.resolve()) },
      metrics: createControllerMetrics(),
      now: () => new Date(),
    } as unknown as CustomDomainReconcilerDeps;
    const objects = {
      readLive: () => Promise.resolve(domain),
      apply: (obj: KubernetesObject) => (written.push(obj), Promise.resolve()),
    } as unknown as OwnedObjects;
    new Issuance(deps, objects).start(domain, 'shop/www', log, { priorFailures: 0 });
    await expect.poll(() => tracker.lastOutcome('shop/www')?.state).toBe('failed');
    const outcome = tracker.lastOutcome('shop/www');
    expect(outcome?.state === 'failed' && outcome.reason).toBe('IssuedCertificateUnusable');
    expect(outcome?.state === 'failed' && outcome.message).toMatch(
      /holds a certificate for shop\.example, not www\.shop\.example/,
    );
    expect(written).toEqual([]);
    expect(kept).toEqual([]);
  });

  it('with a stand-in CA issuing a good certificate: keeps the copy first, then writes the Secret', async () => {
    const order: string[] = [];
    const tracker = new IssuanceTracker(() => undefined);
    const deps = {
      issuer: {
        issue: (): Promise<IssuedByCertificate> =>
          Promise.resolve({
            certificatePem: `${good.certPem}${intermediate.certPem}`,
            privateKeyPem: good.keyPem,
            orderUrl: 'https://ca.test/order/2',
            acmeIssuer: 'test',
          } as IssuedByCertificate),
      },
      tracker,
      lastGood: { keep: () => (order.push('copy'), Promise.resolve()) },
      metrics: createControllerMetrics(),
      now: () => new Date(),
    } as unknown as CustomDomainReconcilerDeps;
    const objects = {
      readLive: () => Promise.resolve(domain),
      apply: (obj: KubernetesObject) => (
        order.push(`${obj.kind ?? ''} ${obj.metadata?.name ?? ''}`),
        Promise.resolve()
      ),
    } as unknown as OwnedObjects;
    new Issuance(deps, objects).start(domain, 'shop/www', log, { priorFailures: 0 });
    await expect.poll(() => tracker.lastOutcome('shop/www')?.state).toBe('succeeded');
    expect(order).toEqual(['copy', 'Secret www-tls']);
  });
});
