import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy, RateLimitPolicySpec } from '../../api/ratelimitpolicy.js';
import { parseCompiledConfig } from '../../ratelimit/config-schema.js';
import { compileConfig, compilePolicy, currentEntries } from './compile.js';
import { parseDurationSeconds } from './duration.js';

const SPEC: RateLimitPolicySpec = {
  plans: [
    { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
    { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
  ],
  defaultPlan: 'free',
  overrides: [{ keyId: 'acme-corp-prod', requestsPerMinute: 20000, requestsPerDay: 20000000 }],
  ban: { afterRejectedRequests: 20, duration: '15m' },
};

function policy(spec: RateLimitPolicySpec, generation = 1, name = 'public-api', uid = 'u1'): RateLimitPolicy {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'RateLimitPolicy',
    metadata: { name, namespace: 'platform-api', uid, generation },
    spec,
  };
}

describe('parseDurationSeconds', () => {
  it('reads hours, minutes and seconds', () => {
    expect(parseDurationSeconds('15m')).toBe(900);
    expect(parseDurationSeconds('1h30m')).toBe(5400);
    expect(parseDurationSeconds('45s')).toBe(45);
    expect(parseDurationSeconds('1.5h')).toBeUndefined();
    expect(parseDurationSeconds('15')).toBeUndefined();
    expect(parseDurationSeconds('')).toBeUndefined();
  });
});

describe('compilePolicy', () => {
  it('compiles the spec table of DESIGN.md', () => {
    const result = compilePolicy(policy(SPEC, 3));
    expect(result).toEqual({
      ok: true,
      entry: {
        domain: 'platform-api/public-api',
        uid: 'u1',
        generation: 3,
        plans: SPEC.plans,
        defaultPlan: 'free',
        overrides: SPEC.overrides,
        ban: { afterRejectedRequests: 20, durationSeconds: 900 },
      },
    });
  });

  it('refuses what the CRD refuses, naming every rule broken', () => {
    const result = compilePolicy(
      policy({
        plans: [
          { name: 'free', requestsPerMinute: 60, requestsPerDay: 10 },
          { name: 'free', requestsPerMinute: 1, requestsPerDay: 1 },
        ],
        defaultPlan: 'gold',
        ban: { afterRejectedRequests: 5, duration: '30d' },
      }),
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.message).toContain('requestsPerDay must be at least requestsPerMinute');
    expect(result.message).toContain('plan names must be unique');
    expect(result.message).toContain('defaultPlan must name one of plans');
    expect(result.message).toContain('ban.duration');
  });

  it('refuses a ban longer than 7 days and a bad plan name', () => {
    expect(compilePolicy(policy({ ...SPEC, ban: { afterRejectedRequests: 1, duration: '169h' } })).ok).toBe(
      false,
    );
    const upper = compilePolicy(
      policy({ plans: [{ name: 'Free', requestsPerMinute: 1, requestsPerDay: 1 }], defaultPlan: 'Free' }),
    );
    expect(upper.ok).toBe(false);
  });
});

describe('compileConfig', () => {
  it('writes every accepted policy, and keeps the enforced entry of one that is not accepted', () => {
    const before = compileConfig([policy(SPEC, 1, 'a'), policy(SPEC, 1, 'b', 'u2')], new Map());
    const broken = policy({ ...SPEC, defaultPlan: 'gold' }, 2, 'b', 'u2');
    const after = compileConfig([policy(SPEC, 1, 'a'), broken], currentEntries(before));
    const parsed = parseCompiledConfig(after);
    expect(parsed.policies.map((p) => [p.domain, p.generation])).toEqual([
      ['platform-api/a', 1],
      ['platform-api/b', 1],
    ]);
  });

  it('drops deleted policies and is stable byte for byte', () => {
    const one = compileConfig([policy(SPEC, 1, 'a')], new Map());
    expect(compileConfig([policy(SPEC, 1, 'a')], currentEntries(one))).toBe(one);
    expect(parseCompiledConfig(compileConfig([], currentEntries(one))).policies).toEqual([]);
  });
});
