import { describe, expect, it } from 'vitest';
import type { CustomDomainStatus, OwnershipStatus } from '../../api/customdomain.js';
import { isOwnershipProof, ownershipProof } from '../../dns/ownership.js';
import { decideOwnership, standingOwnership } from './ownership-decision.js';

const host = 'www.example.com';
const now = new Date('2026-03-01T00:00:00Z');
const DAY = 86_400_000;

describe('standingOwnership', () => {
  const key = Buffer.alloc(32, 7);
  const uid = 'uid-1';
  const genuine = (o: OwnershipStatus): boolean => isOwnershipProof(key, uid, o, o.proof);
  const signed = (o: OwnershipStatus): OwnershipStatus => ({ ...o, proof: ownershipProof(key, uid, o) });

  it('decides a new domain now', () => {
    expect(standingOwnership(undefined, host, genuine)).toBeUndefined();
    expect(standingOwnership({ phase: 'Pending' }, host, genuine)).toBeUndefined();
  });

  it('keeps the decision the operator made for this hostname, and decides again for another', () => {
    const status: CustomDomainStatus = {
      ownership: signed({ hostname: host, required: true, reason: 'PolicyAlways', message: 'm' }),
      verifiedAt: now.toISOString(),
    };
    expect(standingOwnership(status, host, genuine)).toBe(status.ownership);
    expect(standingOwnership(status, 'shop.example.com', genuine)).toBeUndefined();
  });

  it('counts no decision without the proof of this key and this CustomDomain: written by someone else, changed, or of another domain', () => {
    const real = signed({ hostname: host, required: true, reason: 'PolicyAlways', message: 'm' });
    const forged = [
      { hostname: host, required: false, reason: 'PolicyNever', message: 'm' },
      { ...real, required: false },
      { ...real, verifiedAt: now.toISOString() },
      { ...real, proof: ownershipProof(key, 'uid-2', real) },
      { ...real, proof: ownershipProof(Buffer.alloc(32, 8), uid, real) },
      { ...real, proof: 'x' },
    ];
    for (const ownership of forged)
      expect(standingOwnership({ ownership }, host, genuine), JSON.stringify(ownership)).toBeUndefined();
  });

  it('does not take a verifiedAt alone as a decision (formerly VerifiedBefore)', () => {
    expect(standingOwnership({ verifiedAt: now.toISOString() }, host, genuine)).toBeUndefined();
  });
});

describe('decideOwnership', () => {
  it('requires the record of a hostname another project released recently', () => {
    const release = {
      namespace: 'tenant-a',
      namespaceUid: 'uid-a',
      releasedAt: new Date(now.getTime() - DAY),
    };
    expect(
      decideOwnership(host, { name: 'tenant-b', uid: 'uid-b' }, 'recently-claimed', release, 30 * DAY, now),
    ).toMatchObject({
      hostname: host,
      required: true,
      reason: 'RecentlyClaimed',
    });
    expect(
      decideOwnership(host, { name: 'tenant-a', uid: 'uid-a' }, 'recently-claimed', release, 30 * DAY, now)
        .required,
    ).toBe(false);
    // The same name, created again for someone else: another project.
    expect(
      decideOwnership(host, { name: 'tenant-a', uid: 'uid-a2' }, 'recently-claimed', release, 30 * DAY, now)
        .required,
    ).toBe(true);
  });
});
