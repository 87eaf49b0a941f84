/**
 * A Project's auto-generated subdomain through a real Traefik (docs/customdomains.md, "The
 * auto-generated subdomain"; docs/routing.md, "Traefik"): this file's operator runs with the
 * `traefik` flavor and `--apps-domain apps.portico.test` (Knot for the apps zone, a second Pebble
 * validating DNS-01 through BIND in front of it: support/apps-domain.ts), Traefik takes the
 * subdomain's Ingress, and every assertion on traffic is what an HTTPS client sees on Traefik's
 * `websecure` entrypoint, the hostname as SNI and Host, trusting only that Pebble's root. The
 * project's Service is backed by a real HTTP server of this file. Nothing is mocked and no status is
 * written by the test.
 *
 * - The wildcard certificate reaches Traefik through its TLSStore `default` in the operator's
 *   namespace (no copy of the key in the project's namespace): the handshake for the subdomain
 *   presents the certificate whose serial is in the Secret, and the subdomain answers 200 with the
 *   project's page.
 * - Replace: once the primary is Live, the subdomain answers 301 to the primary, path and query kept.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPS_DOMAIN_SECRET } from '../../src/controller/main.js';
import {
  traefikOperatorFlags,
  TRAEFIK_INGRESS_CLASS,
  type StartedTraefik,
} from '../../src/data-planes/traefik/sandbox-process.js';
import { subdomainRouteName } from '../../src/routing/subdomain-route.js';
import { closeServer, startProjectBackend } from '../../src/sandbox/project-backend.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createProjectObject,
  leafOf,
  projectApi,
  readAppsSecret,
  startAppsDomainOperator,
  stopAppsDomainOperator,
  waitForSubdomain,
  wildcardCopies,
  type AppsDomainStack,
} from './support/apps-domain.js';
import { dns, getPebble, kube, sandbox, unique, waitFor } from './support/cluster.js';
import {
  createProjectWithBackend,
  httpsGet,
  startStackTraefik,
  stopStackTraefik,
  tlsHandshake,
} from './support/traefik.js';

const APPS_DOMAIN = 'apps.portico.test';
const ns = unique('trsub');
const hostname = `${ns}.${APPS_DOMAIN}`;
const primary = `www.${ns}.example`;
const tlsStoreApi = { group: 'traefik.io', version: 'v1alpha1', plural: 'tlsstores' } as const;

let started: AppsDomainStack | undefined;
let traefik: StartedTraefik | undefined;
let backend: Server | undefined;
let root = '';

function https(): string {
  if (!traefik) throw new Error('Traefik did not start');
  return traefik.httpsAddr;
}

/** The serial as hex, uppercase, without leading zeros (node writes it either way). */
function serialOf(hex: string): string {
  return hex.toUpperCase().replace(/^0+/, '');
}

/** The wildcard's serial, once the Secret holds it. */
async function wildcardSerial(): Promise<string> {
  const secret = await waitFor('the wildcard Secret', readAppsSecret, 150_000, 1000);
  return serialOf(leafOf(secret).serialNumber);
}

beforeAll(async () => {
  const page = await startProjectBackend(ns);
  backend = page.server;
  traefik = await startStackTraefik();
  started = await startAppsDomainOperator('traefik-project-subdomain', APPS_DOMAIN, {
    pebbleName: 'pebble-trsub',
    // A week: Pebble's ARI window (two thirds in, ± a day) is days away, so the wildcard the tests
    // find served is not renewed under them.
    certificateSeconds: 7 * 86_400,
    // No serving check: it would judge the primary's certificate against the stack's Pebble, not this one.
    flags: traefikOperatorFlags(TRAEFIK_INGRESS_CLASS),
  });
  root = await getPebble(`${started.pebble.managementUrl}/roots/0`);
  await createProjectWithBackend(ns, page.port, 'pro');
  await dns.setCname(primary, sandbox.platformCnameTarget);
  await createProjectObject(ns, { service: { name: 'web', port: 80 }, domains: { primary } });
}, 180_000);

afterAll(async () => {
  await stopAppsDomainOperator(
    started,
    async () => {
      await kube()
        .custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'site' })
        .catch(() => undefined);
      // The operator sweeps the subdomain's Ingress and the primary's CustomDomain (no garbage collector here).
      await waitFor(
        `${ns}'s subdomain Ingress to be gone`,
        async () => {
          const ingresses = await kube().networking.listNamespacedIngress({ namespace: ns });
          return ingresses.items.length === 0 ? true : undefined;
        },
        60_000,
      );
    },
    () =>
      kube()
        .custom.deleteNamespacedCustomObject({
          ...tlsStoreApi,
          namespace: OPERATOR_NAMESPACE,
          name: 'default',
        })
        .catch(() => undefined),
    () => stopStackTraefik(),
    async () => {
      if (backend) await closeServer(backend);
    },
  );
}, 240_000);

describe("a project's auto-generated subdomain through Traefik", () => {
  it(
    "presents the wildcard certificate (the serial in the Secret) by SNI and answers 200 with the project's page",
    { timeout: 240_000 },
    async () => {
      const serving = await waitForSubdomain(ns, { serving: 'True', answer: 'Content' }, 180_000);
      expect(serving.status?.subdomain?.message).toContain(
        `Ingress ${subdomainRouteName(serving)} (Traefik)`,
      );
      const serial = await wildcardSerial();
      // Traefik acknowledges the Ingress before it has loaded the TLSStore's certificate: wait for it.
      const handshake = await waitFor(
        `Traefik to present the wildcard for ${hostname}`,
        async () => {
          const h = await tlsHandshake(https(), hostname, root);
          return serialOf(h.certificate.serialNumber) === serial ? h : undefined;
        },
        60_000,
        200,
      );
      expect(handshake.authorized).toBe(true);
      expect(handshake.certificate.subjectaltname).toBe(`DNS:*.${APPS_DOMAIN}`);
      // Traefik's Ingress provider publishes the Ingress's address (the status read as Serving)
      // and loads its router apart: until the router is in, Traefik itself answers 404.
      const answer = await waitFor(
        `Traefik to route ${hostname}`,
        async () => {
          const a = await httpsGet(https(), hostname, '/catalog/shoes?size=42', root);
          return a.status === 404 ? undefined : a;
        },
        30_000,
        200,
      );
      expect(answer.status).toBe(200);
      expect(answer.headers['x-portico-project']).toBe(ns);
      expect(answer.body).toContain(`answered ${hostname} /catalog/shoes?size=42`);
    },
  );

  it('keeps the key in the operator namespace: the TLSStore there names the Secret, the project namespace has no copy', async () => {
    const store = (await kube().custom.getNamespacedCustomObject({
      ...tlsStoreApi,
      namespace: OPERATOR_NAMESPACE,
      name: 'default',
    })) as KubernetesObject & { spec: { certificates: { secretName: string }[] } };
    expect(store.spec.certificates).toEqual([{ secretName: APPS_DOMAIN_SECRET }]);
    const ingress = await kube().networking.readNamespacedIngress({
      namespace: ns,
      name: `portico-subdomain-site`,
    });
    expect(ingress.spec?.tls).toEqual([{ hosts: [hostname] }]);
    expect(ingress.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Project', name: 'site' });
    // The project's namespace holds its primary's own certificate once that is issued, never the
    // wildcard's.
    const secrets = await kube().core.listNamespacedSecret({ namespace: ns });
    expect(wildcardCopies(secrets.items, APPS_DOMAIN)).toEqual([]);
  });

  it(
    'Replace: once the primary is Live, a 301 to the primary with path and query kept, over the wildcard',
    { timeout: 240_000 },
    async () => {
      await kube().custom.patchNamespacedCustomObject(
        {
          ...projectApi,
          namespace: ns,
          name: 'site',
          body: { spec: { domains: { generatedSubdomain: 'Replace' } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const redirecting = await waitForSubdomain(ns, { answer: 'Redirect', serving: 'True' }, 200_000);
      expect(redirecting.status?.subdomain?.redirectTo).toBe(primary);
      const serial = await wildcardSerial();
      const answer = await waitFor(
        `Traefik to redirect ${hostname}`,
        async () => {
          const a = await httpsGet(https(), hostname, '/old/page?id=7&ref=mail', root);
          return a.status === 301 ? a : undefined;
        },
        60_000,
        200,
      );
      expect(answer.headers.location).toBe(`https://${primary}/old/page?id=7&ref=mail`);
      expect(serialOf((await tlsHandshake(https(), hostname, root)).certificate.serialNumber)).toBe(serial);
      // The primary itself serves the page.
      const page = await waitFor(
        `Traefik to serve ${primary} with its certificate`,
        () => httpsGet(https(), primary, '/old/page?id=7&ref=mail', root).catch(() => undefined),
        60_000,
        200,
      );
      expect(page.status).toBe(200);
      // The page escapes the query's '&' (as &#38;).
      expect(page.body).toContain(`answered ${primary} /old/page?id=7&#38;ref=mail`);
    },
  );
});
