import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { renderCompiledConfig, type CompiledPolicy } from './config-schema.js';
import { configHash, ConfigState } from './config-state.js';
import { policyToken } from './load-report.js';
import { createConfigMetrics } from './metrics.js';

const entry = (domain: string, generation: number, perMinute = 60): CompiledPolicy => ({
  domain,
  uid: `uid-of-${domain}`,
  generation,
  plans: [{ name: 'free', requestsPerMinute: perMinute, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
});

function state(): ConfigState {
  return new ConfigState(createConfigMetrics(), pino({ level: 'silent' }));
}

const S0 = 'portico-ratelimit-config';
const S1 = 'portico-ratelimit-config-1';

describe('ConfigState over several shards', () => {
  it('enforces the policies of every shard and reports each shard loaded', () => {
    const s = state();
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 1)]), '10');
    const report = s.load(S1, 1, renderCompiledConfig([entry('b/p', 2)]), '11');
    expect([...s.snapshot.byDomain.keys()].sort()).toEqual(['a/p', 'b/p']);
    expect(report.configShards).toEqual({ [S0]: '10', [S1]: '11' });
    expect(report.loaded).toEqual({ [policyToken('uid-of-a/p')]: 1, [policyToken('uid-of-b/p')]: 2 });
    expect(report.policies).toEqual({});
  });

  it('takes the higher generation of a policy the operator is moving, whatever the order of the shards', () => {
    const s = state();
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 1)]), '1');
    s.load(S1, 1, renderCompiledConfig([entry('a/p', 2, 90)]), '2');
    expect(s.snapshot.byDomain.get('a/p')?.generation).toBe(2);
    s.load(S0, 0, renderCompiledConfig([]), '3');
    expect(s.snapshot.byDomain.get('a/p')?.generation).toBe(2);
  });

  it('keeps a deleted shard’s policies in force and reports it retained until it exists again', () => {
    const s = state();
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 1)]), '1');
    s.load(S1, 1, renderCompiledConfig([entry('b/p', 1), entry('c/p', 1)]), '2');
    const deleted = s.remove(S1);
    expect([...s.snapshot.byDomain.keys()].sort()).toEqual(['a/p', 'b/p', 'c/p']);
    expect(deleted.retainedShards).toEqual([S1]);
    expect(deleted.configShards).toEqual({ [S0]: '1' });
    // Re-created without c/p (the policy was deleted meanwhile): c/p goes.
    const back = s.load(S1, 1, renderCompiledConfig([entry('b/p', 1)]), '5');
    expect([...s.snapshot.byDomain.keys()].sort()).toEqual(['a/p', 'b/p']);
    expect(back.retainedShards).toBeUndefined();
  });

  it('lets a shard that exists win over a deleted one for the same policy', () => {
    const s = state();
    s.load(S1, 1, renderCompiledConfig([entry('a/p', 3)]), '1');
    s.remove(S1);
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 2)]), '2');
    expect(s.snapshot.byDomain.get('a/p')?.generation).toBe(2);
  });

  it('forgets a deleted shard that held nothing', () => {
    const s = state();
    s.load(S1, 1, renderCompiledConfig([]), '1');
    expect(s.remove(S1).retainedShards).toBeUndefined();
  });

  it('refuses one shard whole (its policies stay, the error names it) and still loads the others', () => {
    const s = state();
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 1)]), '1');
    s.load(S1, 1, renderCompiledConfig([entry('b/p', 1)]), '2');
    const report = s.load(S1, 1, 'not json', '3');
    expect(report.configError).toMatchObject({ reason: 'InvalidJSON', shard: S1 });
    expect(report.configError?.message).toMatch(
      /^ConfigMap portico-ratelimit-config-1: config.json is not JSON/,
    );
    expect([...s.snapshot.byDomain.keys()].sort()).toEqual(['a/p', 'b/p']);
    const next = s.load(S0, 0, renderCompiledConfig([entry('a/p', 2)]), '4');
    expect(s.snapshot.byDomain.get('a/p')?.generation).toBe(2);
    expect(next.configError?.shard).toBe(S1);
    expect(s.load(S1, 1, renderCompiledConfig([entry('b/p', 1)]), '5').configError).toBeUndefined();
  });

  it('keeps the enforced version of a policy whose entry is refused, found in another shard', () => {
    const s = state();
    s.load(S0, 0, renderCompiledConfig([entry('a/p', 1)]), '1');
    const bad = { ...entry('a/p', 2), defaultPlan: 'gold' };
    s.load(S1, 1, JSON.stringify({ schemaVersion: 1, policies: [bad] }), '2');
    s.load(S0, 0, renderCompiledConfig([]), '3');
    expect(s.snapshot.byDomain.get('a/p')?.generation).toBe(1);
    expect(s.report.policies['a/p']).toMatchObject({ loadedGeneration: 1, rejectedGeneration: 2 });
  });
});

describe('the config metrics', () => {
  async function lines(metrics: ReturnType<typeof createConfigMetrics>, name: string): Promise<string[]> {
    const text = await metrics.registry.metrics();
    return text.split('\n').filter((l) => l.startsWith(`${name}{`));
  }

  it("show each shard's document in force by its hash, and a refused document by last_load_successful 0", async () => {
    const metrics = createConfigMetrics();
    const s = new ConfigState(metrics, pino({ level: 'silent' }));
    const first = renderCompiledConfig([entry('a/p', 1)]);
    s.load(S0, 0, first, '1');
    s.load(S1, 1, renderCompiledConfig([entry('b/p', 1)]), '2');
    const hash = configHash(first);
    expect(hash).toBeGreaterThan(0);
    expect(Number.isSafeInteger(hash)).toBe(true);
    expect(await lines(metrics, 'portico_ratelimit_config_hash')).toContain(
      `portico_ratelimit_config_hash{shard="${S0}"} ${hash}`,
    );
    expect(await lines(metrics, 'portico_ratelimit_config_last_load_successful')).toEqual([
      `portico_ratelimit_config_last_load_successful{shard="${S0}"} 1`,
      `portico_ratelimit_config_last_load_successful{shard="${S1}"} 1`,
    ]);
    const loadedAt = await lines(metrics, 'portico_ratelimit_config_last_load_success_timestamp_seconds');
    expect(loadedAt).toHaveLength(2);

    // Refused whole: the previous document stays in force, and so does its hash.
    s.load(S0, 0, '{not json', '3');
    expect(await lines(metrics, 'portico_ratelimit_config_hash')).toContain(
      `portico_ratelimit_config_hash{shard="${S0}"} ${hash}`,
    );
    expect(await lines(metrics, 'portico_ratelimit_config_last_load_successful')).toContain(
      `portico_ratelimit_config_last_load_successful{shard="${S0}"} 0`,
    );
    expect(await lines(metrics, 'portico_ratelimit_config_last_load_success_timestamp_seconds')).toEqual(
      loadedAt,
    );

    // A deleted shard with nothing in force leaves no series; one whose policies stay keeps them.
    s.load(S1, 1, renderCompiledConfig([]), '4');
    s.remove(S1);
    s.remove(S0);
    expect(await lines(metrics, 'portico_ratelimit_config_hash')).toEqual([
      `portico_ratelimit_config_hash{shard="${S0}"} ${hash}`,
    ]);
  });
});
