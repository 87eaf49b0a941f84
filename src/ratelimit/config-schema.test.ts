import { describe, expect, it } from 'vitest';
import {
  configShardIndex,
  configShardName,
  parseCompiledConfig,
  renderCompiledConfig,
  renderCompiledEntry,
  renderedConfigBytes,
  type CompiledPolicy,
} from './config-schema.js';
import { isRateLimitError } from './errors.js';

const good: CompiledPolicy = {
  domain: 'a/p',
  uid: 'u',
  generation: 1,
  plans: [{ name: 'free', requestsPerMinute: 60, requestsPerDay: 1000 }],
  defaultPlan: 'free',
  overrides: [],
};

describe('parseCompiledConfig', () => {
  it('reads what renderCompiledConfig writes, sorted by domain', () => {
    const text = renderCompiledConfig([{ ...good, domain: 'b/p' }, good]);
    const parsed = parseCompiledConfig(text);
    expect(parsed.rejected).toEqual([]);
    expect(parsed.policies.map((p) => p.domain)).toEqual(['a/p', 'b/p']);
  });

  it('rejects one bad entry with its reasons and loads the others', () => {
    const bad = {
      ...good,
      domain: 'b/p',
      generation: 4,
      defaultPlan: 'gold',
      plans: [{ name: 'free', requestsPerMinute: 10, requestsPerDay: 5 }],
    };
    const parsed = parseCompiledConfig(JSON.stringify({ schemaVersion: 1, policies: [good, bad] }));
    expect(parsed.policies.map((p) => p.domain)).toEqual(['a/p']);
    expect(parsed.rejected).toHaveLength(1);
    expect(parsed.rejected[0]).toMatchObject({
      domain: 'b/p',
      uid: 'u',
      generation: 4,
      reason: 'InvalidPolicy',
    });
    expect(parsed.rejected[0]?.message).toContain('requestsPerDay must be at least requestsPerMinute');
    expect(parsed.rejected[0]?.message).toContain('defaultPlan must name one of plans');
  });

  it('rejects a second entry of one domain', () => {
    const parsed = parseCompiledConfig(JSON.stringify({ schemaVersion: 1, policies: [good, good] }));
    expect(parsed.rejected[0]?.message).toMatch(/second entry/);
  });

  it('rejects the whole document when it is not JSON or of another version', () => {
    for (const [text, reason] of [
      ['{', 'InvalidJSON'],
      ['{"policies":[]}', 'InvalidConfig'],
      ['{"schemaVersion":2,"policies":[]}', 'UnsupportedSchemaVersion'],
    ] as const) {
      try {
        parseCompiledConfig(text);
        expect.unreachable();
      } catch (err) {
        expect(isRateLimitError(err)).toBe(true);
        expect(err).toMatchObject({ code: 'RATELIMIT_CONFIG_REJECTED', reason });
      }
    }
  });
});

describe('rendering and shard names', () => {
  it('counts the bytes of a rendered document exactly', () => {
    for (const policies of [[], [good], [good, { ...good, domain: 'b/\u00e9' }]]) {
      const text = renderCompiledConfig(policies);
      expect(renderedConfigBytes(policies.map((p) => Buffer.byteLength(renderCompiledEntry(p))))).toBe(
        Buffer.byteLength(text),
      );
      expect(parseCompiledConfig(text).policies).toHaveLength(policies.length);
    }
  });

  it('names shard 0 after the config name and the others with a suffix, and reads them back', () => {
    expect(configShardName('portico-ratelimit-config', 0)).toBe('portico-ratelimit-config');
    expect(configShardName('portico-ratelimit-config', 12)).toBe('portico-ratelimit-config-12');
    expect(configShardIndex('portico-ratelimit-config', 'portico-ratelimit-config')).toBe(0);
    expect(configShardIndex('portico-ratelimit-config', 'portico-ratelimit-config-12')).toBe(12);
    for (const other of [
      'portico-ratelimit-status',
      'portico-ratelimit-config-0',
      'portico-ratelimit-config-x',
      'portico-ratelimit-config-01',
    ]) {
      expect(configShardIndex('portico-ratelimit-config', other)).toBeUndefined();
    }
  });
});
