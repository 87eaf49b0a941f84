import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../../api/customdomain.js';
import type { ServingChecker } from '../../../serving/checker.js';
import type { CertificateState, RoutingState } from '../status.js';
import { serving } from './serving.js';

const domain = {
  metadata: { namespace: 'shop', name: 'www', uid: 'u1' },
  spec: { hostname: 'WWW.Example.com.' },
} as unknown as CustomDomain;
const now = new Date('2026-01-01T00:00:00.000Z');
const log = pino({ level: 'silent' });
const valid: CertificateState = {
  kind: 'valid',
  certificate: {
    secretName: 'www-tls',
    notBefore: '2025-12-01T00:00:00.000Z',
    notAfter: '2026-03-01T00:00:00.000Z',
    renewalTime: '2026-02-01T00:00:00.000Z',
    serialNumber: 'AB',
    issuer: 'CN=Pebble',
    dnsNames: ['www.example.com'],
  },
};
const routed: RoutingState = { kind: 'routed', message: 'Routed.', confirmed: true };

/** A checker that records what it was asked and answers Live, next check in a minute. */
function checker() {
  const asked: unknown[] = [];
  const c = {
    observe: (subject: unknown) => {
      asked.push(subject);
      return Promise.resolve({
        readiness: { status: 'True', reason: 'Live', message: 'serves' },
        nextCheckAt: new Date(now.getTime() + 60_000),
      });
    },
  } as unknown as ServingChecker;
  return { asked, c };
}

describe('serving phase', () => {
  it('asks nothing while the check is off, DNS unverified, no valid certificate, or not routed', async () => {
    const { asked, c } = checker();
    const cases: [ServingChecker | undefined, boolean, CertificateState, RoutingState][] = [
      [undefined, true, valid, routed],
      [c, false, valid, routed],
      [c, true, { kind: 'not-requested' }, routed],
      [c, true, valid, { kind: 'not-routed', reason: 'AwaitingDataPlane', message: '' }],
    ];
    for (const [ch, verified, certificate, routing] of cases)
      expect(await serving(ch, domain, 'shop/www', { verified, certificate, routing }, now, log)).toEqual({
        observed: {},
      });
    expect(asked).toEqual([]);
  });

  it('asks for the normalized hostname and serial, and looks again when the next check is due', async () => {
    const { asked, c } = checker();
    const seen = await serving(
      c,
      domain,
      'shop/www',
      { verified: true, certificate: valid, routing: routed },
      now,
      log,
    );
    expect(seen).toEqual({
      observed: { serving: { status: 'True', reason: 'Live', message: 'serves' } },
      requeueAfterMs: 60_000,
    });
    expect(asked).toMatchObject([
      { key: 'shop/www', uid: 'u1', hostname: 'www.example.com', serialNumber: 'AB' },
    ]);
  });
});
