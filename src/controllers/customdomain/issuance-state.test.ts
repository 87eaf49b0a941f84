import { describe, expect, it } from 'vitest';
import type { IssuanceOutcome } from '../../acme/issuance-tracker.js';
import type { IssuanceStatus } from '../../api/customdomain.js';
import { issuanceStatus, lastIssuanceFailure, pendingRetry } from './issuance-state.js';
import type { CertificateState } from './status.js';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(t0.getTime() + ms);

const failedTwice: IssuanceOutcome = {
  state: 'failed',
  finishedAt: t0,
  message: 'urn:ietf:params:acme:error:serverInternal: the CA failed',
  reason: 'IssuanceFailed',
  failures: 2,
};

const recorded: IssuanceStatus = {
  failedAttempts: 3,
  lastFailureTime: '2026-01-01T00:00:00.000Z',
  lastFailureReason: 'CARateLimited',
  lastFailureMessage: 'too many new orders recently',
  nextAttemptTime: '2026-01-01T00:10:00.000Z',
  retryAfter: '2026-01-01T00:10:00.000Z',
};

const certificate = {
  secretName: 'www-tls',
  notBefore: '2026-01-01T00:00:00.000Z',
  notAfter: '2026-04-01T00:00:00.000Z',
  renewalTime: '2026-03-01T00:00:00.000Z',
  serialNumber: 'AB',
  issuer: 'CN=Pebble',
  dnsNames: ['www.example.com'],
};

describe('lastIssuanceFailure', () => {
  it('takes a failure in memory, with the published backoff after it (2 failures: 2 minutes)', () => {
    const failure = lastIssuanceFailure(failedTwice, recorded, false);
    expect(failure).toEqual({
      failedAttempts: 2,
      lastFailureTime: t0,
      reason: 'IssuanceFailed',
      message: failedTwice.state === 'failed' ? failedTwice.message : '',
      nextAttemptTime: at(2 * 60_000),
    });
  });

  it("never places the next attempt before the CA's Retry-After when it is later than the backoff", () => {
    const limited: IssuanceOutcome = { ...failedTwice, failures: 1, retryAfter: at(15 * 60_000) };
    const failure = lastIssuanceFailure(limited, undefined, false);
    expect(failure?.nextAttemptTime).toEqual(at(15 * 60_000));
    expect(failure?.retryAfter).toEqual(at(15 * 60_000));
    // A Retry-After sooner than the backoff does not shorten it.
    const soon: IssuanceOutcome = { ...failedTwice, failures: 1, retryAfter: at(10_000) };
    expect(lastIssuanceFailure(soon, undefined, false)?.nextAttemptTime).toEqual(at(60_000));
  });

  it('resumes from status when memory has no outcome (a restarted operator, a new leader)', () => {
    expect(lastIssuanceFailure(undefined, recorded, false)).toEqual({
      failedAttempts: 3,
      lastFailureTime: t0,
      reason: 'CARateLimited',
      message: 'too many new orders recently',
      nextAttemptTime: at(10 * 60_000),
      retryAfter: at(10 * 60_000),
    });
  });

  it('prefers memory to status, which may lag it by one write', () => {
    expect(lastIssuanceFailure(failedTwice, recorded, false)?.failedAttempts).toBe(2);
    expect(lastIssuanceFailure({ state: 'succeeded', finishedAt: t0 }, recorded, false)).toBeUndefined();
  });

  it('forgets both on a re-verify (a fresh attempt now: docs/customdomains.md, "Verify and re-verify")', () => {
    expect(lastIssuanceFailure(undefined, recorded, true)).toBeUndefined();
  });

  it('holds to the recorded Retry-After even when nextAttemptTime was written before it', () => {
    const edited = { ...recorded, nextAttemptTime: '2026-01-01T00:01:00.000Z' };
    expect(lastIssuanceFailure(undefined, edited, false)?.nextAttemptTime).toEqual(at(10 * 60_000));
  });

  it('ignores a record whose times do not parse, and counts at least one attempt', () => {
    expect(lastIssuanceFailure(undefined, { ...recorded, nextAttemptTime: 'soon' }, false)).toBeUndefined();
    expect(lastIssuanceFailure(undefined, { ...recorded, lastFailureTime: '' }, false)).toBeUndefined();
    const noRetryAfter: IssuanceStatus = {
      failedAttempts: 0,
      lastFailureTime: recorded.lastFailureTime,
      lastFailureReason: 'IssuanceFailed',
      nextAttemptTime: '2026-01-01T00:01:00.000Z',
    };
    const failure = lastIssuanceFailure(undefined, noRetryAfter, false);
    expect(failure).toMatchObject({ failedAttempts: 1, message: '', nextAttemptTime: at(60_000) });
    expect(failure && 'retryAfter' in failure).toBe(false);
  });
});

describe('pendingRetry', () => {
  const failure = lastIssuanceFailure(undefined, recorded, false);

  it('holds the next attempt until the recorded time, and lets it go at that time', () => {
    expect(pendingRetry(failure, at(10 * 60_000 - 1))).toEqual({
      reason: 'CARateLimited',
      message: 'too many new orders recently',
      retryAt: at(10 * 60_000),
    });
    expect(pendingRetry(failure, at(10 * 60_000))).toBeUndefined();
    expect(pendingRetry(undefined, t0)).toBeUndefined();
  });
});

describe('issuanceStatus', () => {
  const failure = lastIssuanceFailure(failedTwice, undefined, false);
  const failedState: CertificateState = {
    kind: 'failed',
    reason: 'IssuanceFailed',
    message: 'boom',
    retryAt: at(2 * 60_000),
  };

  it('writes the failure with RFC 3339 times', () => {
    expect(issuanceStatus(failure, failedState)).toEqual({
      failedAttempts: 2,
      lastFailureTime: '2026-01-01T00:00:00.000Z',
      lastFailureReason: 'IssuanceFailed',
      lastFailureMessage: 'urn:ietf:params:acme:error:serverInternal: the CA failed',
      nextAttemptTime: '2026-01-01T00:02:00.000Z',
    });
  });

  it('round-trips through status: what is written is what a restarted operator resumes from', () => {
    const limited: IssuanceOutcome = { ...failedTwice, failures: 1, retryAfter: at(15 * 60_000) };
    const before = lastIssuanceFailure(limited, undefined, false);
    const written = issuanceStatus(before, failedState);
    expect(lastIssuanceFailure(undefined, written, false)).toEqual(before);
  });

  it('keeps the count while the next attempt runs or waits, and during a renewal', () => {
    expect(issuanceStatus(failure, { kind: 'issuing', since: at(3 * 60_000) })).toBeDefined();
    expect(issuanceStatus(failure, { kind: 'not-requested' })).toBeDefined();
    const renewing: CertificateState = {
      kind: 'valid',
      certificate,
      renewal: { kind: 'in-progress', since: at(60_000) },
    };
    expect(issuanceStatus(failure, renewing)).toBeDefined();
  });

  it('is removed when there is no failure, or a certificate serves with no renewal under way', () => {
    expect(issuanceStatus(undefined, failedState)).toBeUndefined();
    expect(issuanceStatus(failure, { kind: 'valid', certificate })).toBeUndefined();
  });
});
