/**
 * A domain's life through a real Traefik, seen by HTTP clients (docs/routing.md, "Traefik"): the
 * certificate issued along the path production uses (HTTP-01 through Traefik's `web` entrypoint),
 * renewed and served by SNI, a plan downgrade, Traefik paused and restarted, and the platform's
 * HTTP → HTTPS redirect.
 *
 * What this file starts, and stops in `afterAll` (the stack is left as found): a Traefik of its own
 * (the stack's data plane is Contour, which does not take class `traefik`); a second Pebble whose
 * HTTP-01 validation connects to Traefik's `web` port (`httpPort`), so the CA reaches the operator's
 * challenge server only through Traefik; an operator of its own on that Pebble, its challenge server
 * on a port of its own, routed from each domain's Ingress through the ExternalName Service
 * `portico-acme-http01` (`--http01-service 127.0.0.1:<port>`), its self-check on Traefik's `web`
 * port too, and the serving check on `websecure`; the stack's operator is stopped meanwhile. Clients
 * send the hostname as SNI and Host and trust only the second Pebble's issuing root.
 */
import { readFile, stat } from 'node:fs/promises';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { CustomDomain } from '../../src/api/customdomain.js';
import { SANDBOX_PEBBLE_PROFILES } from '../../src/sandbox/pebble.js';
import { closeServer, startProjectBackend } from '../../src/sandbox/project-backend.js';
import {
  traefikOperatorFlags,
  TRAEFIK_INGRESS_CLASS,
  type StartedTraefik,
  type TraefikPorts,
} from '../../src/data-planes/traefik/sandbox-process.js';
import {
  createCustomDomain,
  domainEvents,
  deleteCreatedDomains,
  dns,
  domainCondition,
  getCustomDomain,
  getPebble,
  kube,
  renewalWindowInThePast,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  freePort,
  restartStackController,
  runAll,
  SHORT_FIRST_RETRY,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';
import {
  createProjectWithBackend,
  freeTraefikPorts,
  httpGet,
  httpsGet,
  signalStackTraefik,
  startStackTraefik,
  stopStackTraefik,
  tlsHandshake,
  traefikLogPath,
} from './support/traefik.js';

const LOG = 'traefik-lifecycle';
const PEBBLE_NAME = 'pebble-traefik';
/** Seconds between serving checks of a Live domain: short, so checks run while Traefik is paused. */
const SERVING_INTERVAL_SECONDS = 10;
const ns = unique('traefik-life');
const primary = `www.${ns}.example`;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let pebble: SecondPebble | undefined;
let traefik: StartedTraefik | undefined;
let ports: TraefikPorts | undefined;
let backend: Server | undefined;
let backendPort = 0;
let solverPort = 0;
let root = '';
const created: { namespace: string; name: string }[] = [];
const namespaces: string[] = [];

function https(): string {
  if (!traefik) throw new Error('Traefik did not start');
  return traefik.httpsAddr;
}

function filePorts(): TraefikPorts {
  if (!ports) throw new Error('Traefik did not start');
  return ports;
}

/** The Ready condition's last transition time, as stored. */
function readyTransition(cd: CustomDomain): string | undefined {
  const ready = cd.status?.conditions?.find((c) => c.type === 'Ready');
  return ready?.lastTransitionTime;
}

function http(): string {
  if (!traefik) throw new Error('Traefik did not start');
  return traefik.httpAddr;
}

/** A project of plan `plan` at this file's backend (support/traefik.ts), deleted after the file. */
async function createProject(namespace: string, plan = 'pro'): Promise<void> {
  await createProjectWithBackend(namespace, backendPort, plan);
  namespaces.push(namespace);
}

/** A serving CustomDomain `name` for `hostname` in `namespace`, its CNAME set first (the real DNS check). */
async function servingDomain(namespace: string, name: string, hostname: string): Promise<void> {
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(namespace, name, { hostname, service: { name: 'web', port: 80 } });
  created.push({ namespace, name });
}

/** A serial as status and the serving check write it: uppercase hex without leading zeros. */
function serialOf(value: string | undefined): string {
  return (value ?? '').toUpperCase().replace(/^0+/, '');
}

/** How a GET of `hostname` fares through Traefik: 'served' (the backend's page), else what refused it. */
async function attempt(hostname: string): Promise<string> {
  try {
    const answer = await httpsGet(https(), hostname, '/', root);
    return answer.status === 200 && answer.body.includes(`answered ${hostname}`)
      ? 'served'
      : `HTTP ${answer.status}`;
  } catch (err) {
    return `refused: ${(err as Error).message}`;
  }
}

/**
 * Waits until `namespace/name` is Ready and Traefik presents, by SNI, the certificate whose serial
 * its status holds and answers a GET with the backend's page. Returns the domain.
 */
async function waitUntilServed(namespace: string, name: string, hostname: string): Promise<CustomDomain> {
  const cd = await waitForCondition(namespace, name, 'Ready', 'True', undefined, 240_000);
  const serial = serialOf(cd.status?.certificate?.serialNumber);
  await waitFor(
    `Traefik to present ${hostname}'s certificate ${serial} and serve the page`,
    async () => {
      const handshake = await tlsHandshake(https(), hostname, root);
      if (serialOf(handshake.certificate.serialNumber) !== serial) return undefined;
      return (await attempt(hostname)) === 'served' ? true : undefined;
    },
    60_000,
    100,
  );
  return cd;
}

/** The lines of Traefik's log from byte `from` on. */
async function traefikLogSince(from: number): Promise<string[]> {
  const text = await readFile(traefikLogPath());
  return text.subarray(from).toString('utf8').split('\n');
}

/** One line of Traefik's access log (common log format, as `--accessLog=true` writes it). */
interface AccessLine {
  method: string;
  path: string;
  status: number;
  userAgent: string;
  router: string;
  service: string;
}

/** Traefik's CLF: `host - user [time] "METHOD path proto" status size "referer" "ua" count "router" "service" Nms`. */
const ACCESS_LINE =
  /^\S+ \S+ \S+ \[[^\]]+\] "(\S+) (\S+) [^"]*" (\d{3}) \S+ "[^"]*" "([^"]*)" \d+ "([^"]*)" "([^"]*)" \d+ms$/;

function accessLines(lines: string[]): AccessLine[] {
  return lines.flatMap((line) => {
    const m = ACCESS_LINE.exec(line.trim());
    if (!m) return [];
    const [, method = '', path = '', status = '0', userAgent = '', router = '', service = ''] = m;
    return [{ method, path, status: Number(status), userAgent, router, service }];
  });
}

beforeAll(async () => {
  const started = await startProjectBackend(ns);
  backend = started.server;
  backendPort = started.port;
  ports = await freeTraefikPorts();
  traefik = await startStackTraefik({ ports });
  solverPort = await freePort();
  // The CA's HTTP-01 request goes to Traefik's web entrypoint, not to the operator.
  pebble = await startSecondPebble(PEBBLE_NAME, SANDBOX_PEBBLE_PROFILES, { httpPort: ports.web });
  root = await getPebble(`${pebble.managementUrl}/roots/0`);
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, LOG, {
    ...traefikOperatorFlags(TRAEFIK_INGRESS_CLASS, traefik.httpsAddr),
    ...SHORT_FIRST_RETRY,
    '--acme-directory-url': pebble.directoryUrl,
    '--http01-listen-address': `127.0.0.1:${solverPort}`,
    '--http01-service': `127.0.0.1:${solverPort}`,
    '--http01-self-check-port': String(ports.web),
    '--serving-check-interval-seconds': String(SERVING_INTERVAL_SECONDS),
  });
  await createProject(ns);
}, 180_000);

afterAll(async () => {
  await runAll(
    () => deleteCreatedDomains(created, LOG),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
    () => stopSecondPebble(PEBBLE_NAME),
    () => stopStackTraefik(),
    async () => {
      if (backend) await closeServer(backend);
    },
    async () => {
      for (const name of namespaces)
        await kube()
          .core.deleteNamespace({ name })
          .catch(() => undefined);
    },
  );
}, 180_000);

describe('HTTP-01 through Traefik', () => {
  it("issues the certificate through Traefik's web entrypoint: Pebble's request is in Traefik's access log, routed to the operator's challenge server", async () => {
    const logFrom = (await stat(traefikLogPath())).size;
    await servingDomain(ns, 'www', primary);
    const cd = await waitUntilServed(ns, 'www', primary);
    expect(solverPort).not.toBe(ports?.web);

    // The challenge route: the domain's Ingress sends the challenge path to the ExternalName Service,
    // which names the operator's challenge server.
    const ingress = await kube().networking.readNamespacedIngress({ namespace: ns, name: 'portico-www' });
    const paths = ingress.spec?.rules?.[0]?.http?.paths ?? [];
    expect(paths.find((p) => p.path === '/.well-known/acme-challenge/')?.backend.service?.name).toBe(
      'portico-acme-http01',
    );
    const service = await kube().core.readNamespacedService({ namespace: ns, name: 'portico-acme-http01' });
    expect(service.spec).toMatchObject({ type: 'ExternalName', externalName: '127.0.0.1' });

    // Traefik's access log: the CA's validation request, answered 200 by the challenge server.
    const lines = accessLines(await traefikLogSince(logFrom));
    const challenges = lines.filter((l) => l.path.startsWith('/.well-known/acme-challenge/'));
    const byPebble = challenges.filter((l) => l.userAgent.startsWith('LetsEncrypt-Pebble-VA'));
    process.stdout.write(
      `${LOG}: challenge requests through Traefik: ${challenges
        .map((l) => `${l.method} ${l.path} ${l.status} "${l.userAgent}" router ${l.router} → ${l.service}`)
        .join('; ')}\n`,
    );
    expect(byPebble.length).toBeGreaterThan(0);
    for (const line of byPebble) {
      expect(line.status).toBe(200);
      expect(line.service).toBe(`http://127.0.0.1:${solverPort}`);
      expect(line.router).toContain('portico-www');
    }
    // The order was finalized at this Pebble: the leaf chains to its root, and the serving check saw it.
    expect(domainCondition(cd, 'Ready').message).toContain(
      `${primary}: served certificate ${serialOf(cd.status?.certificate?.serialNumber)} (valid until `,
    );
    const handshake = await tlsHandshake(https(), primary, root);
    expect(handshake.authorized).toBe(true);
  });

  it('gave no Warning while Traefik loaded what it took (the propagation grace): no CertificateNotServed or ProjectNotReached Event', async () => {
    const events = await domainEvents(ns, 'www');
    const reasons = events.map((e) => `${e.type ?? ''}/${e.reason ?? ''}`);
    process.stdout.write(`${LOG}: www's Events: ${reasons.join(', ')}\n`);
    expect(reasons).not.toContain('Warning/CertificateNotServed');
    expect(reasons).not.toContain('Warning/ProjectNotReached');
    // Events are recorded for this domain (the absence above is not for want of any).
    expect(reasons.some((r) => r.startsWith('Normal/'))).toBe(true);
  });
});

describe('renewal through Traefik', () => {
  it('presents the renewed certificate on the TLS handshake by SNI, the serial in status, once Ready', async () => {
    const before = await getCustomDomain(ns, 'www');
    const old = serialOf(before.status?.certificate?.serialNumber);
    const secret = await kube().core.readNamespacedSecret({ namespace: ns, name: 'www-tls' });
    const pem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
    // The CA's renewal window moved into the past (RFC 9773), as the other renewal files do.
    await renewalWindowInThePast(pem, pebble?.managementUrl ?? '');
    await requestVerify(ns, 'www', 'renew-through-traefik');
    const renewed = await waitFor(
      'a renewed certificate in status, and Ready on it',
      async () => {
        const cd = await getCustomDomain(ns, 'www');
        const serial = serialOf(cd.status?.certificate?.serialNumber);
        const ready = domainCondition(cd, 'Ready');
        return serial !== old && ready.status === 'True' && ready.message?.includes(`certificate ${serial} `)
          ? serial
          : undefined;
      },
      180_000,
    );
    const handshake = await tlsHandshake(https(), primary, root);
    expect(serialOf(handshake.certificate.serialNumber)).toBe(renewed);
    expect(renewed).not.toBe(old);
    expect(handshake.authorized).toBe(true);
    expect((await httpsGet(https(), primary, '/', root)).status).toBe(200);
    const reasons = (await domainEvents(ns, 'www')).map((e) => `${e.type ?? ''}/${e.reason ?? ''}`);
    expect(reasons).not.toContain('Warning/CertificateNotServed');
  });
});

describe('plan downgrade through Traefik', () => {
  it('stops the hostname being served once the plan label drops below Pro; the time to the first refused request is reported', async () => {
    const downgraded = unique('traefik-plan');
    const hostname = `shop.${downgraded}.example`;
    await createProject(downgraded);
    await servingDomain(downgraded, 'shop', hostname);
    await waitUntilServed(downgraded, 'shop', hostname);

    const changedAt = Date.now();
    await kube().core.patchNamespace({
      name: downgraded,
      body: [{ op: 'add', path: '/metadata/labels', value: { 'portico.dev/plan': 'free' } }],
    });
    const refusal = await waitFor(
      `a request for ${hostname} to be refused after the downgrade`,
      async () => {
        const outcome = await attempt(hostname);
        return outcome === 'served' ? undefined : outcome;
      },
      120_000,
      50,
    );
    const elapsedMs = Date.now() - changedAt;
    process.stdout.write(
      `${LOG}: first refused request ${elapsedMs} ms after the plan label changed (${refusal})\n`,
    );
    const cd = await waitForCondition(downgraded, 'shop', 'Accepted', 'False', 'PlanNotEligible');
    expect(domainCondition(cd, 'Ready').status).toBe('False');
    for (let i = 0; i < 5; i++) expect(await attempt(hostname)).not.toBe('served');
    // The Pro project is still served.
    expect(await attempt(primary)).toBe('served');
  });
});

describe('Traefik paused, then stopped and started again', () => {
  it('makes a new domain wait naming Traefik and since when, Ready once Traefik answers; the Live domain stays Ready and served with the same serial', async () => {
    const live = await getCustomDomain(ns, 'www');
    const serial = serialOf(live.status?.certificate?.serialNumber);
    const readySince = readyTransition(live);
    // Watch www's Ready throughout: it must never go False.
    const dips: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const cd = await getCustomDomain(ns, 'www').catch(() => undefined);
        const ready = cd ? domainCondition(cd, 'Ready') : undefined;
        if (ready && ready.status !== 'True') dips.push(`${ready.reason ?? ''}: ${ready.message ?? ''}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    try {
      // Paused: the kernel accepts connections, nothing answers them, and no status is written.
      const pausedAt = Date.now();
      await signalStackTraefik('SIGSTOP');
      const late = `late.${ns}.example`;
      try {
        await servingDomain(ns, 'late', late);
        const waiting = await waitFor(
          "late's Routed to name Traefik and since when",
          async () => {
            const cd = await getCustomDomain(ns, 'late');
            const routed = domainCondition(cd, 'Routed');
            return routed.status === 'False' && routed.message?.includes('Traefik') ? cd : undefined;
          },
          60_000,
        );
        const routed = domainCondition(waiting, 'Routed');
        const ingress = await kube().networking.readNamespacedIngress({
          namespace: ns,
          name: 'portico-late',
        });
        const created = new Date(ingress.metadata?.creationTimestamp ?? '').toISOString();
        expect(routed.reason).toBe('AwaitingDataPlane');
        expect(routed.message).toContain(`Ingress portico-late is written since ${created}`);
        expect(routed.message).toContain(
          'Traefik (the controller of ingress class traefik) has not taken it',
        );
        expect(domainCondition(waiting, 'Ready').status).toBe('False');
        process.stdout.write(`${LOG}: while paused, late's Routed: ${routed.message ?? ''}\n`);
        // A serving check of www while paused: no answer, and www stays Ready (the unreachable grace).
        const kept = await waitFor(
          "a serving check of www to fail while Traefik is paused, www's Ready kept",
          async () => {
            const ready = domainCondition(await getCustomDomain(ns, 'www'), 'Ready');
            return ready.message?.includes('the latest check failed') ? ready : undefined;
          },
          60_000,
        );
        expect(kept).toMatchObject({ status: 'True', reason: 'Live' });
        expect(kept.message).toContain(`no TLS connection to Traefik at ${https()}`);
        process.stdout.write(`${LOG}: while paused, www's Ready: ${kept.message ?? ''}\n`);
      } finally {
        await signalStackTraefik('SIGCONT');
      }
      process.stdout.write(`${LOG}: Traefik paused for ${Date.now() - pausedAt} ms\n`);
      const lateCd = await waitUntilServed(ns, 'late', late);
      expect(domainCondition(lateCd, 'Routed').message).toContain('Traefik took Ingress portico-late');

      // Stopped (SIGTERM) and started again on the same ports.
      const stoppedAt = Date.now();
      await stopStackTraefik();
      expect(await attempt(primary)).toMatch(/^refused: .*ECONNREFUSED/);
      traefik = await startStackTraefik({ ports: filePorts(), appendToLog: true });
      const back = await waitFor(
        'www to be served again after the restart',
        async () => ((await attempt(primary)) === 'served' ? Date.now() : undefined),
        60_000,
        50,
      );
      process.stdout.write(`${LOG}: www served again ${back - stoppedAt} ms after Traefik was stopped\n`);
      for (const [hostname, name] of [
        [primary, 'www'],
        [late, 'late'],
      ] as const) {
        const cd = await getCustomDomain(ns, name);
        const handshake = await tlsHandshake(https(), hostname, root);
        expect(serialOf(handshake.certificate.serialNumber), hostname).toBe(
          serialOf(cd.status?.certificate?.serialNumber),
        );
        const answer = await httpsGet(https(), hostname, '/', root);
        expect(answer.status, hostname).toBe(200);
      }
      expect(serialOf((await getCustomDomain(ns, 'www')).status?.certificate?.serialNumber)).toBe(serial);
      // Let a serving check of www run after the restart (the interval is short), still Ready.
      await new Promise((r) => setTimeout(r, (SERVING_INTERVAL_SECONDS + 5) * 1000));
    } finally {
      watching = false;
      await watcher;
    }
    const www = await getCustomDomain(ns, 'www');
    expect(dips).toEqual([]);
    expect(domainCondition(www, 'Ready')).toMatchObject({ status: 'True', reason: 'Live' });
    expect(readyTransition(www)).toBe(readySince);
    expect(readySince).toBeDefined();
  });
});

describe("HTTP → HTTPS, where the platform asks (Traefik's entrypoint redirect)", () => {
  beforeAll(async () => {
    await stopStackTraefik();
    traefik = await startStackTraefik({ ports: filePorts(), httpsRedirect: true, appendToLog: true });
    await waitFor(
      'www to be served after the restart with the redirect',
      async () => ((await attempt(primary)) === 'served' ? true : undefined),
      60_000,
      50,
    );
  }, 120_000);

  it("answers plain HTTP with 301 to the same path and query on HTTPS (websecure's port), and that URL serves the page", async () => {
    const answer = await httpGet(http(), primary, '/catalog/shoes?size=42');
    expect(answer.status).toBe(301);
    const location = new URL(String(answer.headers.location));
    expect(location.href).toBe(`https://${primary}:${ports?.websecure ?? 0}/catalog/shoes?size=42`);
    const followed = await httpsGet(
      https(),
      location.hostname,
      `${location.pathname}${location.search}`,
      root,
    );
    expect(followed.status).toBe(200);
    expect(followed.body).toContain(`answered ${primary} /catalog/shoes?size=42`);
  });

  it('still issues a new domain: Pebble follows the redirect to the challenge on HTTPS, as does the self-check', async () => {
    const logFrom = (await stat(traefikLogPath())).size;
    const hostname = `secure.${ns}.example`;
    await servingDomain(ns, 'secure', hostname);
    await waitUntilServed(ns, 'secure', hostname);
    const lines = accessLines(await traefikLogSince(logFrom)).filter(
      (l) =>
        l.path.startsWith('/.well-known/acme-challenge/') && l.userAgent.startsWith('LetsEncrypt-Pebble-VA'),
    );
    process.stdout.write(
      `${LOG}: Pebble's challenge requests with the redirect: ${lines
        .map((l) => `${l.status} router ${l.router} → ${l.service || '(none)'}`)
        .join('; ')}\n`,
    );
    // On web, the entrypoint's redirect router answers 301; on websecure, the challenge route 200.
    expect(lines.some((l) => l.status === 301 && l.router.startsWith('web-to-websecure'))).toBe(true);
    expect(
      lines.some(
        (l) =>
          l.status === 200 &&
          l.service === `http://127.0.0.1:${solverPort}` &&
          l.router.includes('portico-secure'),
      ),
    ).toBe(true);
  });
});
