import { describe, expect, it } from 'vitest';
import type { CompiledPolicy, RejectedEntry } from './config-schema.js';
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
      'a/p': {
        uid: 'u',
        loadedGeneration: 1,
        rejectedGeneration: 2,
        reason: 'InvalidPolicy',
        message: 'plans: bad',
      },
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
    expect(reportPolicies(second.snapshot, [])).toEqual({ 'a/p': { uid: 'u', loadedGeneration: 2 } });
  });
});
