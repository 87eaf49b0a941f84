import type { KubernetesObjectApi, V1Secret } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CaaForbidsIssuanceError, type IssueOptions } from '../../acme/issuer.js';
import type { IssuerOrderRequest } from '../../acme/issuer-set.js';
import type { OrderDecision, OrderOutcome } from '../../acme/order-decision.js';
import { AppsDomainCertificate, type AppsCertificateIssuer } from './apps-certificate.js';

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

function subject(issuer: ScriptedIssuer, firstRetryMs: number) {
  const events: { type: string; reason: string; message: string; kind: string }[] = [];
  const certificate = new AppsDomainCertificate({
    appsDomain: APPS,
    secret: { namespace: 'portico-system', name: 'portico-apps-domain-tls' },
    core: {
      readNamespacedSecret: (): Promise<V1Secret> =>
        Promise.reject(Object.assign(new Error('not found'), { code: 404 })),
    },
    objects: {} as KubernetesObjectApi,
    issuer,
    dns01: { publishTxt: () => Promise.resolve(), withdrawTxt: () => Promise.resolve() },
    firstRetryMs,
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
