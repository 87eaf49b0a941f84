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

  it('matches the plan sent without regard to case, as the namespace label is', () => {
    for (const plan of ['Pro', 'PRO', 'pRo']) {
      expect(lookupLimits(indexed, entries({ key_id: 'k', plan }))).toMatchObject({
        source: 'plan',
        plan: 'pro',
        limits: { perMinute: 300, perDay: 10000 },
      });
    }
  });

  it('does not limit an unknown domain', () => {
    expect(lookupLimits(undefined, entries({ key_id: 'k' }))).toEqual({ kind: 'unknownDomain' });
  });

  it('limits a descriptor without key_id by remote_address by default, with the plan sent or the default', () => {
    expect(lookupLimits(indexed, entries({ remote_address: '10.0.0.7', plan: 'pro' }))).toEqual({
      kind: 'limited',
      keyId: '10.0.0.7',
      subject: 'remoteAddress',
      plan: 'pro',
      source: 'plan',
      limits: { perMinute: 300, perDay: 10000 },
      ban: { afterRejectedRequests: 20, durationMs: 900_000 },
    });
    // An override names a key id, never an address.
    expect(lookupLimits(indexed, entries({ remote_address: 'acme-corp-prod' }))).toMatchObject({
      subject: 'remoteAddress',
      source: 'defaultPlan',
      limits: { perMinute: 60, perDay: 1000 },
    });
  });

  it('refuses a descriptor without key_id and without remote_address, or when the policy says Refuse', () => {
    expect(lookupLimits(indexed, entries({ plan: 'pro' }))).toEqual({ kind: 'noKeyId' });
    const refusing = indexPolicy({ ...policy, missingKeyId: 'Refuse' });
    expect(lookupLimits(refusing, entries({ remote_address: '10.0.0.7' }))).toEqual({ kind: 'noKeyId' });
  });
});
