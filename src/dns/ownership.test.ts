import { describe, expect, it } from 'vitest';
import {
  ownershipRecord,
  ownershipRequirement,
  ownershipToken,
  verifyOwnership,
  withOwnership,
} from './ownership.js';
import { PROPAGATION_NOTE, type Verdict } from './verdict.js';

const key = Buffer.alloc(32, 7);
const otherKey = Buffer.alloc(32, 8);
const host = 'www.example.com';
const DAY = 86_400_000;
const now = new Date('2026-03-01T00:00:00Z');

describe('ownershipToken', () => {
  it('is stable for one uid and hostname, and differs with the uid, the hostname or the key', () => {
    const token = ownershipToken(key, 'uid-1', host);
    expect(token).toBe(ownershipToken(key, 'uid-1', host));
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(ownershipToken(key, 'uid-2', host)).not.toBe(token);
    expect(ownershipToken(key, 'uid-1', 'shop.example.com')).not.toBe(token);
    expect(ownershipToken(otherKey, 'uid-1', host)).not.toBe(token);
  });

  it('refuses a short key and an empty uid', () => {
    expect(() => ownershipToken(Buffer.alloc(16), 'uid-1', host)).toThrow(RangeError);
    expect(() => ownershipToken(key, '', host)).toThrow(/uid/);
  });
});

describe('verifyOwnership', () => {
  const token = ownershipToken(key, 'uid-1', host);
  const value = `portico-verification=${token}`;

  it('names the record under _portico-challenge', () => {
    expect(ownershipRecord(host, token)).toMatchObject({
      type: 'TXT',
      name: `_portico-challenge.${host}`,
      relativeName: '_portico-challenge.www',
      zone: 'example.com',
      value,
      ttl: 3600,
    });
    expect(ownershipRecord('example.co.uk', token)).toMatchObject({
      relativeName: '_portico-challenge',
      zone: 'example.co.uk',
    });
  });

  it('is shown by the exact value, beside other TXT records', () => {
    expect(verifyOwnership(host, token, { kind: 'records', values: ['v=spf1 -all', value] })).toEqual({
      shown: true,
    });
  });

  it("is not shown by another token (a former holder's record), and says which record to create", () => {
    const former = `portico-verification=${ownershipToken(key, 'uid-0', host)}`;
    const v = verifyOwnership(host, token, { kind: 'records', values: [former] });
    expect(v).toMatchObject({ shown: false, transient: false });
    if (!v.shown) expect(v.message).toContain(`TXT _portico-challenge.${host} with the value "${value}"`);
    expect(verifyOwnership(host, token, { kind: 'nxdomain' })).toMatchObject({
      shown: false,
      transient: false,
    });
  });

  it('is transient when the lookup fails', () => {
    expect(verifyOwnership(host, token, { kind: 'servfail' })).toMatchObject({
      shown: false,
      transient: true,
    });
  });
});

describe('withOwnership', () => {
  const matching: Verdict = {
    verified: true,
    reason: 'RecordMatches',
    message: 'Found CNAME.',
    records: [],
    transient: false,
  };
  const missing = { shown: false, transient: false, message: 'Ownership not shown: create TXT x.' } as const;

  it('turns a matching record into OwnershipNotVerified while the TXT record is missing', () => {
    const v = withOwnership(matching, missing);
    expect(v).toMatchObject({ verified: false, reason: 'OwnershipNotVerified', transient: false });
    expect(v.message).toContain('create TXT x');
  });

  it('keeps an unverified verdict and adds the TXT record to its message, the propagation note last', () => {
    const notFound = `No CNAME: create it. ${PROPAGATION_NOTE}`;
    const v = withOwnership(
      { ...matching, verified: false, reason: 'RecordNotFound', message: notFound },
      missing,
    );
    expect(v.reason).toBe('RecordNotFound');
    expect(v.message).toBe(`No CNAME: create it. Ownership not shown: create TXT x. ${PROPAGATION_NOTE}`);
  });

  it('says that DNS changes can take up to 48 hours, also when the TXT lookup failed', () => {
    const failed = { shown: false, transient: true, message: 'The lookup failed.' } as const;
    expect(withOwnership(matching, failed).message).toContain(PROPAGATION_NOTE);
    expect(withOwnership(matching, missing).message).toContain(PROPAGATION_NOTE);
  });

  it('leaves the verdict alone once shown', () => {
    expect(withOwnership(matching, { shown: true })).toBe(matching);
  });
});

describe('ownershipRequirement', () => {
  /** A release by namespace `name` (uid `uid-<name>` unless given; null: none), `daysAgo` days before now. */
  const release = (name: string, daysAgo: number, uid: string | null = `uid-${name}`) => ({
    namespace: name,
    ...(uid === null ? {} : { namespaceUid: uid }),
    releasedAt: new Date(now.getTime() - daysAgo * DAY),
  });
  /** A claimant's namespace (uid `uid-<name>` unless given; null: not known). */
  const ns = (name: string, uid: string | null = `uid-${name}`) => ({ name, uid: uid ?? undefined });

  it('always and never ignore history', () => {
    expect(ownershipRequirement('always', ns('b'), undefined, 30 * DAY, now).required).toBe(true);
    expect(ownershipRequirement('never', ns('b'), release('a', 1), 30 * DAY, now).required).toBe(false);
  });

  it('recently-claimed: only a release by another project within the window', () => {
    expect(ownershipRequirement('recently-claimed', ns('b'), undefined, 30 * DAY, now)).toMatchObject({
      required: false,
      reason: 'NotRecentlyClaimed',
    });
    expect(ownershipRequirement('recently-claimed', ns('b'), release('a', 29), 30 * DAY, now)).toMatchObject({
      required: true,
      reason: 'RecentlyClaimed',
    });
    expect(ownershipRequirement('recently-claimed', ns('b'), release('a', 31), 30 * DAY, now).required).toBe(
      false,
    );
    expect(ownershipRequirement('recently-claimed', ns('a'), release('a', 1), 30 * DAY, now).required).toBe(
      false,
    );
  });

  it.each([
    ['a namespace of the same name created again (another uid)', ns('a', 'uid-new'), release('a', 1)],
    ['a record written before records kept the uid', ns('a'), release('a', 1, null)],
    ['a claimant whose namespace uid is not known', ns('a', null), release('a', 1)],
    ['a record with an empty uid, and a claimant with none', ns('a', ''), release('a', 1, '')],
  ])('recently-claimed: the record is asked for from %s', (_case, claimant, released) => {
    expect(ownershipRequirement('recently-claimed', claimant, released, 30 * DAY, now)).toMatchObject({
      required: true,
      reason: 'RecentlyClaimed',
    });
  });
});
