import { describe, expect, it } from 'vitest';
import { CHECK_AND_COUNT_LUA, parseScriptReply } from './script.js';

describe('parseScriptReply', () => {
  it('reads each outcome', () => {
    expect(parseScriptReply([0, 3, 9, 0])).toEqual({ kind: 'admitted', minuteUsed: 3, dayUsed: 9 });
    expect(parseScriptReply([1, 60, 60, 0])).toEqual({ kind: 'limited', minuteUsed: 60, dayUsed: 60 });
    expect(parseScriptReply([2, 60, 60, 5000])).toMatchObject({ kind: 'bannedNow', banTtlMs: 5000 });
    expect(parseScriptReply([3, 60, 60, 4000])).toMatchObject({ kind: 'banned', banTtlMs: 4000 });
    expect(parseScriptReply([4, 0, 0, 1200])).toEqual({ kind: 'tooLate', lateMs: 1200 });
  });

  it('reads the deadline and TIME before anything else, and returns before reading a key when late', () => {
    const lateCheck = CHECK_AND_COUNT_LUA.indexOf('if nowMs > deadline then');
    expect(CHECK_AND_COUNT_LUA.indexOf("redis.call('TIME')")).toBeLessThan(lateCheck);
    const firstKeyRead = CHECK_AND_COUNT_LUA.indexOf('KEYS[');
    expect(lateCheck).toBeGreaterThan(0);
    expect(lateCheck).toBeLessThan(firstKeyRead);
  });

  it('refuses anything else', () => {
    expect(() => parseScriptReply('OK')).toThrow(TypeError);
    expect(() => parseScriptReply([9, 0, 0, 0])).toThrow(/outcome 9/);
  });
});
