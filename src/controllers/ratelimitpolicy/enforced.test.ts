import { describe, expect, it } from 'vitest';
import { policyToken, type LoadReport } from '../../ratelimit/load-report.js';
import { enforcedVerdict, nextReportStaleAtMs, type EnforcedInput } from './enforced.js';

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

/** A report as servers write it since the compact format: `loaded` by token, refusals in `policies`. */
function compact(
  instance: string,
  loadedByUid: Record<string, number>,
  refused: LoadReport['policies'] = {},
): LoadReport {
  const loaded = Object.fromEntries(Object.entries(loadedByUid).map(([uid, g]) => [policyToken(uid), g]));
  return report(instance, refused, { loaded });
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
      reports: [compact('a', { u: 2, other: 5 }), compact('b', { u: 2 })],
    });
    expect(v).toMatchObject({ status: 'True', reason: 'Loaded' });
    expect(v.message).toContain('by 2 rate-limit server(s)');
    const waiting = enforcedVerdict({ ...base, reports: [compact('a', { u: 2 }), compact('b', { u: 1 })] });
    expect(waiting).toMatchObject({ status: 'False', reason: 'Pending' });
    expect(waiting.message).toContain('1 of 2 rate-limit server(s) to load generation 2 (b)');
  });

  it('reads the full entries of servers before the compact report beside compact ones', () => {
    const earlier = report('old', { 'ns/p': { uid: 'u', loadedGeneration: 2 } });
    expect(enforcedVerdict({ ...base, reports: [earlier, compact('new', { u: 2 })] })).toMatchObject({
      status: 'True',
    });
    const behind = report('old', { 'ns/p': { uid: 'u', loadedGeneration: 1 } });
    const pending = enforcedVerdict({ ...base, reports: [behind, compact('new', { u: 2 })] });
    expect(pending.reason).toBe('Pending');
    expect(pending.message).toContain('(old)');
  });

  it('takes the generation a compact report keeps for a refused entry from that entry', () => {
    const refused = {
      'ns/p': { uid: 'u', loadedGeneration: 1, rejectedGeneration: 2, reason: 'InvalidPolicy', message: 'm' },
    };
    const v = enforcedVerdict({
      ...base,
      generation: 3,
      accepted: false,
      reports: [compact('a', { u: 1 }, refused)],
    });
    expect(v.message).toContain('keeps enforcing generation 1');
    const rejected = enforcedVerdict({ ...base, reports: [compact('a', { u: 1 }, refused)] });
    expect(rejected.reason).toBe('ConfigRejected');
    expect(rejected.message).toContain('rejected generation 2: InvalidPolicy: m');
  });

  it('says when the first live report goes stale, the moment verdicts change with no new report', () => {
    const older = { ...compact('a', {}), heartbeatTime: new Date(NOW - 60_000).toISOString() };
    expect(nextReportStaleAtMs([compact('b', {}), older], NOW)).toBe(NOW - 60_000 + 90_000);
    const gone = { ...compact('c', {}), heartbeatTime: stale };
    expect(nextReportStaleAtMs([gone], NOW)).toBeUndefined();
    expect(nextReportStaleAtMs([{ ...gone, heartbeatTime: 'not a time' }], NOW)).toBeUndefined();
  });

  it("counts a report stale after three of its own server's heartbeat intervals", () => {
    const quick = { ...compact('q', { u: 2 }), heartbeatTime: new Date(NOW - 20_000).toISOString() };
    expect(nextReportStaleAtMs([{ ...quick, heartbeatIntervalSeconds: 10 }], NOW - 1)).toBe(NOW + 10_000);
    expect(enforcedVerdict({ ...base, reports: [{ ...quick, heartbeatIntervalSeconds: 5 }] })).toMatchObject({
      reason: 'NoRateLimitServer',
    });
    expect(enforcedVerdict({ ...base, reports: [quick] })).toMatchObject({ reason: 'Loaded' });
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
