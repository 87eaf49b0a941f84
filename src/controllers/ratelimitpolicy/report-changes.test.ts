import { describe, expect, it } from 'vitest';
import type { LoadReport } from '../../ratelimit/load-report.js';
import { reportChanges } from './report-changes.js';

function report(
  instance: string,
  loaded: Record<string, number>,
  extra: Partial<LoadReport> = {},
): LoadReport {
  return { instance, heartbeatTime: '2026-11-27T10:00:00Z', policies: {}, loaded, ...extra };
}

describe('reportChanges', () => {
  it('concerns no policy when only the heartbeat time changed', () => {
    const before = [report('a', { t1: 1, t2: 4 }), report('b', { t1: 1 })];
    const after = before.map((r) => ({ ...r, heartbeatTime: '2026-11-27T10:00:30Z' }));
    expect(reportChanges(before, after)).toEqual({ all: false, domains: new Set(), tokens: new Set() });
  });

  it('names the tokens whose generation was loaded, changed or dropped, in any report', () => {
    const before = [report('a', { t1: 1, t2: 4 }), report('b', { t1: 1, t3: 2 })];
    const after = [report('a', { t1: 2, t2: 4, t4: 1 }), report('b', { t1: 1 })];
    const changes = reportChanges(before, after);
    expect(changes.all).toBe(false);
    expect([...changes.tokens].sort()).toEqual(['t1', 't3', 't4']);
  });

  it('names the domains whose refused entry (or full entry of an earlier server) changed', () => {
    const refused = { uid: 'u', rejectedGeneration: 2, reason: 'InvalidPolicy', message: 'm' };
    const before = [report('a', {}, { policies: { 'ns/p': refused, 'ns/q': refused } })];
    const after = [
      report('a', {}, { policies: { 'ns/p': { ...refused, rejectedGeneration: 3 }, 'ns/q': refused } }),
    ];
    expect([...reportChanges(before, after).domains]).toEqual(['ns/p']);
    expect([...reportChanges(after, [report('a', {})]).domains].sort()).toEqual(['ns/p', 'ns/q']);
  });

  it('concerns every policy when a report appears or goes, or a whole-document refusal changes', () => {
    const a = report('a', { t1: 1 });
    expect(reportChanges([a], [a, report('b', {})]).all).toBe(true);
    expect(reportChanges([a, report('b', {})], [a]).all).toBe(true);
    expect(reportChanges([a], [report('c', { t1: 1 })]).all).toBe(true);
    const refused = { ...a, configError: { reason: 'InvalidJSON', message: 'not JSON', shard: 'c-1' } };
    expect(reportChanges([a], [refused]).all).toBe(true);
    expect(reportChanges([refused], [refused]).all).toBe(false);
  });
});

describe('reportChanges across a server upgrade', () => {
  it('names the domains of full entries that went and the tokens that came', () => {
    const full: LoadReport = {
      instance: 'a',
      heartbeatTime: '2026-11-27T10:00:00Z',
      policies: { 'ns/p': { uid: 'u', loadedGeneration: 1 } },
    };
    const compact = report('a', { t: 1 });
    const changes = reportChanges([full], [compact]);
    expect(changes).toEqual({ all: false, domains: new Set(['ns/p']), tokens: new Set(['t']) });
  });

  it('looks at every policy when two reports name one instance', () => {
    expect(reportChanges([report('a', {})], [report('a', {}), report('a', { t: 1 })]).all).toBe(true);
  });
});
