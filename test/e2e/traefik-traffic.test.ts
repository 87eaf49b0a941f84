/**
 * Real HTTPS traffic through a real Traefik (docs/routing.md, "Traefik"): an operator of this file's
 * own runs with the `traefik` flavor and Traefik's IngressClass, Traefik takes its Ingresses and
 * Middlewares, and every assertion is what an HTTPS client sees on Traefik's `websecure` entrypoint,
 * with the hostname as SNI and Host and Pebble's issuing root as its only trust anchor. The project's
 * Service is backed by a real HTTP server of this file (its EndpointSlice points at it). Domains go
 * through the real DNS check (pebble-challtestsrv) and real issuance by Pebble; HTTP-01 is validated
 * on the operator's own port, as in the other files (traefik-lifecycle.test.ts validates through
 * Traefik). The operator's serving check requests each domain from Traefik, as the sandbox's does:
 * Ready names what it saw.
 */
import type { V1EndpointSlice, V1Ingress } from '@kubernetes/client-node';
import type { Project } from '../../src/api/project.js';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { StartedTraefik } from '../../src/data-planes/traefik/sandbox-process.js';
import {
  backendEndpointSlice,
  traefikOperatorFlags,
  TRAEFIK_INGRESS_CLASS,
} from '../../src/data-planes/traefik/sandbox-process.js';
import { closeServer, startProjectBackend } from '../../src/sandbox/project-backend.js';
import {
  createCustomDomain,
  deleteCreatedDomains,
  deleteCustomDomain,
  dns,
  domainCondition,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';
import {
  createProjectWithBackend,
  httpsGet,
  pebbleRoot,
  startStackTraefik,
  stopStackTraefik,
  tlsHandshake,
} from './support/traefik.js';

const ns = unique('traefik');
const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;
const primary = `www.${ns}.example`;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let traefik: StartedTraefik | undefined;
let backend: Server | undefined;
let root = '';
const created: { namespace: string; name: string }[] = [];

/** A CustomDomain `name` of the project, its CNAME set first (the real DNS check). */
async function domain(name: string, hostname: string, spec: object): Promise<void> {
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(ns, name, { hostname, ...spec });
  created.push({ namespace: ns, name });
}

function https(): string {
  if (!traefik) throw new Error('Traefik did not start');
  return traefik.httpsAddr;
}

/**
 * Waits until CustomDomain `name` is Ready, then until Traefik presents, by SNI, the certificate whose
 * serial its status holds and answers a GET of `hostname` with `status`. With the serving check on,
 * Ready waits for the check to see the issued certificate served and the route answer; the lag
 * between Ready and this client seeing the same is printed, not asserted.
 */
async function waitUntilServed(name: string, hostname: string, status: number): Promise<void> {
  const cd = await waitForCondition(ns, name, 'Ready', 'True', undefined, 180_000);
  const ready = Date.now();
  const serial = cd.status?.certificate?.serialNumber.toUpperCase();
  let last = '';
  await waitFor(
    `Traefik to present ${hostname}'s certificate ${serial ?? '(none in status)'} and answer ${status}`,
    async () => {
      const handshake = await tlsHandshake(https(), hostname, root);
      const presented = handshake.certificate.serialNumber.toUpperCase();
      if (presented !== serial) {
        last = `certificate CN=${String(handshake.certificate.subject.CN)} serial ${presented}`;
        return undefined;
      }
      const answer = await httpsGet(https(), hostname, '/', root);
      if (answer.status === status) return true;
      last = `the issued certificate, HTTP ${answer.status}`;
      return undefined;
    },
    60_000,
    50,
  );
  process.stdout.write(
    `traefik-traffic: ${hostname} answered ${status} with its certificate ${Date.now() - ready} ms after Ready was seen (before: ${last || 'nothing else'})\n`,
  );
}

beforeAll(async () => {
  const started = await startProjectBackend(ns);
  backend = started.server;
  traefik = await startStackTraefik();
  root = await pebbleRoot();
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  // The serving check requests each domain from Traefik's websecure entrypoint, as the sandbox's
  // operator does with `--data-plane traefik`.
  operator = await startOperator(
    stack,
    'traefik-traffic',
    traefikOperatorFlags(TRAEFIK_INGRESS_CLASS, traefik.httpsAddr),
  );
  await createProjectWithBackend(ns, started.port);
  await domain('www', primary, { service: { name: 'web', port: 80 } });
  await waitUntilServed('www', primary, 200);
});

afterAll(async () => {
  await runAll(
    () => deleteCreatedDomains(created, 'traefik-traffic'),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
    () => stopStackTraefik(),
    async () => {
      if (backend) await closeServer(backend);
    },
  );
});

describe('a serving domain through Traefik', () => {
  it('is acknowledged by Traefik: its Ingress is of the traefik class and Traefik published its address', async () => {
    const cd = await getCustomDomain(ns, 'www');
    expect(domainCondition(cd, 'Routed').message).toContain('Traefik took Ingress portico-www');
    const ingress = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' });
    expect(ingress.spec?.ingressClassName).toBe(TRAEFIK_INGRESS_CLASS);
    expect(ingress.status?.loadBalancer?.ingress).toEqual([{ ip: '127.0.0.1' }]);
  });

  it('presents, on the TLS handshake by SNI, the certificate whose serial is in the status, trusted by Pebble’s root', async () => {
    const cd = await getCustomDomain(ns, 'www');
    const serial = cd.status?.certificate?.serialNumber;
    expect(serial).toMatch(/^[0-9A-F]+$/i);
    const handshake = await tlsHandshake(https(), primary, root);
    expect(handshake.authorizationError).toBeUndefined();
    expect(handshake.authorized).toBe(true);
    expect(handshake.certificate.serialNumber.toUpperCase()).toBe(serial?.toUpperCase());
    expect(handshake.certificate.subjectaltname).toBe(`DNS:${primary}`);
  });

  it('is Ready on what the serving check saw: the serial the TLS handshake presents, at Traefik’s address, and the answer', async () => {
    const cd = await getCustomDomain(ns, 'www');
    const handshake = await tlsHandshake(https(), primary, root);
    const presented = handshake.certificate.serialNumber.toUpperCase().replace(/^0+/, '');
    const ready = domainCondition(cd, 'Ready');
    expect(ready).toMatchObject({ status: 'True', reason: 'Live' });
    expect(ready.message).toContain(`${primary}: served certificate ${presented} (valid until `);
    expect(ready.message).toContain(`) at ${https()}, checked `);
    expect(ready.message).toMatch(/, checked \d{4}-\d\d-\d\dT[\d:.]+Z \(re-checked every 10 minutes\): /);
    expect(ready.message?.endsWith(`: GET https://${primary}/ answered HTTP 200.`)).toBe(true);
    expect(ready.message).not.toContain('serves over HTTPS');
  });

  it("answers 200 with the project's page from the backend, path and query passed on", async () => {
    const answer = await httpsGet(https(), primary, '/catalog/shoes?size=42', root);
    expect(answer.status).toBe(200);
    expect(answer.headers['x-portico-project']).toBe(ns);
    expect(answer.body).toContain(`<h1>${ns}</h1>`);
    expect(answer.body).toContain(`answered ${primary} /catalog/shoes?size=42`);
  });
});

describe('redirect domains through Traefik', () => {
  /** `spec.redirect.statusCode` (undefined: the API's default, 301) → what Traefik sends to GET and to POST. */
  const cases = [
    { name: 'moved', statusCode: undefined, get: 301, post: 308 },
    { name: 'perm', statusCode: 308, get: 301, post: 308 },
    { name: 'found', statusCode: 302, get: 302, post: 307 },
    { name: 'temp', statusCode: 307, get: 302, post: 307 },
  ] as const;

  beforeAll(async () => {
    for (const c of cases) {
      await domain(c.name, `${c.name}.${ns}.example`, {
        service: { name: 'web', port: 80 },
        redirect: { to: primary, ...(c.statusCode === undefined ? {} : { statusCode: c.statusCode }) },
      });
    }
    for (const c of cases) await waitUntilServed(c.name, `${c.name}.${ns}.example`, c.get);
  }, 600_000);

  it('answers a GET with 301 by default, Location keeping path and query, over its own certificate', async () => {
    const hostname = `moved.${ns}.example`;
    const cd = await getCustomDomain(ns, 'moved');
    const handshake = await tlsHandshake(https(), hostname, root);
    expect(handshake.authorized).toBe(true);
    expect(handshake.certificate.serialNumber.toUpperCase()).toBe(
      cd.status?.certificate?.serialNumber.toUpperCase(),
    );
    const answer = await httpsGet(https(), hostname, '/old/page?id=7&ref=mail', root);
    expect(answer.status).toBe(301);
    expect(answer.headers.location).toBe(`https://${primary}/old/page?id=7&ref=mail`);
    // Ready names the 301 and the Location the serving check saw for `/`.
    const presented = handshake.certificate.serialNumber.toUpperCase().replace(/^0+/, '');
    const ready = domainCondition(cd, 'Ready').message ?? '';
    expect(ready).toContain(`${hostname}: served certificate ${presented} (valid until `);
    expect(ready).toContain(`) at ${https()}, checked `);
    expect(
      ready.endsWith(`: GET https://${hostname}/ answered HTTP 301, Location https://${primary}/.`),
    ).toBe(true);
  });

  it('sends the statuses of the documented mapping for each status the API accepts, to GET and to POST', async () => {
    const seen: string[] = [];
    for (const c of cases) {
      const hostname = `${c.name}.${ns}.example`;
      const get = await httpsGet(https(), hostname, '/a/b?c=d', root);
      const post = await httpsGet(https(), hostname, '/a/b?c=d', root, 'POST');
      seen.push(`${c.statusCode ?? 'default'}: GET ${get.status}, POST ${post.status}`);
      expect(get.headers.location, c.name).toBe(`https://${primary}/a/b?c=d`);
      expect(post.headers.location, c.name).toBe(`https://${primary}/a/b?c=d`);
      expect([get.status, post.status], c.name).toEqual([c.get, c.post]);
      const routed = domainCondition(await getCustomDomain(ns, c.name), 'Routed').message ?? '';
      expect(routed, c.name).toContain(`answers ${c.get} to GET and ${c.post} to other methods`);
    }
    process.stdout.write(`traefik-traffic: redirect statuses ${seen.join('; ')}\n`);
  });
});

describe("a Project's redirect and primary switch through Traefik (the CustomDomains its controller writes)", () => {
  const site = `site.${ns}.example`;
  const alias = `alias.${ns}.example`;

  beforeAll(async () => {
    for (const hostname of [site, alias]) await dns.setCname(hostname, sandbox.platformCnameTarget);
    await kube().custom.createNamespacedCustomObject({
      ...projectApi,
      namespace: ns,
      body: {
        apiVersion: 'portico.dev/v1alpha1',
        kind: 'Project',
        metadata: { name: 'site' },
        spec: {
          service: { name: 'web', port: 80 },
          domains: { primary: site, redirects: [{ from: alias }] },
        },
      },
    });
    for (const hostname of [site, alias]) created.push({ namespace: ns, name: hostname });
  }, 60_000);

  afterAll(async () => {
    // The Project first, so that its controller does not re-create what the clean-up deletes.
    await kube()
      .custom.deleteNamespacedCustomObject({ ...projectApi, namespace: ns, name: 'site' })
      .catch(() => undefined);
  });

  it("answers the redirect source with 301 to the primary, path and query kept: Traefik built the redirect's route, though its CustomDomain names no Service", async () => {
    await waitUntilServed(site, site, 200);
    await waitUntilServed(alias, alias, 301);
    expect((await getCustomDomain(ns, alias)).spec.service).toBeUndefined();
    const answer = await httpsGet(https(), alias, '/p/q?r=s', root);
    expect(answer.status).toBe(301);
    expect(answer.headers.location).toBe(`https://${site}/p/q?r=s`);
    const page = await httpsGet(https(), site, '/', root);
    expect(page.status).toBe(200);
  });

  it('switches the primary with every request answered: the new primary serves (200) before the former one redirects (301), no request failed or got 404', async () => {
    /** Each round's answers, in the order sent: `200`, `301` (to the other hostname, path and query kept) or what else came. */
    const rounds: { [hostname: string]: string }[] = [];
    const other = (hostname: string): string => (hostname === site ? alias : site);
    const ask = async (hostname: string, round: number): Promise<string> => {
      const target = `/switch/${round}?h=${hostname}`;
      try {
        const answer = await httpsGet(https(), hostname, target, root);
        if (answer.status === 200 && answer.headers['x-portico-project'] === ns) return '200';
        if (answer.status === 301 && answer.headers.location === `https://${other(hostname)}${target}`)
          return '301';
        return `HTTP ${answer.status} ${String(answer.headers.location ?? '')}`.trim();
      } catch (err) {
        return `failed: ${(err as Error).message}`;
      }
    };
    let polling = true;
    const poll = (async () => {
      for (let round = 0; polling; round++) {
        const started = Date.now();
        const [atSite, atAlias] = await Promise.all([ask(site, round), ask(alias, round)]);
        rounds.push({ [site]: atSite, [alias]: atAlias });
        await new Promise((r) => setTimeout(r, Math.max(0, started + 100 - Date.now())));
      }
    })();
    try {
      await waitFor('a first round of requests', () => (rounds.length > 0 ? true : undefined), 10_000);
      await kube().custom.patchNamespacedCustomObject({
        ...projectApi,
        namespace: ns,
        name: 'site',
        body: [
          { op: 'replace', path: '/spec/domains', value: { primary: alias, redirects: [{ from: site }] } },
        ],
      });
      await waitFor(
        `Project site Ready with ${alias} its serving primary`,
        async () => {
          const p = (await kube().custom.getNamespacedCustomObject({
            ...projectApi,
            namespace: ns,
            name: 'site',
          })) as Project;
          const ready = p.status?.conditions?.find((c) => c.type === 'Ready');
          return p.status?.observedGeneration === p.metadata.generation &&
            ready?.status === 'True' &&
            p.status?.servingPrimary === alias
            ? true
            : undefined;
        },
        120_000,
      );
      // What Traefik answers follows the Project's status: wait until both hostnames answer as switched.
      await waitFor(
        `${alias} to answer 200 and ${site} 301`,
        () => {
          const last = rounds.at(-1);
          return last?.[alias] === '200' && last[site] === '301' ? true : undefined;
        },
        30_000,
      );
    } finally {
      polling = false;
      await poll;
    }
    const answers = (hostname: string): string[] => rounds.map((r) => r[hostname] ?? '');
    const counts = (hostname: string): string =>
      [...new Set(answers(hostname))]
        .map((a) => `${a} x${answers(hostname).filter((b) => b === a).length}`)
        .join(', ');
    process.stdout.write(
      `traefik-traffic: primary switch, ${rounds.length} rounds of requests 100 ms apart: ${alias}: ${counts(alias)}; ${site}: ${counts(site)}\n`,
    );
    // Every request answered, none with a 404 or an error.
    for (const hostname of [site, alias])
      expect(
        answers(hostname).filter((a) => a !== '200' && a !== '301'),
        hostname,
      ).toEqual([]);
    // Each hostname went from one answer to the other once: the new primary 301 then 200, the former 200 then 301.
    const runs = (hostname: string): string[] => answers(hostname).filter((a, i, all) => a !== all[i - 1]);
    expect(runs(alias)).toEqual(['301', '200']);
    expect(runs(site)).toEqual(['200', '301']);
    // The new primary served before (or in the same round as) the former one first redirected.
    const firstServed = answers(alias).indexOf('200');
    const firstRedirected = answers(site).indexOf('301');
    expect(firstServed).toBeLessThanOrEqual(firstRedirected);
    // The switch waited for what the serving check saw: the new primary's Ready names the 200.
    const ready = domainCondition(await getCustomDomain(ns, alias), 'Ready');
    expect(ready).toMatchObject({ status: 'True', reason: 'Live' });
    expect(ready.message?.endsWith(`: GET https://${alias}/ answered HTTP 200.`)).toBe(true);
  }, 180_000);
});

describe('a redirect domain made by hand without spec.service, through Traefik', () => {
  it('answers 301 with Location keeping path and query: its Ingress names the selector-less Service portico-redirect, which has no endpoints', async () => {
    const hostname = `bare.${ns}.example`;
    await domain('bare', hostname, { redirect: { to: primary } });
    await waitUntilServed('bare', hostname, 301);
    const answer = await httpsGet(https(), hostname, '/old/page?id=7&ref=mail', root);
    expect(answer.status).toBe(301);
    expect(answer.headers.location).toBe(`https://${primary}/old/page?id=7&ref=mail`);
    const post = await httpsGet(https(), hostname, '/form?x=1', root, 'POST');
    expect([post.status, post.headers.location]).toEqual([308, `https://${primary}/form?x=1`]);
    const { networking, core, discovery } = kube();
    const ingress = await networking.readNamespacedIngress({ namespace: ns, name: 'portico-bare' });
    expect(ingress.spec?.rules?.[0]?.http?.paths.map((p) => p.backend.service)).toEqual([
      { name: 'portico-redirect', port: { number: 80 } },
    ]);
    const service = await core.readNamespacedService({ namespace: ns, name: 'portico-redirect' });
    expect(service.spec?.selector).toBeUndefined();
    expect(service.metadata?.annotations?.['traefik.ingress.kubernetes.io/service.nativelb']).toBe('true');
    const slices = await discovery.listNamespacedEndpointSlice({
      namespace: ns,
      labelSelector: 'kubernetes.io/service-name=portico-redirect',
    });
    expect(slices.items).toEqual([]);
    const routed = domainCondition(await getCustomDomain(ns, 'bare'), 'Routed').message ?? '';
    expect(routed).not.toContain('spec.service');
  });
});

describe('deleting a CustomDomain through Traefik', () => {
  it('stops the hostname being served; the time to the first refused request is reported', async () => {
    const hostname = `gone.${ns}.example`;
    await domain('gone', hostname, { service: { name: 'web', port: 80 } });
    await waitUntilServed('gone', hostname, 200);
    const before = await httpsGet(https(), hostname, '/', root);
    expect(before.status).toBe(200);

    const deletedAt = Date.now();
    await deleteCustomDomain(ns, 'gone');
    created.splice(
      created.findIndex((d) => d.name === 'gone'),
      1,
    );
    /** How a request for the hostname fares: 'served' (200 from the backend), else what refused it. */
    const attempt = async (): Promise<string> => {
      try {
        const answer = await httpsGet(https(), hostname, '/', root);
        return answer.status === 200 && answer.body.includes(`answered ${hostname}`)
          ? 'served'
          : `HTTP ${answer.status}`;
      } catch (err) {
        return `refused: ${(err as Error).message}`;
      }
    };
    const refusal = await waitFor(
      `a request for ${hostname} to be refused after its deletion`,
      async () => {
        const outcome = await attempt();
        return outcome === 'served' ? undefined : outcome;
      },
      60_000,
      50,
    );
    const elapsedMs = Date.now() - deletedAt;
    process.stdout.write(
      `traefik-traffic: first refused request ${elapsedMs} ms after the delete (${refusal})\n`,
    );
    // Once refused, it stays refused: the route and the certificate are gone, not flapping.
    await waitFor(`${hostname}'s CustomDomain to be gone`, async () =>
      getCustomDomain(ns, 'gone').then(
        () => undefined,
        () => true,
      ),
    );
    for (let i = 0; i < 5; i++) expect(await attempt()).not.toBe('served');
    // The primary is still served.
    expect((await httpsGet(https(), primary, '/', root)).status).toBe(200);
  });
});

describe("another namespace's route for the claimed hostname, through Traefik", () => {
  const other = unique('traefik-other');
  let evil: Server | undefined;

  /** An Ingress of namespace `other` for the primary's hostname, each of `paths` to Service `evil`. */
  function foreignIngress(name: string, paths: string[], ingressClassName?: string): V1Ingress {
    const backend = { service: { name: 'evil', port: { number: 80 } } };
    return {
      metadata: { name, namespace: other },
      spec: {
        ...(ingressClassName === undefined ? {} : { ingressClassName }),
        rules: [
          { host: primary, http: { paths: paths.map((path) => ({ path, pathType: 'Prefix', backend })) } },
        ],
      },
    };
  }

  beforeAll(async () => {
    const started = await startProjectBackend(other);
    evil = started.server;
    const { core, discovery } = kube();
    await core.createNamespace({ body: { metadata: { name: other } } });
    await core.createNamespacedService({
      namespace: other,
      body: { metadata: { name: 'evil' }, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace: other,
      body: backendEndpointSlice(other, 'evil', 'evil-1', started.port) as unknown as V1EndpointSlice,
    });
  });

  afterAll(async () => {
    await runAll(
      () => kube().core.deleteNamespace({ name: other }),
      async () => {
        if (evil) await closeServer(evil);
      },
    );
  });

  it("serves the project's page for a classless one; one of Traefik's class is served (the hijack the class's admission policy refuses)", async () => {
    const { networking } = kube();
    // Created first: a team's route on the shared ingress (no class), `/` and `/hijacked`.
    await networking.createNamespacedIngress({
      namespace: other,
      body: foreignIngress('shared', ['/', '/hijacked']),
    });
    // Then one of the class Traefik serves, `/taken` only: once Traefik routes `/taken` to the
    // other namespace, it has read the classless one too (it rebuilds from every Ingress it holds).
    await networking.createNamespacedIngress({
      namespace: other,
      body: foreignIngress('in-class', ['/taken'], TRAEFIK_INGRESS_CLASS),
    });
    await waitFor(
      "Traefik to route /taken to the other namespace's backend",
      async () => {
        const answer = await httpsGet(https(), primary, '/taken', root);
        return answer.headers['x-portico-project'] === other ? true : undefined;
      },
      60_000,
      100,
    );
    for (const target of ['/', '/hijacked', '/hijacked/deeper?x=1']) {
      const answer = await httpsGet(https(), primary, target, root);
      expect(answer.status, target).toBe(200);
      expect(answer.headers['x-portico-project'], target).toBe(ns);
    }
    // Only the route of Portico's class counts as foreign (docs/routing.md, "Foreign routes").
    const cd = await waitForCondition(ns, 'www', 'Conflicted', 'True', 'ForeignRoute');
    expect(domainCondition(cd, 'Conflicted').message).toContain(`Ingress ${other}/in-class`);
    expect(domainCondition(cd, 'Conflicted').message).not.toContain(`${other}/shared`);

    await networking.deleteNamespacedIngress({ namespace: other, name: 'in-class' });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
    await waitFor(
      'Traefik to route /taken to the project again',
      async () => {
        const answer = await httpsGet(https(), primary, '/taken', root);
        return answer.headers['x-portico-project'] === ns ? true : undefined;
      },
      60_000,
      100,
    );
  });
});
