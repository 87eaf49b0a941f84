import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { CoreV1Api, KubernetesObjectApi, V1Secret } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ariCertificateId } from '../../acme/ari.js';
import { AcmeDirectory } from '../../acme/directory.js';
import { CaaForbidsIssuanceError, type IssueOptions } from '../../acme/issuer.js';
import type { IssuerOrderRequest } from '../../acme/issuer-set.js';
import type { OrderDecision, OrderOutcome } from '../../acme/order-decision.js';
import { closeServer, listenOn } from '../../../test/support/loopback-server.js';
import { testIssued, testRoot, type TestCertificate } from '../../../test/support/test-ca.js';
import { RenewalPlanner, type RenewalPlanning } from '../customdomain/renewal.js';
import { AppsDomainCertificate, type AppsCertificateIssuer } from './apps-certificate.js';
import { parseRenewalRecord, RENEWAL_INFO_ANNOTATION, renewalRecordValue } from './apps-renewal.js';

const log = pino({ level: 'silent' });
const APPS = 'apps.example.com';

/** An issuer set that answers from a script, and records what it was asked. */
class ScriptedIssuer implements AppsCertificateIssuer {
  readonly requests: IssuerOrderRequest[] = [];
  readonly settledWith: OrderOutcome[] = [];
  readonly issued: { hostname: string; options: IssueOptions & { issuedBy?: string | undefined } }[] = [];
  decide: (req: IssuerOrderRequest) => OrderDecision = () => ({
    admitted: true,
    admittedAt: new Date(),
    alreadyInFlight: false,
  });
  fail: Error | undefined;

  request(req: IssuerOrderRequest): OrderDecision {
    this.requests.push(req);
    return this.decide(req);
  }
  settled(_key: string, outcome: OrderOutcome): void {
    this.settledWith.push(outcome);
  }
  withdraw(): void {}
  issue(
    hostname: string,
    _log: unknown,
    options: IssueOptions & { issuedBy?: string | undefined },
  ): Promise<never> {
    this.issued.push({ hostname, options });
    return Promise.reject(this.fail ?? new Error('no certificate in this test'));
  }
}

/** A planner for a Secret that holds no certificate: never asked. */
const NO_CERTIFICATE_PLANNER: RenewalPlanning = {
  plan: () => Promise.reject(new Error('no certificate to plan in this test')),
};

function subject(
  issuer: ScriptedIssuer,
  firstRetryMs: number,
  more: {
    core?: Pick<CoreV1Api, 'readNamespacedSecret' | 'patchNamespacedSecret'>;
    renewal?: RenewalPlanning;
  } = {},
) {
  const events: { type: string; reason: string; message: string; kind: string }[] = [];
  const certificate = new AppsDomainCertificate({
    appsDomain: APPS,
    secret: { namespace: 'portico-system', name: 'portico-apps-domain-tls' },
    core: more.core ?? {
      readNamespacedSecret: (): Promise<V1Secret> =>
        Promise.reject(Object.assign(new Error('not found'), { code: 404 })),
      patchNamespacedSecret: (): Promise<V1Secret> => Promise.reject(new Error('no Secret to patch')),
    },
    objects: {} as KubernetesObjectApi,
    issuer,
    dns01: { publishTxt: () => Promise.resolve(), withdrawTxt: () => Promise.resolve() },
    firstRetryMs,
    renewal: more.renewal ?? NO_CERTIFICATE_PLANNER,
    recheckMs: 600_000,
    onChange: () => undefined,
    events: {
      record: (obj, type, reason, message) => {
        events.push({ type, reason, message, kind: obj.kind });
        return Promise.resolve();
      },
    },
    log,
  });
  return { certificate, events };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 3_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('AppsDomainCertificate', () => {
  it("orders *.<apps domain> through the issuers' order budget, DNS-01 in the apps zone", async () => {
    const issuer = new ScriptedIssuer();
    const { certificate } = subject(issuer, 60_000);
    certificate.start();
    await until('an order', () => issuer.issued[0]);
    await certificate.stop();
    expect(issuer.requests[0]).toMatchObject({
      key: certificate.orderKey,
      tenant: 'portico-system',
      hostname: `*.${APPS}`,
      registeredDomain: 'example.com',
      kind: 'first-issuance',
    });
    expect(certificate.orderKey).toBe('apps-domain-certificate:portico-system/portico-apps-domain-tls');
    expect(issuer.issued[0]?.hostname).toBe(`*.${APPS}`);
    expect(issuer.issued[0]?.options.dns01RecordName).toBe(`_acme-challenge.${APPS}`);
    expect(issuer.issued[0]?.options.dns01Publisher).toBeDefined();
  });

  it('a queued turn: no order, the budget sentence in the state, the order placed once admitted', async () => {
    const issuer = new ScriptedIssuer();
    let admit = false;
    issuer.decide = () =>
      admit
        ? { admitted: true, admittedAt: new Date(), alreadyInFlight: false }
        : {
            admitted: false,
            reason: 'AccountOrderBudget',
            position: 3,
            expectedAt: new Date(Date.now() + 3_600_000),
            message: 'Queued for the CA order budget: position 3.',
          };
    const { certificate } = subject(issuer, 60_000);
    certificate.start();
    await until('the queued state', () => (certificate.state.reason === 'OrderQueued' ? true : undefined));
    expect(certificate.state).toMatchObject({
      ready: false,
      message: 'Queued for the CA order budget: position 3.',
    });
    expect(issuer.issued).toEqual([]);
    admit = true;
    certificate.wake(); // the budget's requeue: its turn came
    await until('an order', () => issuer.issued[0]);
    await certificate.stop();
  });

  it('a CAA refusal: the verdict in the state and one Warning Event on the Secret for the repeated failure; retried', async () => {
    const issuer = new ScriptedIssuer();
    issuer.fail = new CaaForbidsIssuanceError(
      `Found CAA ${APPS} 0 issuewild "digicert.com", which excludes ...: add CAA ${APPS} 0 issuewild "letsencrypt.org".`,
    );
    const { certificate, events } = subject(issuer, 40);
    certificate.start();
    // The third attempt's failure, not its start: the state says Ordering while an order is placed.
    await until(
      'three failed attempts',
      () =>
        issuer.issued.length >= 3 && certificate.state.reason === 'CAAForbidsIssuance' ? true : undefined,
      10_000,
    );
    await certificate.stop();
    expect(certificate.state.ready).toBe(false);
    expect(certificate.state.reason).toBe('CAAForbidsIssuance');
    expect(certificate.state.message).toContain(`the order of *.${APPS} failed (CAAForbidsIssuance)`);
    expect(certificate.state.message).toContain(`add CAA ${APPS} 0 issuewild "letsencrypt.org"`);
    expect(certificate.state.message).toMatch(/Next attempt at \d{4}-/);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Warning', reason: 'CAAForbidsIssuance', kind: 'Secret' });
    expect(issuer.settledWith.every((o) => o === 'failed-other')).toBe(true);
  });
});

const DAY_MS = 86_400_000;

/** The serial as the operator reads it (node:crypto's uppercase hex). */
function serialOf(certificate: TestCertificate): string {
  return new X509Certificate(certificate.certPem).serialNumber;
}

// A CA stand-in on loopback: its directory offers renewalInfo (or not, at /dir-no-ari), which
// answers the window `ariWindow` with Retry-After 6 h, and counts the requests.
let ca: Server;
let caBase: string;
const asked: string[] = [];
let ariWindow = { start: '', end: '' };

beforeAll(async () => {
  ca = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/dir' || req.url === '/dir-no-ari') {
      res.end(
        JSON.stringify({
          newOrder: `${caBase}/order`,
          ...(req.url === '/dir' ? { renewalInfo: `${caBase}/ari` } : {}),
        }),
      );
      return;
    }
    asked.push(req.url ?? '');
    res.setHeader('retry-after', '21600');
    res.end(JSON.stringify({ suggestedWindow: ariWindow }));
  });
  caBase = `http://127.0.0.1:${String(await listenOn(ca))}`;
});

afterAll(() => closeServer(ca));

/** A wildcard Secret the fake API server holds, read and merge-patched (annotations) as the API server would. */
class SecretHolder {
  secret: V1Secret;
  readonly patches: Record<string, string>[] = [];
  constructor(leaf: TestCertificate, annotations: Record<string, string>) {
    this.secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace: 'portico-system', name: 'portico-apps-domain-tls', annotations },
      type: 'kubernetes.io/tls',
      data: {
        'tls.crt': Buffer.from(leaf.certPem).toString('base64'),
        'tls.key': Buffer.from(leaf.keyPem).toString('base64'),
      },
    };
  }
  readonly core = {
    readNamespacedSecret: (): Promise<V1Secret> => Promise.resolve(this.secret),
    patchNamespacedSecret: (req: {
      body: { metadata: { annotations: Record<string, string> } };
    }): Promise<V1Secret> => {
      const annotations = req.body.metadata.annotations;
      this.patches.push(annotations);
      this.secret = {
        ...this.secret,
        metadata: {
          ...this.secret.metadata,
          annotations: { ...this.secret.metadata?.annotations, ...annotations },
        },
      };
      return Promise.resolve(this.secret);
    },
  } as unknown as Pick<CoreV1Api, 'readNamespacedSecret' | 'patchNamespacedSecret'>;
  get record() {
    return parseRenewalRecord(this.secret.metadata?.annotations?.[RENEWAL_INFO_ANNOTATION]);
  }
}

describe("AppsDomainCertificate's renewal: the CustomDomains' ARI planner (RFC 9773), its decision kept on the Secret", () => {
  let root: TestCertificate;
  let leaf: TestCertificate;
  let certId: string;
  const now = Date.now();
  beforeAll(async () => {
    root = await testRoot('Test CA');
    leaf = await testIssued(root, [`*.${APPS}`], {
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + 89 * DAY_MS),
    });
    certId = ariCertificateId(leaf.certPem);
  });

  /**
   * The decision an operator kept on the Secret for `leaf` a minute ago: renewal 41 days on, in a
   * window of days 40-42, the CA to be asked again in an hour.
   */
  const keptDecision = (lastVerifyRequest: string | undefined): string =>
    renewalRecordValue(
      {
        secretName: 'portico-apps-domain-tls',
        notBefore: leaf.cert.notBefore.toISOString(),
        notAfter: leaf.cert.notAfter.toISOString(),
        serialNumber: serialOf(leaf),
        issuer: 'CN=Test CA',
        dnsNames: [`*.${APPS}`],
        renewalTime: new Date(now + 41 * DAY_MS).toISOString(),
        ari: {
          certId,
          windowStart: new Date(now + 40 * DAY_MS).toISOString(),
          windowEnd: new Date(now + 42 * DAY_MS).toISOString(),
          checkedAt: new Date(now - 60_000).toISOString(),
          nextCheckAt: new Date(now + 3_600_000).toISOString(),
        },
      },
      lastVerifyRequest,
    );

  const planner = (dir = 'dir'): RenewalPlanner =>
    new RenewalPlanner(new AcmeDirectory(`${caBase}/${dir}`), () => 0.5);

  it("asks the CA once, renews in the middle of its window (the planner's random 0.5), and keeps the answer on the Secret with a Normal Event", async () => {
    ariWindow = {
      start: new Date(now + 40 * DAY_MS).toISOString(),
      end: new Date(now + 42 * DAY_MS).toISOString(),
    };
    asked.length = 0;
    const issuer = new ScriptedIssuer();
    const held = new SecretHolder(leaf, { 'portico.dev/acme-issuer': 'pebble' });
    const { certificate, events } = subject(issuer, 60_000, { core: held.core, renewal: planner() });
    certificate.start();
    await until('the Issued state', () => (certificate.state.reason === 'Issued' ? true : undefined));
    await certificate.stop();
    expect(asked).toEqual([`/ari/${certId}`]);
    const record = held.record;
    expect(record?.serialNumber).toBe(serialOf(leaf));
    expect(record?.ari).toMatchObject({ certId, windowStart: ariWindow.start, windowEnd: ariWindow.end });
    expect(record?.renewalTime).toBe(new Date(now + 41 * DAY_MS).toISOString());
    // Asked again after the CA's Retry-After (6 h).
    expect(Date.parse(record?.ari?.nextCheckAt ?? '') - Date.parse(record?.ari?.checkedAt ?? '')).toBe(
      21_600_000,
    );
    expect(certificate.state.ready).toBe(true);
    expect(certificate.state.message).toContain(
      `renewed from ${record?.renewalTime ?? '?'}, a time chosen in the CA's renewal window ${ariWindow.start} to ${ariWindow.end}`,
    );
    expect(events).toEqual([
      expect.objectContaining({ type: 'Normal', reason: 'RenewalScheduled', kind: 'Secret' }),
    ]);
    expect(events[0]?.message).toContain(`renewed from ${record?.renewalTime ?? '?'}`);
    expect(issuer.requests).toEqual([]);
  });

  it('after a restart, plans from the decision on the Secret: no request before its nextCheckAt, the same renewal time, nothing written', async () => {
    ariWindow = {
      start: new Date(now + 10 * DAY_MS).toISOString(),
      end: new Date(now + 11 * DAY_MS).toISOString(),
    };
    asked.length = 0;
    const kept = keptDecision(undefined);
    const held = new SecretHolder(leaf, { [RENEWAL_INFO_ANNOTATION]: kept });
    const { certificate, events } = subject(new ScriptedIssuer(), 60_000, {
      core: held.core,
      renewal: planner(),
    });
    certificate.start();
    await until('the Issued state', () => (certificate.state.reason === 'Issued' ? true : undefined));
    await certificate.stop();
    expect(asked).toEqual([]);
    expect(held.patches).toEqual([]);
    expect(events).toEqual([]);
    expect(certificate.state.message).toContain(`renewed from ${new Date(now + 41 * DAY_MS).toISOString()}`);
  });

  it('a verify request on the Secret asks at once; a window already past renews now, the order naming the old certificate in replaces (RFC 9773 §5) to the CA that issued it', async () => {
    const past = now - 3_600_000;
    ariWindow = { start: new Date(past).toISOString(), end: new Date(past + 60_000).toISOString() };
    asked.length = 0;
    const kept = keptDecision('before');
    const issuer = new ScriptedIssuer();
    const held = new SecretHolder(leaf, {
      [RENEWAL_INFO_ANNOTATION]: kept,
      'portico.dev/verify-requested-at': 'renew-now',
      'portico.dev/acme-issuer': 'pebble',
    });
    const { certificate } = subject(issuer, 60_000, { core: held.core, renewal: planner() });
    certificate.start();
    await until('a renewal order', () => issuer.issued[0]);
    await certificate.stop();
    expect(asked).toEqual([`/ari/${certId}`]);
    expect(issuer.requests[0]).toMatchObject({ kind: 'renewal', issuedBy: 'pebble' });
    expect(issuer.issued[0]?.options).toMatchObject({ replaces: certId, issuedBy: 'pebble' });
    expect(held.record).toMatchObject({ lastVerifyRequest: 'renew-now', ari: { windowEnd: ariWindow.end } });
    // The certificate held serves until the renewal is stored.
    expect(certificate.state.ready).toBe(true);
  });

  it('without ARI (a directory with no renewalInfo) renews two thirds into the validity and writes nothing', async () => {
    asked.length = 0;
    const held = new SecretHolder(leaf, {});
    const { certificate } = subject(new ScriptedIssuer(), 60_000, {
      core: held.core,
      renewal: planner('dir-no-ari'),
    });
    certificate.start();
    await until('the Issued state', () => (certificate.state.reason === 'Issued' ? true : undefined));
    await certificate.stop();
    const twoThirds = new Date(
      leaf.cert.notBefore.getTime() +
        Math.floor(((leaf.cert.notAfter.getTime() - leaf.cert.notBefore.getTime()) * 2) / 3),
    );
    expect(asked).toEqual([]);
    expect(held.patches).toEqual([]);
    expect(certificate.state.message).toContain(
      `renewed from ${twoThirds.toISOString()}, two thirds into its validity`,
    );
  });
});
