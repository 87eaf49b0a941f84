import { describe, expect, it } from 'vitest';
import type { CustomDomainStatus } from '../../api/customdomain.js';
import { decideOwnership, standingOwnership } from './ownership-decision.js';

const host = 'www.example.com';
const now = new Date('2026-03-01T00:00:00Z');
const DAY = 86_400_000;

describe('standingOwnership', () => {
  it('decides a new domain now', () => {
    expect(standingOwnership(undefined, host)).toBeUndefined();
    expect(standingOwnership({ phase: 'Pending' }, host)).toBeUndefined();
  });

  it('keeps the decision made for this hostname, and decides again for another', () => {
    const status: CustomDomainStatus = {
      ownership: { hostname: host, required: true, reason: 'PolicyAlways', message: 'm' },
      verifiedAt: now.toISOString(),
    };
    expect(standingOwnership(status, host)).toBe(status.ownership);
    expect(standingOwnership(status, 'shop.example.com')).toBeUndefined();
  });

  it('does not ask a domain verified before ownership verification existed', () => {
    expect(standingOwnership({ verifiedAt: now.toISOString() }, host)).toMatchObject({
      hostname: host,
      required: false,
      reason: 'VerifiedBefore',
    });
  });
});

describe('decideOwnership', () => {
  it('requires the record of a hostname another project released recently', () => {
    const release = { namespace: 'tenant-a', releasedAt: new Date(now.getTime() - DAY) };
    expect(decideOwnership(host, 'tenant-b', 'recently-claimed', release, 30 * DAY, now)).toMatchObject({
      hostname: host,
      required: true,
      reason: 'RecentlyClaimed',
    });
    expect(decideOwnership(host, 'tenant-a', 'recently-claimed', release, 30 * DAY, now).required).toBe(
      false,
    );
  });
});
