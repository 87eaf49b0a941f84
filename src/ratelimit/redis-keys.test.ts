import { describe, expect, it } from 'vitest';
import { counterKeys } from './redis-keys.js';
import { currentWindows } from './windows.js';

/** The part of a key Redis Cluster hashes (cluster spec, "Hash tags"). */
function hashedPart(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

describe('counterKeys', () => {
  const windows = currentWindows(Date.parse('2026-11-22T12:34:56Z'));

  it('gives every key of one API key the same hash tag, so they share a slot', () => {
    const keys = counterKeys('platform-api/public-api', 'k-1', windows);
    const tags = new Set(Object.values(keys).map(hashedPart));
    expect(tags.size).toBe(1);
    expect(keys.minute).toMatch(/:m:\d+$/);
    expect(keys.day).toMatch(/:d:\d+$/);
  });

  it('cannot be broken out of by braces or separators in the key id', () => {
    const tricky = counterKeys('ns/p', 'a}b{c|d:e', windows);
    const plain = counterKeys('ns/p', 'a', windows);
    expect(new Set(Object.values(tricky).map(hashedPart)).size).toBe(1);
    expect(hashedPart(tricky.minute)).not.toBe(hashedPart(plain.minute));
    expect(hashedPart(tricky.minute)).toBe('ns%2Fp|a%7Db%7Bc%7Cd%3Ae');
  });

  it('separates domains and windows', () => {
    const a = counterKeys('ns/a', 'k', windows);
    const b = counterKeys('ns/b', 'k', windows);
    expect(a.minute).not.toBe(b.minute);
    expect(counterKeys('ns/a', 'k', currentWindows(Date.parse('2026-11-22T12:35:00Z'))).minute).not.toBe(
      a.minute,
    );
  });
});
