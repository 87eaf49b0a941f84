import { describe, expect, it } from 'vitest';
import type { CustomDomainStatus } from '../../api/customdomain.js';
import { isProvenStatus, withStatusProof } from './status-proof.js';

const KEY = Buffer.alloc(32, 1);
const HOST = 'www.example.com';
const condition = (type: string, status: 'True' | 'False', reason: string) => ({
  type,
  status,
  reason,
  message: 'm',
  lastTransitionTime: '2026-06-01T00:00:00Z',
});
const observed = {
  checkedAt: '2026-06-01T00:00:00Z',
  nextCheckAt: '2026-06-01T01:00:00Z',
  result: 'RecordMatches',
  message: 'm',
  records: [],
};
const certificate = {
  secretName: 'www-tls',
  notBefore: '2026-06-01T00:00:00Z',
  notAfter: '2026-08-30T00:00:00Z',
  renewalTime: '2026-07-31T00:00:00Z',
  serialNumber: '01',
  issuer: 'CN=Pebble',
  dnsNames: [HOST],
};
const status: CustomDomainStatus = {
  conditions: [condition('Accepted', 'True', 'Accepted'), condition('DNSVerified', 'True', 'RecordMatches')],
  verifiedAt: '2026-06-01T00:00:00Z',
  observed,
  certificate,
};

describe('the operator’s status proof', () => {
  const signed = withStatusProof(KEY, 'uid-1', HOST, status);

  it('holds for the status it signed, and signing again gives the same proof', () => {
    expect(isProvenStatus(KEY, 'uid-1', HOST, signed)).toBe(true);
    expect(withStatusProof(KEY, 'uid-1', HOST, signed).observed?.proof).toBe(signed.observed?.proof);
    // Messages decide nothing and are not covered.
    expect(
      isProvenStatus(KEY, 'uid-1', HOST, {
        ...signed,
        conditions: (signed.conditions ?? []).map((c) => ({ ...c, message: 'x' })),
      }),
    ).toBe(true);
  });

  it.each<[string, CustomDomainStatus]>([
    ['no proof', status],
    [
      'Accepted turned',
      {
        ...signed,
        conditions: [condition('Accepted', 'False', 'NotDeployed'), ...(signed.conditions ?? []).slice(1)],
      },
    ],
    [
      'DNSVerified turned',
      {
        ...signed,
        conditions: [
          ...(signed.conditions ?? []).slice(0, 1),
          condition('DNSVerified', 'False', 'RecordNotFound'),
        ],
      },
    ],
    ['verifiedAt added', { ...signed, verifiedAt: '2026-06-01T00:00:01Z' }],
    ['verifiedAt emptied', { ...signed, verifiedAt: '' }],
    [
      'the next check moved',
      {
        ...signed,
        observed: { ...(signed.observed ?? observed), nextCheckAt: '2027-01-01T00:00:00Z' },
      },
    ],
    [
      'a name added to the certificate',
      { ...signed, certificate: { ...certificate, dnsNames: [HOST, 'victim.example'] } },
    ],
    [
      'the certificate made to last',
      { ...signed, certificate: { ...certificate, notAfter: '2030-01-01T00:00:00Z' } },
    ],
  ])('fails for %s', (_case, changed) => {
    expect(isProvenStatus(KEY, 'uid-1', HOST, changed)).toBe(false);
  });

  it('fails for another CustomDomain (uid), another hostname, another key, and no status', () => {
    expect(isProvenStatus(KEY, 'uid-2', HOST, signed)).toBe(false);
    expect(isProvenStatus(KEY, 'uid-1', 'victim.example', signed)).toBe(false);
    expect(isProvenStatus(Buffer.alloc(32, 2), 'uid-1', HOST, signed)).toBe(false);
    expect(isProvenStatus(KEY, 'uid-1', HOST, undefined)).toBe(false);
    expect(isProvenStatus(KEY, '', HOST, signed)).toBe(false);
  });

  it('leaves a status without observed (a domain not accepted) unsigned', () => {
    const notAccepted: CustomDomainStatus = { conditions: status.conditions ?? [], certificate };
    expect(withStatusProof(KEY, 'uid-1', HOST, notAccepted)).toEqual(notAccepted);
  });
});
