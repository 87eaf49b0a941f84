import { describe, expect, it } from 'vitest';
import type { CertificateStatus } from '../../api/customdomain.js';
import {
  nextLookAt,
  parseRenewalRecord,
  previousRenewal,
  renewalCheckRequested,
  renewalRecordValue,
  renewalSentence,
} from './apps-renewal.js';

const serving: CertificateStatus = {
  secretName: 'portico-apps-domain-tls',
  notBefore: '2026-11-01T00:00:00.000Z',
  notAfter: '2027-01-30T00:00:00.000Z',
  renewalTime: '2026-12-31T00:00:00.000Z',
  serialNumber: '1A2B',
  issuer: 'CN=Pebble Intermediate CA',
  dnsNames: ['*.apps.example.com'],
};

const ari = {
  certId: 'aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE',
  windowStart: '2026-12-10T00:00:00.000Z',
  windowEnd: '2026-12-12T00:00:00.000Z',
  checkedAt: '2026-11-29T10:00:00.000Z',
  nextCheckAt: '2026-11-29T16:00:00.000Z',
};

const planned: CertificateStatus = { ...serving, renewalTime: '2026-12-11T06:00:00.000Z', ari };

describe('the renewal record on the wildcard Secret', () => {
  it('reads back what it writes: the serial, the renewal time, the ARI answer and the verify request acted on', () => {
    const value = renewalRecordValue(planned, 'now-1');
    expect(parseRenewalRecord(value)).toEqual({
      serialNumber: '1A2B',
      renewalTime: '2026-12-11T06:00:00.000Z',
      ari,
      lastVerifyRequest: 'now-1',
    });
    // The same decision gives the same string (no write when nothing changed).
    expect(renewalRecordValue({ ...planned }, 'now-1')).toBe(value);
    expect(parseRenewalRecord(renewalRecordValue(serving, undefined))).toEqual({
      serialNumber: '1A2B',
      renewalTime: '2026-12-31T00:00:00.000Z',
    });
  });

  it('takes a value that is not JSON, or not of its shape, as no record', () => {
    expect(parseRenewalRecord(undefined)).toBeUndefined();
    expect(parseRenewalRecord('{not json')).toBeUndefined();
    expect(parseRenewalRecord('null')).toBeUndefined();
    expect(parseRenewalRecord(JSON.stringify({ serialNumber: '1A2B', renewalTime: 'soon' }))).toBeUndefined();
    expect(
      parseRenewalRecord(
        JSON.stringify({
          serialNumber: '1A2B',
          renewalTime: '2026-12-11T06:00:00Z',
          ari: { ...ari, windowEnd: 42 },
        }),
      ),
    ).toBeUndefined();
    expect(parseRenewalRecord(JSON.stringify({ renewalTime: '2026-12-11T06:00:00Z' }))).toBeUndefined();
  });

  it("gives the planner the record's decision only for the certificate it was made for, and only with ARI", () => {
    const record = parseRenewalRecord(renewalRecordValue(planned, undefined));
    expect(previousRenewal(serving, record)).toEqual({ ...serving, renewalTime: planned.renewalTime, ari });
    // The Secret holds another certificate now (renewed): the old decision does not carry over.
    expect(previousRenewal({ ...serving, serialNumber: '3C4D' }, record)).toBeUndefined();
    // A record without ARI (only a verify request acted on): nothing for the planner to keep.
    expect(previousRenewal(serving, parseRenewalRecord(renewalRecordValue(serving, 'x')))).toBeUndefined();
    expect(previousRenewal(serving, undefined)).toBeUndefined();
  });

  it('a verify request asks the CA again once per value', () => {
    const record = parseRenewalRecord(renewalRecordValue(planned, 'now-1'));
    expect(renewalCheckRequested('now-2', record)).toBe(true);
    expect(renewalCheckRequested('now-1', record)).toBe(false);
    expect(renewalCheckRequested(undefined, record)).toBe(false);
    expect(renewalCheckRequested('', record)).toBe(false);
    expect(renewalCheckRequested('now-1', undefined)).toBe(true);
  });

  it('looks again at the renewal time, when the CA wants to be asked again, or after the recheck period, whichever comes first', () => {
    const now = new Date('2026-11-29T10:00:00.000Z');
    const hour = 3_600_000;
    // The CA's nextCheckAt (6 h on) before the renewal time and the recheck period (10 h).
    expect(nextLookAt(planned, now, 10 * hour)).toBe(Date.parse(ari.nextCheckAt));
    // The recheck period first.
    expect(nextLookAt(planned, now, 600_000)).toBe(now.getTime() + 600_000);
    // A renewal time before both.
    const soon = { ...planned, renewalTime: '2026-11-29T11:00:00.000Z' };
    expect(nextLookAt(soon, now, 10 * hour)).toBe(Date.parse(soon.renewalTime));
    // A nextCheckAt already past (the request just failed): not a reason to look again at once.
    const failed = { ...planned, ari: { ...ari, nextCheckAt: '2026-11-29T09:00:00.000Z' } };
    expect(nextLookAt(failed, now, 10 * hour)).toBe(now.getTime() + 10 * hour);
    // Without ARI: the renewal time or the recheck period.
    expect(nextLookAt(serving, now, 10 * hour)).toBe(now.getTime() + 10 * hour);
    // Never before now.
    expect(nextLookAt({ ...serving, renewalTime: '2026-11-01T00:00:00.000Z' }, now, hour)).toBe(
      now.getTime(),
    );
  });

  it('says when it renews, and from which window', () => {
    expect(renewalSentence(planned)).toBe(
      "renewed from 2026-12-11T06:00:00.000Z, a time chosen in the CA's renewal window 2026-12-10T00:00:00.000Z to 2026-12-12T00:00:00.000Z (ACME Renewal Information, RFC 9773)",
    );
    expect(renewalSentence(serving)).toContain('two thirds into its validity');
  });
});
