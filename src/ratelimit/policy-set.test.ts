import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CompiledPolicy, RejectedEntry } from './config-schema.js';
import { policyToken } from './load-report.js';
import { EMPTY_SNAPSHOT, loadPolicies, reportPolicies } from './policy-set.js';

const entry = (domain: string, generation: number, uid = 'u'): CompiledPolicy => ({
  domain,
  uid,
  generation,
  plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
});
const rejected = (domain: string, generation: number, uid = 'u'): RejectedEntry => ({
  domain,
  uid,
  generation,
  reason: 'InvalidPolicy',
  message: 'plans: bad',
});

describe('loadPolicies', () => {
  it('keeps the enforced version of a policy whose new entry is refused, and reports both', () => {
    const first = loadPolicies(EMPTY_SNAPSHOT, { policies: [entry('a/p', 1)], rejected: [] });
    const second = loadPolicies(first.snapshot, { policies: [], rejected: [rejected('a/p', 2)] });
    expect(second.snapshot.byDomain.get('a/p')?.generation).toBe(1);
    expect(reportPolicies(second.snapshot, second.rejected)).toEqual({
      policies: {
        'a/p': {
          uid: 'u',
          loadedGeneration: 1,
          rejectedGeneration: 2,
          reason: 'InvalidPolicy',
          message: 'plans: bad',
        },
      },
      loaded: { [policyToken('u')]: 1 },
    });
  });

  it('does not keep a refused entry of a re-created policy (another uid)', () => {
    const first = loadPolicies(EMPTY_SNAPSHOT, { policies: [entry('a/p', 3, 'old')], rejected: [] });
    const second = loadPolicies(first.snapshot, { policies: [], rejected: [rejected('a/p', 1, 'new')] });
    expect(second.snapshot.byDomain.has('a/p')).toBe(false);
  });

  it('drops policies no longer in the document', () => {
    const first = loadPolicies(EMPTY_SNAPSHOT, {
      policies: [entry('a/p', 1), entry('b/p', 1)],
      rejected: [],
    });
    const second = loadPolicies(first.snapshot, { policies: [entry('a/p', 2)], rejected: [] });
    expect([...second.snapshot.byDomain.keys()]).toEqual(['a/p']);
    expect(reportPolicies(second.snapshot, [])).toEqual({ policies: {}, loaded: { [policyToken('u')]: 2 } });
  });
});

describe('reportPolicies', () => {
  it('writes a refused entry of a policy with nothing enforced without a loaded generation', () => {
    expect(reportPolicies(EMPTY_SNAPSHOT, [rejected('a/p', 1)])).toEqual({
      policies: {
        'a/p': { uid: 'u', rejectedGeneration: 1, reason: 'InvalidPolicy', message: 'plans: bad' },
      },
      loaded: {},
    });
  });

  it('reports 10,000 enforced policies in 13 bytes each with one-digit generations, one more a digit', () => {
    // The status ConfigMap holds every replica's report in at most 1 MiB (etcd's object size limit):
    // seven replicas of 10,000 policies fit with generations under 10, six under 100.
    const bytesPerPolicy = (generation: (i: number) => number): number => {
      const policies = Array.from({ length: 10_000 }, (_, i) => ({
        ...entry(`tenant-${i % 100}/api-${i}`, generation(i)),
        uid: randomUUID(),
      }));
      const { snapshot } = loadPolicies(EMPTY_SNAPSHOT, { policies, rejected: [] });
      const report = reportPolicies(snapshot, []);
      expect(Object.keys(report.loaded ?? {})).toHaveLength(10_000);
      return Buffer.byteLength(JSON.stringify(report)) / 10_000;
    };
    const oneDigit = bytesPerPolicy((i) => 1 + (i % 9));
    const twoDigits = bytesPerPolicy((i) => 10 + (i % 90));
    expect(oneDigit).toBeLessThanOrEqual(13.01);
    expect(twoDigits).toBeLessThanOrEqual(14.01);
    expect(7 * oneDigit * 10_000).toBeLessThan(1024 * 1024 - 7 * 1024);
  });
});
