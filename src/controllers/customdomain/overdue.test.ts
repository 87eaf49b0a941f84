import { describe, expect, it } from 'vitest';
import { abandonsOrderInFlight, overdueClockStart } from './overdue.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(t0.getTime() + ms);

describe('overdueClockStart (re-verify starts a fresh attempt, and the clock with it: docs/customdomains.md, "Verify and re-verify")', () => {
  const verifiedAt = '2026-01-01T00:00:00.000Z';

  it('counts from verifiedAt, or from a later verify request acted on', () => {
    expect(overdueClockStart(verifiedAt, undefined, at(60_000))).toEqual({
      since: t0,
      byVerifyRequest: false,
    });
    expect(overdueClockStart(verifiedAt, at(30_000).toISOString(), at(60_000))).toEqual({
      since: at(30_000),
      byVerifyRequest: true,
    });
  });

  it('ignores a request before verification, one after now, and one that does not parse', () => {
    for (const request of [at(-1).toISOString(), at(60_001).toISOString(), 'yesterday'])
      expect(overdueClockStart(verifiedAt, request, at(60_000))).toEqual({
        since: t0,
        byVerifyRequest: false,
      });
  });

  it('has no clock without a verifiedAt that parses', () => {
    expect(overdueClockStart(undefined, at(1).toISOString(), at(60_000))).toBeUndefined();
    expect(overdueClockStart('not a time', undefined, at(60_000))).toBeUndefined();
  });
});

describe('abandonsOrderInFlight (docs/customdomains.md, "Issuance state")', () => {
  const overdueMs = 30 * 60_000;
  const stuck = {
    verifyRequested: true,
    hasCertificate: false,
    orderStartedAt: at(60_000),
    verifiedAt: '2026-01-01T00:00:00.000Z',
    lastVerifyRequest: undefined,
    overdueMs,
    now: at(overdueMs + 1),
  };

  it('abandons an order placed before the domain became overdue, on a verify request', () => {
    expect(abandonsOrderInFlight(stuck)).toBe(true);
    expect(abandonsOrderInFlight({ ...stuck, orderStartedAt: at(overdueMs) })).toBe(true);
  });

  it('does not without a verify request, with a certificate, or with no order in flight', () => {
    expect(abandonsOrderInFlight({ ...stuck, verifyRequested: false })).toBe(false);
    expect(abandonsOrderInFlight({ ...stuck, hasCertificate: true })).toBe(false);
    expect(abandonsOrderInFlight({ ...stuck, orderStartedAt: undefined })).toBe(false);
  });

  it('does not before the threshold, nor for an order placed after it (that one is the fresh attempt)', () => {
    expect(abandonsOrderInFlight({ ...stuck, now: at(overdueMs - 1) })).toBe(false);
    expect(abandonsOrderInFlight({ ...stuck, orderStartedAt: at(overdueMs + 1) })).toBe(false);
  });

  it('counts the threshold from the verify request acted on before this one', () => {
    const earlier = { ...stuck, lastVerifyRequest: at(10 * 60_000).toISOString() };
    expect(abandonsOrderInFlight(earlier)).toBe(false);
    expect(abandonsOrderInFlight({ ...earlier, now: at(40 * 60_000) })).toBe(true);
  });
});
