/**
 * A Secret that is not a usable certificate never takes HTTPS away from the last good one
 * (docs/customdomains.md, "The last good certificate"), with the `contour` flavor and the stack's
 * REAL Contour: an operator of this file's own runs with `--ingress-flavor contour --data-plane
 * contour` (the stack's is stopped meanwhile). The domain's Secret is overwritten as a tenant or a
 * tool would (its certificate with another certificate's key; garbage), and each time:
 *
 * - Portico writes the last good certificate back (a CertificateRestored Event), and
 * - the HTTPProxy keeps naming the Secret: a watch of it from before the change sees no version
 *   without `virtualhost.tls` and its generation does not move, so Contour is never told to drop
 *   the hostname's HTTPS; Contour's status is `valid` for that generation and its xDS (the HTTPS
 *   filter chain for the hostname, SDS) carries the last good serial again.
 *
 * Before the fix, the reconcile that saw the change routed on the Secret as the informer cache held
 * it (phases/routing.ts judged the cached Secret before the certificate phase restored it), wrote
 * the HTTPProxy without TLS, and put TLS back one reconcile later. What Contour's xDS carried
 * meanwhile is sampled and printed, not asserted: Contour reads the tenant's Secret itself, between
 * the tenant's write and Portico's restore (docs/customdomains.md says what that means).
 */
import { X509Certificate } from 'node:crypto';
import type { CoreV1Event, V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  deleteCreatedDomains,
  dns,
  domainCondition,
  domainEvents,
  GARBAGE_TLS_DATA,
  getCustomDomain,
  overwriteSecretData,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  contourXdsAddr,
  httpsFilterChains,
  readProxy,
  sdsCertificateSerial,
  sdsSecretName,
  watchProxy,
} from './support/contour.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const LOG = 'contour-last-good-certificate';
const HTTP01_SERVICE = 'portico-controller.portico-system.svc.cluster.local:8089';
const ns = unique('cgood');
const primary = `www.${ns}.example`;
const other = `other.${ns}.example`;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
/** The last good certificate's serial (Node's uppercase hex) and the Secret's data holding it. */
let goodSerial = '';
let goodData: Record<string, string> = {};
const created: { namespace: string; name: string }[] = [];

function leafSerial(secret: V1Secret | undefined): string {
  try {
    return new X509Certificate(Buffer.from(secret?.data?.['tls.crt'] ?? '', 'base64')).serialNumber;
  } catch {
    return '(not a certificate)';
  }
}

async function readSecret(name: string): Promise<V1Secret | undefined> {
  return kube()
    .core.readNamespacedSecret({ namespace: ns, name })
    .catch(() => undefined);
}

/** The serial Contour's HTTPS filter chain for `primary` carries over SDS, or what it has instead. */
async function servedSerial(): Promise<string> {
  const [chain] = await httpsFilterChains(primary);
  const name = chain === undefined ? undefined : sdsSecretName(chain);
  if (name === undefined) return '(no HTTPS filter chain)';
  return (await sdsCertificateSerial(name)) ?? `(no SDS secret ${name})`;
}

/**
 * Runs `tamper` on www-tls while a watch records every version of HTTPProxy portico-www, waits for
 * the Secret to hold the last good certificate and key again, then for Contour's xDS to serve it;
 * samples Contour's xDS meanwhile (printed). Resolves the versions seen, the HTTPProxy's generation
 * before, and the CertificateRestored Event.
 */
async function tamperAndWatch(
  what: string,
  tamper: () => Promise<void>,
): Promise<{
  seen: Awaited<ReturnType<typeof watchProxy>>['seen'];
  generationBefore: number | undefined;
  event: CoreV1Event;
}> {
  const before = new Set((await domainEvents(ns, 'www')).map((e) => e.metadata?.uid));
  const generationBefore = (await readProxy(ns, 'portico-www')).metadata.generation;
  const watched = await watchProxy(ns, 'portico-www');
  const samples: string[] = [];
  const started = Date.now();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const serial = await servedSerial().catch((err: unknown) => `(xDS: ${(err as Error).message})`);
      if (samples.at(-1)?.endsWith(serial) !== true) samples.push(`${Date.now() - started} ms: ${serial}`);
    }
  })();
  try {
    await tamper();
    await waitFor(
      `www-tls to hold the last good certificate and key again after ${what}`,
      async () => {
        const secret = await readSecret('www-tls');
        return secret?.data?.['tls.crt'] === goodData['tls.crt'] &&
          secret?.data?.['tls.key'] === goodData['tls.key']
          ? true
          : undefined;
      },
      60_000,
      50,
    );
    const event = await waitFor(
      `a CertificateRestored Event on www after ${what}`,
      async () =>
        (await domainEvents(ns, 'www')).find(
          (e) => !before.has(e.metadata?.uid) && e.reason === 'CertificateRestored',
        ),
      20_000,
    );
    await waitFor(
      `Contour's xDS to serve ${goodSerial} for ${primary} after ${what}`,
      async () => ((await servedSerial()) === goodSerial ? true : undefined),
      30_000,
    );
    return { seen: [...watched.seen], generationBefore, event };
  } finally {
    sampling = false;
    await sampler;
    watched.stop();
    process.stdout.write(
      `${LOG}: ${what}: HTTPProxy versions ${JSON.stringify(watched.seen)}; Contour's xDS served by SNI meanwhile: ${samples.join('; ')}\n`,
    );
  }
}

/** What every case asserts once the Secret is restored: HTTPS was never taken from the hostname. */
async function expectTlsKept(result: Awaited<ReturnType<typeof tamperAndWatch>>): Promise<void> {
  expect(result.seen.length).toBeGreaterThanOrEqual(1);
  // No version of the HTTPProxy without the TLS Secret, and no new generation at all.
  expect(result.seen.filter((v) => !v.tls)).toEqual([]);
  expect(result.seen.every((v) => v.generation === result.generationBefore)).toBe(true);
  const proxy = await readProxy(ns, 'portico-www');
  expect(proxy.metadata.generation).toBe(result.generationBefore);
  expect(proxy.spec.virtualhost).toEqual({ fqdn: primary, tls: { secretName: 'www-tls' } });
  const valid = await waitFor(
    "Contour's Valid condition for the HTTPProxy's generation",
    async () => {
      const p = await readProxy(ns, 'portico-www');
      const c = p.status?.conditions?.find((x) => x.type === 'Valid');
      return p.status?.currentStatus === 'valid' && c?.observedGeneration === p.metadata.generation
        ? c
        : undefined;
    },
    30_000,
  );
  expect(valid.status).toBe('True');
  expect(await servedSerial()).toBe(goodSerial);
  const cd = await getCustomDomain(ns, 'www');
  expect(domainCondition(cd, 'CertificateReady')).toMatchObject({ status: 'True', reason: 'Issued' });
}

beforeAll(async () => {
  contourXdsAddr(); // throws unless the stack runs Contour
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, LOG, {
    '--ingress-flavor': 'contour',
    '--data-plane': 'contour',
    '--data-plane-acknowledgement': 'true',
    '--http01-service': HTTP01_SERVICE,
  });
  await createProject(ns);
  for (const [name, hostname] of [
    ['www', primary],
    ['other', other],
  ] as const) {
    await dns.setCname(hostname, sandbox.platformCnameTarget);
    await createCustomDomain(ns, name, { hostname, service: { name: 'web', port: 'http' } });
    created.push({ namespace: ns, name });
  }
  for (const name of ['www', 'other']) await waitForCondition(ns, name, 'Ready', 'True', undefined, 180_000);
  const secret = await readSecret('www-tls');
  goodSerial = leafSerial(secret);
  goodData = { ...(secret?.data ?? {}) };
  // The HTTPProxy names the Secret, and Contour serves the certificate for the hostname.
  await waitFor(
    `HTTPProxy portico-www with TLS and Contour's xDS serving ${goodSerial}`,
    async () => {
      const proxy = await readProxy(ns, 'portico-www');
      return proxy.spec.virtualhost.tls !== undefined && (await servedSerial()) === goodSerial
        ? true
        : undefined;
    },
    60_000,
  );
}, 300_000);

afterAll(async () => {
  await runAll(
    () => deleteCreatedDomains(created, LOG),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
}, 180_000);

describe('the last good certificate with Contour: the HTTPProxy never loses its TLS to a broken Secret', () => {
  it("the certificate with another certificate's key (Contour itself accepts the pair)", async () => {
    const otherKey = (await readSecret('other-tls'))?.data?.['tls.key'] ?? '';
    expect(otherKey).not.toBe(goodData['tls.key']);
    const result = await tamperAndWatch("another certificate's key", () =>
      overwriteSecretData(ns, 'www-tls', { ...goodData, 'tls.key': otherKey }),
    );
    expect(result.event.message).toContain(
      "Secret www-tls holds a tls.key that is not the certificate's private key: restored the last good certificate",
    );
    await expectTlsKept(result);
  });

  it('garbage over tls.crt and tls.key', async () => {
    const result = await tamperAndWatch('garbage over the data', () =>
      overwriteSecretData(ns, 'www-tls', GARBAGE_TLS_DATA),
    );
    expect(result.event.message).toContain(
      'Secret www-tls has no tls.crt and tls.key that parse as a certificate and its key: restored the last good certificate',
    );
    await expectTlsKept(result);
  });
});
