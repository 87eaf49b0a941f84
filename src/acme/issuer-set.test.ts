import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { IssueOptions, IssuedCertificate } from './issuer.js';
import { AcmeIssuerSet, type IssuerMember } from './issuer-set.js';
import { OrderQueue } from './order-queue.js';
import { serverErrorOf } from './server-error.js';

const log = pino({ level: 'silent' });
const NOW = new Date('2026-11-27T12:00:00Z');
const POLICY = { failuresBeforeFailover: 1, longRetryAfterMs: 600_000, passOverMs: 300_000 };

/**
 * An issuer that answers each order as `answers` says (a function of the hostname), recording the
 * options it was given. The set's own logic (which CA, which line, what is passed on) is under
 * test; the real CAs are in test/e2e/acme-failover.test.ts.
 */
function member(name: string, fails: (hostname: string) => boolean, maxInFlight = 10) {
  const calls: { hostname: string; options: IssueOptions | undefined }[] = [];
  const queue = new OrderQueue(
    { limits: { accountOrders: { limit: 100, windowMs: 3_600_000 }, maxInFlight } },
    () => {},
    () => NOW,
  );
  const m: IssuerMember = {
    name,
    issuer: {
      issue(hostname: string, _log: unknown, options?: IssueOptions): Promise<IssuedCertificate> {
        calls.push({ hostname, options });
        if (fails(hostname))
          return Promise.reject(serverErrorOf('post', 503, 'down') ?? new Error('no error'));
        return Promise.resolve({ certificatePem: 'pem', privateKeyPem: 'key', orderUrl: `${name}/order` });
      },
      abandonedCalls: () => 0,
    },
    queue,
  };
  return { member: m, calls, queue };
}

function request(key: string, issuedBy?: string) {
  const hostname = `${key.replace('/', '.')}.example`;
  return {
    key,
    tenant: key.split('/')[0] ?? '',
    hostname,
    registeredDomain: hostname,
    kind: 'first-issuance' as const,
    queuedAt: NOW,
    issuedBy,
  };
}

describe('AcmeIssuerSet', () => {
  it('orders from the first issuer, names it, and moves the next orders on once it is passed over', async () => {
    const a = member('a', () => true);
    const b = member('b', () => false);
    const set = new AcmeIssuerSet([a.member, b.member], POLICY, () => NOW);
    expect(set.request(request('t/one'), NOW).admitted).toBe(true);
    await expect(set.issue('one.t.example', log)).rejects.toThrow('HTTP 503');
    set.settled('t/one', 'failed-other', NOW);
    expect(a.calls).toHaveLength(1);
    expect(set.health('a').passedOverUntilMs).toBe(NOW.getTime() + 300_000);

    expect(set.request(request('t/two'), NOW).admitted).toBe(true);
    const issued = await set.issue('two.t.example', log);
    expect(issued.acmeIssuer).toBe('b');
    expect(b.calls.map((c) => c.hostname)).toEqual(['two.t.example']);
    set.settled('t/two', 'valid', NOW);
  });

  it('moves a domain waiting in a passed-over issuer’s line to the next issuer’s', async () => {
    const a = member('a', () => true, 1);
    const b = member('b', () => false);
    const set = new AcmeIssuerSet([a.member, b.member], POLICY, () => NOW);
    expect(set.request(request('t/one'), NOW).admitted).toBe(true);
    expect(set.request(request('t/two'), NOW).admitted).toBe(false);
    expect(a.queue.budget.snapshot(NOW).waiting.firstIssuance).toBe(1);
    await expect(set.issue('one.t.example', log)).rejects.toThrow();
    set.settled('t/one', 'failed-other', NOW);
    expect(set.request(request('t/two'), NOW).admitted).toBe(true);
    expect((await set.issue('two.t.example', log)).acmeIssuer).toBe('b');
    expect(a.calls.map((c) => c.hostname)).toEqual(['one.t.example']);
  });

  it('renews at the issuing CA first with replaces, and elsewhere without it', async () => {
    const a = member('a', () => false);
    const b = member('b', () => false);
    const set = new AcmeIssuerSet([a.member, b.member], POLICY, () => NOW);
    set.request(request('t/one', 'b'), NOW);
    expect((await set.issue('one.t.example', log, { replaces: 'ari-1', issuedBy: 'b' })).acmeIssuer).toBe(
      'b',
    );
    expect(b.calls[0]?.options?.replaces).toBe('ari-1');
    set.settled('t/one', 'valid', NOW);

    // A certificate from an issuer no longer configured: the first in order, without replaces.
    set.request(request('t/two', 'retired'), NOW);
    expect(
      (await set.issue('two.t.example', log, { replaces: 'ari-2', issuedBy: 'retired' })).acmeIssuer,
    ).toBe('a');
    expect(a.calls[0]?.options?.replaces).toBeUndefined();
  });

  it('refuses an empty list and a name used twice', () => {
    expect(() => new AcmeIssuerSet([], POLICY)).toThrow('no ACME issuer is configured');
    const a = member('a', () => false);
    expect(() => new AcmeIssuerSet([a.member, a.member], POLICY)).toThrow('unique');
  });
});
