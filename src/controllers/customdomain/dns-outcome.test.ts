import { describe, expect, it } from 'vitest';
import type { CustomDomainStatus } from '../../api/customdomain.js';
import type { Verdict } from '../../dns/verdict.js';
import { freshDnsOutcome } from './dns-outcome.js';

const t0 = new Date('2026-01-01T00:00:00Z');
const at = (seconds: number) => new Date(t0.getTime() + seconds * 1000);
const base = { dnsRecords: [], lastVerifyRequest: undefined };
const GRACE_MS = 600_000;

const matches: Verdict = {
  verified: true,
  reason: 'RecordMatches',
  message: 'CNAME www.example.com -> sites.example.net matches.',
  records: [{ type: 'CNAME', name: 'www.example.com', value: 'sites.example.net' }],
  transient: false,
};
const timeout: Verdict = {
  verified: false,
  reason: 'DNSTimeout',
  message: 'No DNS answer for www.example.com in time.',
  records: [],
  transient: true,
};
const missing: Verdict = {
  verified: false,
  reason: 'RecordNotFound',
  message: 'www.example.com has no CNAME record.',
  records: [],
  transient: false,
};

/** The status a domain has after a check at `now` that gave `verdict`, from `previous`. */
function after(previous: CustomDomainStatus | undefined, verdict: Verdict, now: Date): CustomDomainStatus {
  const outcome = freshDnsOutcome(verdict, previous, base, now, GRACE_MS);
  const old = previous?.conditions?.find((c) => c.type === 'DNSVerified');
  const flipped = !old || old.status !== outcome.condition.status;
  return {
    ...outcome.carried,
    conditions: [
      {
        ...outcome.condition,
        status: outcome.condition.status,
        lastTransitionTime: flipped ? now.toISOString() : (old?.lastTransitionTime ?? ''),
      },
    ],
  };
}

const condition = (status: CustomDomainStatus) => status.conditions?.find((c) => c.type === 'DNSVerified');

describe('a verified domain and DNS answers that do not confirm it (docs/customdomains.md, "DNS faults on a verified domain")', () => {
  const verified = after(undefined, matches, t0);

  it('stays verified through resolver failures however long they last, without a new reason', () => {
    let status = verified;
    for (let s = 15; s <= 24 * 3600; s += 15 * 60) status = after(status, timeout, at(s));
    const c = condition(status);
    expect(c?.status).toBe('True');
    expect(c?.reason).toBe('RecordMatches');
    expect(c?.message).toContain('the latest check failed (DNSTimeout');
    expect(status.observed?.result).toBe('DNSTimeout');
    expect(status.observed?.failingSince).toBeUndefined();
    expect(status.verifiedAt).toBe(t0.toISOString());
    expect(
      Date.parse(status.observed?.nextCheckAt ?? '') - Date.parse(status.observed?.checkedAt ?? ''),
    ).toBe(15_000);
  });

  it('stays verified for the grace period after a definite mismatch, then is unverified', () => {
    const first = after(verified, missing, at(100));
    expect(condition(first)?.status).toBe('True');
    expect(first.observed?.failingSince).toBe(at(100).toISOString());
    expect(condition(first)?.message).toContain(`stands until ${at(100 + GRACE_MS / 1000).toISOString()}`);
    // Re-checked every minute while the grace lasts; the message stays the same (no churn).
    expect(Date.parse(first.observed?.nextCheckAt ?? '')).toBe(at(160).getTime());
    const later = after(first, missing, at(160 + 300));
    expect(condition(later)?.status).toBe('True');
    expect(condition(later)?.message).toBe(condition(first)?.message);
    expect(later.observed?.failingSince).toBe(at(100).toISOString());
    // The last check of the grace is scheduled at its end, not past it.
    const near = after(later, missing, at(100 + GRACE_MS / 1000 - 20));
    expect(Date.parse(near.observed?.nextCheckAt ?? '')).toBe(at(100 + GRACE_MS / 1000).getTime());
    const over = after(near, missing, at(100 + GRACE_MS / 1000));
    expect(condition(over)?.status).toBe('False');
    expect(condition(over)?.reason).toBe('RecordNotFound');
  });

  it('does not start or end the grace on a resolver failure, and forgets it once DNS matches again', () => {
    const mismatch = after(verified, missing, at(100));
    const outage = after(mismatch, timeout, at(200));
    expect(condition(outage)?.status).toBe('True');
    expect(outage.observed?.failingSince).toBe(at(100).toISOString());
    const fixed = after(outage, matches, at(300));
    expect(condition(fixed)?.status).toBe('True');
    expect(condition(fixed)?.message).toBe(matches.message);
    expect(fixed.observed?.failingSince).toBeUndefined();
    // A new mismatch starts a new grace period.
    const again = after(fixed, missing, at(5000));
    expect(again.observed?.failingSince).toBe(at(5000).toISOString());
    expect(condition(again)?.status).toBe('True');
  });

  it('with no grace, a definite mismatch unverifies at once and a resolver failure still does not', () => {
    const none = (previous: CustomDomainStatus, verdict: Verdict, now: Date) =>
      freshDnsOutcome(verdict, previous, base, now, 0).condition.status;
    expect(none(verified, missing, at(10))).toBe('False');
    expect(none(verified, timeout, at(10))).toBe('True');
  });

  it('leaves an unverified domain unverified on a resolver failure', () => {
    const waiting = after(undefined, missing, t0);
    const outage = after(waiting, timeout, at(30));
    expect(condition(outage)?.status).toBe('False');
    expect(condition(outage)?.reason).toBe('DNSTimeout');
  });
});

describe('a dangling record (docs/customdomains.md, "Dangling records")', () => {
  const DANGLING_MS = 3_600_000;
  const step = (previous: CustomDomainStatus | undefined, verdict: Verdict, now: Date) => {
    const outcome = freshDnsOutcome(verdict, previous, base, now, GRACE_MS, DANGLING_MS);
    const old = previous?.conditions?.find((c) => c.type === 'DNSVerified');
    const flipped = !old || old.status !== outcome.condition.status;
    return {
      ...outcome.carried,
      conditions: [
        {
          ...outcome.condition,
          lastTransitionTime: flipped ? now.toISOString() : (old?.lastTransitionTime ?? ''),
        },
      ],
    } as CustomDomainStatus;
  };
  const verified = step(undefined, matches, t0);

  it('keeps failingSince past the grace period and reports DanglingRecord once it is old enough', () => {
    const first = step(verified, missing, at(100));
    const unverified = step(first, missing, at(100 + GRACE_MS / 1000));
    expect(condition(unverified)).toMatchObject({ status: 'False', reason: 'RecordNotFound' });
    expect(unverified.observed?.failingSince).toBe(at(100).toISOString());
    const dangling = step(unverified, missing, at(100 + DANGLING_MS / 1000));
    expect(condition(dangling)).toMatchObject({ status: 'False', reason: 'DanglingRecord' });
    expect(condition(dangling)?.message).toContain(`since ${at(100).toISOString()}`);
    expect(condition(dangling)?.message).toContain('delete this CustomDomain');
    // A resolver failure keeps the report; a matching answer ends it.
    const outage = step(dangling, timeout, at(100 + DANGLING_MS / 1000 + 60));
    expect(condition(outage)?.reason).toBe('DanglingRecord');
    const restored = step(outage, matches, at(100 + DANGLING_MS / 1000 + 120));
    expect(condition(restored)).toMatchObject({ status: 'True', reason: 'RecordMatches' });
    expect(restored.observed?.failingSince).toBeUndefined();
  });

  it('never reports a domain that was never verified', () => {
    let status = step(undefined, missing, t0);
    status = step(status, missing, at(DANGLING_MS / 1000 + 10));
    expect(condition(status)?.reason).toBe('RecordNotFound');
    expect(status.observed?.failingSince).toBeUndefined();
  });
});
