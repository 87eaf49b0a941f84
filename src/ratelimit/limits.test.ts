import { describe, expect, it } from 'vitest';
import type { CompiledPolicy } from './config-schema.js';
import { indexPolicy, lookupLimits } from './limits.js';

const policy: CompiledPolicy = {
  domain: 'platform-api/public-api',
  uid: 'u1',
  generation: 2,
  plans: [
    { name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 },
    { name: 'pro', requestsPerMinute: 300, requestsPerDay: 10000 },
  ],
  defaultPlan: 'free',
  overrides: [{ keyId: 'acme-corp-prod', requestsPerMinute: 20000, requestsPerDay: 20000000 }],
  ban: { afterRejectedRequests: 20, durationSeconds: 900 },
};
const indexed = indexPolicy(policy);
const entries = (pairs: Record<string, string>): { key: string; value: string }[] =>
  Object.entries(pairs).map(([key, value]) => ({ key, value }));

describe('lookupLimits', () => {
  it('uses the plan the gateway sent', () => {
    expect(lookupLimits(indexed, entries({ key_id: 'k', plan: 'pro' }))).toMatchObject({
      kind: 'limited',
      source: 'plan',
      plan: 'pro',
      limits: { perMinute: 300, perDay: 10000 },
      ban: { afterRejectedRequests: 20, durationMs: 900_000 },
    });
  });

  it('uses the default plan for a missing or unknown plan', () => {
    for (const e of [{ key_id: 'k' }, { key_id: 'k', plan: 'platinum' }]) {
      expect(lookupLimits(indexed, entries(e))).toMatchObject({
        source: 'defaultPlan',
        plan: 'free',
        limits: { perMinute: 60, perDay: 1000 },
      });
    }
  });

  it('lets an override win over the plan', () => {
    expect(lookupLimits(indexed, entries({ key_id: 'acme-corp-prod', plan: 'pro' }))).toMatchObject({
      source: 'override',
      limits: { perMinute: 20000, perDay: 20000000 },
    });
  });

  it('does not limit an unknown domain or a descriptor without key_id', () => {
    expect(lookupLimits(undefined, entries({ key_id: 'k' }))).toEqual({ kind: 'unknownDomain' });
    expect(lookupLimits(indexed, entries({ plan: 'pro' }))).toEqual({ kind: 'noKeyId' });
  });
});
