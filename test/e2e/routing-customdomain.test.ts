/**
 * A redirect CustomDomain end to end on the real stack, with the operator's default routing (ingress
 * mode, ingress-nginx flavor, no challenge Service in the sandbox): it is verified, gets its own
 * certificate from Pebble, and its Ingress answers with the redirect; a status change updates the
 * annotation; turning it into a serving domain drops the redirect; deletion leaves no routing.
 */
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  deleteCustomDomain,
  customDomainApi,
} from './support/cluster.js';

async function patchSpec(namespace: string, name: string, spec: Record<string, unknown>): Promise<void> {
  // JSON merge patch (RFC 7386): null removes a field.
  await kube().custom.patchNamespacedCustomObject(
    { ...customDomainApi, namespace, name, body: { spec } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

describe('a redirect domain (ingress-nginx flavor)', () => {
  const ns = unique('redirect');
  const hostname = `old.${ns}.example`;
  const to = `www.${ns}.example`;

  beforeAll(async () => {
    await createProject(ns);
    // The redirect's target: a serving domain of the same project, Ready (docs/customdomains.md,
    // "Redirect targets").
    await dns.setCname(to, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname: to, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'old', { hostname, redirect: { to, statusCode: 308 } });
  }, 150_000);

  it('is Ready with its own certificate and an Ingress that redirects, keeping path and query', async () => {
    const cd = await waitForCondition(ns, 'old', 'Ready', 'True', undefined, 120_000);
    const routed = cd.status?.conditions?.find((c) => c.type === 'Routed');
    expect(routed?.message).toContain(`308 Permanent Redirect to https://${to}, keeping path and query`);

    const { core, networking } = kube();
    const secret = await core.readNamespacedSecret({ namespace: ns, name: 'old-tls' });
    const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    expect(new X509Certificate(pem).checkHost(hostname)).toBe(hostname);

    const ingress = await networking.readNamespacedIngress({ namespace: ns, name: 'portico-old' });
    expect(ingress.metadata?.annotations).toMatchObject({
      'nginx.ingress.kubernetes.io/permanent-redirect': `https://${to}$request_uri`,
      'nginx.ingress.kubernetes.io/permanent-redirect-code': '308',
    });
    expect(ingress.spec?.tls).toEqual([{ hosts: [hostname], secretName: 'old-tls' }]);
  });

  it('follows a status change', async () => {
    await patchSpec(ns, 'old', { redirect: { to, statusCode: 302 } });
    await waitFor('permanent-redirect-code 302', async () => {
      const ing = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-old' });
      return ing.metadata?.annotations?.['nginx.ingress.kubernetes.io/permanent-redirect-code'] === '302'
        ? ing
        : undefined;
    });
  });

  it('drops the redirect when the domain turns to serving', async () => {
    await patchSpec(ns, 'old', { redirect: null, service: { name: 'web', port: 80 } });
    const ing = await waitFor('a serving Ingress', async () => {
      const i = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-old' });
      return i.spec?.rules?.[0]?.http?.paths.at(-1)?.backend.service?.name === 'web' ? i : undefined;
    });
    expect(ing.metadata?.annotations ?? {}).not.toHaveProperty([
      'nginx.ingress.kubernetes.io/permanent-redirect',
    ]);
  });

  it('leaves no routing after deletion', async () => {
    await deleteCustomDomain(ns, 'old');
    await waitFor('the CustomDomain gone', async () => {
      try {
        await getCustomDomain(ns, 'old');
        return undefined;
      } catch {
        return true;
      }
    });
    const ingresses = await kube().networking.listNamespacedIngress({ namespace: ns });
    expect(ingresses.items.map((i) => i.metadata?.name)).toEqual(['portico-www']);
  });
});

describe('a serving domain naming a port its Service lacks (docs/customdomains.md, ServicePortNotFound)', () => {
  it('is not routed, says which ports the Service has, and is routed once the Service has the port', async () => {
    const ns = unique('port');
    const hostname = `www.${ns}.example`;
    await createProject(ns); // Service web: port http (80) only
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 'https' } });
    const cd = await waitForCondition(ns, 'www', 'Routed', 'False', 'ServicePortNotFound', 120_000);
    const routed = cd.status?.conditions?.find((c) => c.type === 'Routed');
    expect(routed?.message).toContain('Service web has no port named "https" (its ports are http (80))');
    expect(cd.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    expect(cd.status?.phase).not.toBe('Live');
    const ingresses = await kube().networking.listNamespacedIngress({ namespace: ns });
    expect(ingresses.items.map((i) => i.metadata?.name)).toEqual([]);
    // Once the certificate is issued, Ready's reason turns from the certificate's to the port's:
    // that is no second Warning, Routed's Event already named the cause.
    const issued = await waitForCondition(ns, 'www', 'CertificateReady', 'True', undefined, 120_000);
    expect(issued.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('ServicePortNotFound');
    const events = await kube().core.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.filter((e) => e.involvedObject.name === 'www' && e.reason === 'ServicePortNotFound'),
    ).toEqual([expect.objectContaining({ type: 'Warning' })]);

    // The Service gets the port: the Service watch queues the domain, which is routed.
    await kube().core.patchNamespacedService(
      {
        namespace: ns,
        name: 'web',
        body: {
          spec: {
            ports: [
              { name: 'http', port: 80 },
              { name: 'https', port: 443 },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 30_000);
    const ingress = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' });
    expect(ingress.spec?.rules?.[0]?.http?.paths.at(-1)?.backend.service).toEqual({
      name: 'web',
      port: { name: 'https' },
    });
  });
});
