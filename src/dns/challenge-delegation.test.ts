import { describe, expect, it } from 'vitest';
import {
  acmeChallengeName,
  delegationStatus,
  delegationTarget,
  delegationVerdict,
  recordedDelegation,
  type DelegationVerdict,
} from './challenge-delegation.js';

const ZONE = 'acme-challenges.example.net';

describe('delegationTarget', () => {
  it('is 32 hex characters of SHA-256("<namespace>/<hostname>") under the zone', () => {
    // sha256("shop/www.example.com") computed with `printf 'shop/www.example.com' | sha256sum`.
    expect(delegationTarget(`${ZONE}.`, 'shop', 'www.example.com')).toBe(
      `c7eb670a80b02eaca845cdd5d4f39e25.${ZONE}`,
    );
  });

  it('is the same for the same namespace and hostname, different across namespaces and hostnames', () => {
    const a = delegationTarget(ZONE, 'shop', 'www.example.com');
    expect(delegationTarget(ZONE.toUpperCase(), 'shop', 'www.example.com')).toBe(a);
    expect(delegationTarget(ZONE, 'other', 'www.example.com')).not.toBe(a);
    expect(delegationTarget(ZONE, 'shop', 'api.example.com')).not.toBe(a);
  });
});

describe('delegationVerdict', () => {
  const target = delegationTarget(ZONE, 'shop', 'www.example.com');

  it.each([
    ['the target', { kind: 'records', values: [target] }, { kind: 'delegated' }],
    [
      'the target in capitals with a trailing dot',
      { kind: 'records', values: [`${target.toUpperCase()}.`] },
      { kind: 'delegated' },
    ],
    [
      'another name',
      { kind: 'records', values: ['x.dcv.other-cdn.net'] },
      { kind: 'pointsElsewhere', target: 'x.dcv.other-cdn.net' },
    ],
    ['NXDOMAIN', { kind: 'nxdomain' }, { kind: 'absent' }],
    ['no data', { kind: 'nodata' }, { kind: 'absent' }],
    ['SERVFAIL', { kind: 'servfail' }, { kind: 'unknown', answer: 'servfail' }],
    ['a timeout', { kind: 'timeout' }, { kind: 'unknown', answer: 'timeout' }],
  ] as const)('a CNAME answer of %s', (_label, answer, verdict) => {
    expect(delegationVerdict(answer as Parameters<typeof delegationVerdict>[0], target)).toEqual(verdict);
  });

  it('names the record where the CA looks (RFC 8555 §8.4)', () => {
    expect(acmeChallengeName('www.example.com')).toBe('_acme-challenge.www.example.com');
  });
});

describe('delegationStatus and recordedDelegation', () => {
  const target = `c7eb670a80b02eaca845cdd5d4f39e25.${ZONE}`;
  it.each([
    [{ kind: 'delegated' }, { result: 'Delegated', target }],
    [{ kind: 'absent' }, { result: 'Absent', target }],
    [
      { kind: 'pointsElsewhere', target: 'x.other.net' },
      { result: 'PointsElsewhere', target, found: 'x.other.net' },
    ],
    [
      { kind: 'unknown', answer: 'servfail' },
      { result: 'Unknown', target, found: 'servfail' },
    ],
  ] as const)('records %o as status and reads it back', (verdict, status) => {
    expect(delegationStatus(verdict as DelegationVerdict, target)).toEqual(status);
    expect(recordedDelegation(status, target)).toEqual(verdict);
  });

  it('reads no verdict from a status made for another target (another namespace or zone)', () => {
    expect(recordedDelegation({ result: 'Delegated', target: `other.${ZONE}` }, target)).toBeUndefined();
    expect(recordedDelegation(undefined, target)).toBeUndefined();
  });
});
