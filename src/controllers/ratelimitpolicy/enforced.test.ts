import { describe, expect, it } from 'vitest';
import type { LoadReport } from '../../ratelimit/load-report.js';
import { enforcedVerdict, type EnforcedInput } from './enforced.js';

const NOW = Date.parse('2026-11-22T12:00:00Z');
const fresh = new Date(NOW - 5_000).toISOString();
const stale = new Date(NOW - 120_000).toISOString();

function report(
  instance: string,
  policies: LoadReport['policies'],
  extra: Partial<LoadReport> = {},
): LoadReport {
  return { instance, heartbeatTime: fresh, policies, ...extra };
}

const base: EnforcedInput = {
  domain: 'ns/p',
  uid: 'u',
  generation: 2,
  accepted: true,
  reports: [],
  nowMs: NOW,
  statusConfigMap: 'portico-system/portico-ratelimit-status',
};

describe('enforcedVerdict', () => {
  it('is True only when every live server loaded this generation', () => {
    const v = enforcedVerdict({
      ...base,
      reports: [
        report('a', { 'ns/p': { uid: 'u', loadedGeneration: 2 } }),
        report('b', { 'ns/p': { uid: 'u', loadedGeneration: 2 } }),
      ],
    });
    expect(v).toMatchObject({ status: 'True', reason: 'Loaded' });
    expect(v.recheckAfterMs).toBeGreaterThan(0);
  });

  it('waits while a server still has the previous generation or has not seen the policy', () => {
    const v = enforcedVerdict({
      ...base,
      reports: [
        report('a', { 'ns/p': { uid: 'u', loadedGeneration: 2 } }),
        report('b', { 'ns/p': { uid: 'u', loadedGeneration: 1 } }),
        report('c', {}),
      ],
    });
    expect(v).toMatchObject({ status: 'False', reason: 'Pending' });
    expect(v.message).toContain('2 of 3');
  });

  it('is False with the server reason when a server rejected this generation', () => {
    const v = enforcedVerdict({
      ...base,
      reports: [
        report('a', {
          'ns/p': {
            uid: 'u',
            loadedGeneration: 1,
            rejectedGeneration: 2,
            reason: 'InvalidPolicy',
            message: 'plans: too few',
          },
        }),
      ],
    });
    expect(v).toMatchObject({ status: 'False', reason: 'ConfigRejected' });
    expect(v.message).toContain('InvalidPolicy: plans: too few');
  });

  it('is False when a server refused the whole document before loading this generation', () => {
    const v = enforcedVerdict({
      ...base,
      reports: [report('a', {}, { configError: { reason: 'UnsupportedSchemaVersion', message: 'v9' } })],
    });
    expect(v).toMatchObject({ status: 'False', reason: 'ConfigRejected' });
  });

  it('is not ConfigRejected for a config shard refused whole that does not hold the policy', () => {
    const refused = { reason: 'InvalidJSON', message: 'ConfigMap c-1: not JSON', shard: 'c-1' };
    const reports = [report('a', {}, { configError: refused })];
    expect(enforcedVerdict({ ...base, shard: 'c', reports })).toMatchObject({ reason: 'Pending' });
    expect(enforcedVerdict({ ...base, shard: 'c-1', reports })).toMatchObject({ reason: 'ConfigRejected' });
    // Not yet in any shard: the refusal may be about it.
    expect(enforcedVerdict({ ...base, reports })).toMatchObject({ reason: 'ConfigRejected' });
  });

  it('ignores stale reports and reports of another object of the same name', () => {
    const old = { ...report('gone', { 'ns/p': { uid: 'u', loadedGeneration: 2 } }), heartbeatTime: stale };
    expect(enforcedVerdict({ ...base, reports: [old] })).toMatchObject({ reason: 'NoRateLimitServer' });
    const other = report('a', { 'ns/p': { uid: 'other', loadedGeneration: 2 } });
    expect(enforcedVerdict({ ...base, reports: [other] })).toMatchObject({ reason: 'Pending' });
  });

  it('is NotAccepted for a policy that does not compile, naming the generation still enforced', () => {
    const v = enforcedVerdict({
      ...base,
      accepted: false,
      reports: [report('a', { 'ns/p': { uid: 'u', loadedGeneration: 1 } })],
    });
    expect(v).toMatchObject({ status: 'False', reason: 'NotAccepted' });
    expect(v.message).toContain('keeps enforcing generation 1');
  });
});
