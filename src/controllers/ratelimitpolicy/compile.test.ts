import { describe, expect, it } from 'vitest';
import type { RateLimitPolicy, RateLimitPolicySpec } from '../../api/ratelimitpolicy.js';
import { MAX_POLICY_CONFIG_BYTES, renderCompiledConfig } from '../../ratelimit/config-schema.js';
import { compilePolicy, desiredEntries, readShard } from './compile.js';
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
  it('compiles the example policy of docs/ratelimits.md, "A policy"', () => {
    const result = compilePolicy(policy(SPEC, 3));
    expect(result).toMatchObject({
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
    if (result.ok) expect(JSON.parse(result.text)).toEqual(result.entry);
  });

  it('compiles missingKeyId: Refuse, and leaves out the default so the bytes stay those of before', () => {
    const refusing = compilePolicy(policy({ ...SPEC, missingKeyId: 'Refuse' }));
    expect(refusing).toMatchObject({ ok: true, entry: { missingKeyId: 'Refuse' } });
    const byDefault = compilePolicy(policy({ ...SPEC, missingKeyId: 'LimitByRemoteAddress' }));
    const unset = compilePolicy(policy(SPEC));
    expect(byDefault.ok && unset.ok && byDefault.text === unset.text).toBe(true);
    expect(unset.ok && unset.text.includes('missingKeyId')).toBe(false);
    const stored = compilePolicy(policy({ ...SPEC, missingKeyId: 'Ignore' as 'Refuse' }));
    expect(stored.ok).toBe(false);
    expect(stored.ok ? '' : stored.message).toContain('missingKeyId');
  });

  it('accepts the largest policy the CRD allows with ASCII key ids', () => {
    const overrides = Array.from({ length: 1000 }, (_, i) => ({
      keyId: `k${i}-`.padEnd(256, 'x'),
      requestsPerMinute: 4294967295,
      requestsPerDay: 4294967295,
    }));
    const plans = Array.from({ length: 32 }, (_, i) => ({
      name: `plan-${i}`.padEnd(63, 'p'),
      requestsPerMinute: 4294967295,
      requestsPerDay: 4294967295,
    }));
    const result = compilePolicy(policy({ plans, defaultPlan: plans[0]?.name ?? '', overrides }));
    expect(result.ok).toBe(true);
  });

  it('refuses override keyIds of more than 384 KiB together, as the CRD does', () => {
    // 600 key ids of 250 characters of 4 bytes each: within the CRD's 256 characters, about 600 KB.
    const overrides = Array.from({ length: 600 }, (_, i) => ({
      keyId: `${i}-${'\u{1F600}'.repeat(250)}`,
      requestsPerMinute: 10,
      requestsPerDay: 100,
    }));
    const result = compilePolicy(policy({ ...SPEC, overrides }));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.message).toBe(
      'overrides: the override keyIds take more than 393216 bytes (384 KiB) of UTF-8 together, and one ' +
        'policy may take at most 512 KiB of the rate-limit config: use fewer or shorter keyIds (a ' +
        'character outside ASCII takes 2 to 4 bytes)',
    );
  });

  it('refuses a policy whose compiled entry is over the per-policy bound, naming it', () => {
    // 1,000 key ids of 250 quotes: 254 KB of key ids (the CRD lets them pass), but JSON writes each
    // quote as two bytes: about 555 KB compiled.
    const overrides = Array.from({ length: 1000 }, (_, i) => ({
      keyId: `${i}-${'"'.repeat(250)}`,
      requestsPerMinute: 10,
      requestsPerDay: 100,
    }));
    const result = compilePolicy(policy({ ...SPEC, overrides }));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.message).toMatch(
      /^the compiled policy is \d+ bytes; one policy may take at most 524288 bytes/,
    );
    expect(MAX_POLICY_CONFIG_BYTES).toBe(524288);
  });
});

describe('desiredEntries', () => {
  it('has every accepted policy, and keeps the enforced entry of one that is not accepted', () => {
    const a = compilePolicy(policy(SPEC, 1, 'a'));
    const b = compilePolicy(policy(SPEC, 1, 'b', 'u2'));
    if (!a.ok || !b.ok) throw new Error('does not compile');
    const enforced = new Map([
      [a.entry.domain, a.entry],
      [b.entry.domain, b.entry],
    ]);
    const broken = policy({ ...SPEC, defaultPlan: 'gold' }, 2, 'b', 'u2');
    const desired = desiredEntries([policy(SPEC, 1, 'a'), broken], enforced);
    expect([...desired.keys()].sort()).toEqual(['platform-api/a', 'platform-api/b']);
    expect(desired.get('platform-api/b')).toBe(b.text);
    // Re-created under another uid: the old entry is not kept for it.
    const other = policy({ ...SPEC, defaultPlan: 'gold' }, 1, 'b', 'u3');
    expect(desiredEntries([other], enforced).has('platform-api/b')).toBe(false);
  });

  it('drops deleted policies', () => {
    expect(desiredEntries([], new Map()).size).toBe(0);
  });
});

describe('readShard', () => {
  it('reads each entry as the operator renders it, an invalid entry as empty text, and a broken document as empty', () => {
    const a = compilePolicy(policy(SPEC, 1, 'a'));
    if (!a.ok) throw new Error('does not compile');
    const bad = { ...a.entry, domain: 'platform-api/b', defaultPlan: 'gold' };
    const text = JSON.stringify({ schemaVersion: 1, policies: [a.entry, bad] }, null, 1);
    const read = readShard('portico-ratelimit-config', text);
    expect(read.shard.entries).toEqual(
      new Map([
        ['platform-api/b', ''],
        ['platform-api/a', a.text],
      ]),
    );
    expect(read.valid.map((p) => p.domain)).toEqual(['platform-api/a']);
    expect(readShard('x', renderCompiledConfig([a.entry])).shard.entries.get('platform-api/a')).toBe(a.text);
    expect(readShard('x', 'not json').shard.entries.size).toBe(0);
    expect(readShard('x', undefined).shard.text).toBeUndefined();
  });
});
