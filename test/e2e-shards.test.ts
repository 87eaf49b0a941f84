import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  AFTER_IMAGE_BUILD,
  AWAY_FROM_THE_START,
  assignShards,
  movedLast,
  shuffleWithSeed,
} from './e2e-shards.js';

describe('assignShards', () => {
  it('deals the slowest first to the shard with the least time so far', () => {
    const weights = { a: 100, b: 60, c: 50, d: 40, e: 10 };
    const shards = assignShards(Object.keys(weights), weights, 2, []);
    // a→1 (100), b→2 (60), c→2 (110), d→1 (140), e→2 (120)
    expect(shards).toEqual([
      ['a', 'd'],
      ['b', 'c', 'e'],
    ]);
  });

  it('puts every file in exactly one shard, and empty shards when there are more shards than files', () => {
    const files = ['x', 'y', 'z'];
    const shards = assignShards(files, {}, 5, []);
    expect(shards).toHaveLength(5);
    expect(shards.flat().sort()).toEqual(files);
    expect(shards.filter((s) => s.length === 0)).toHaveLength(2);
  });

  it('weighs a file without a figure as the median of the known ones', () => {
    // known: 10, 20, 30 (median 20); "new" weighs 20, so after big (100) on 1 and a(30) on 2, new goes to 2.
    const shards = assignShards(['big', 'a', 'b', 'c', 'new'], { big: 100, a: 30, b: 20, c: 10 }, 2, []);
    expect(shards[1]).toContain('new');
    expect(shards[0]).toEqual(['big']);
  });

  it('keeps a group together, weighing the sum of the members present', () => {
    const weights = { g1: 10, g2: 10, big: 25, small: 5 };
    const shards = assignShards(['g1', 'g2', 'big', 'small'], weights, 2, [['g1', 'g2', 'absent']]);
    const withG1 = shards.find((s) => s.includes('g1'));
    expect(withG1).toContain('g2');
    expect(withG1).not.toContain('absent');
    expect(shards.flat().sort()).toEqual(['big', 'g1', 'g2', 'small']);
  });

  it('gives the same answer for the same files in any order', () => {
    const weights = { a: 5, b: 5, c: 5, d: 5 };
    expect(assignShards(['d', 'c', 'b', 'a'], weights, 2, [])).toEqual(
      assignShards(['a', 'b', 'c', 'd'], weights, 2, []),
    );
  });

  it('refuses a shard count that is not a positive integer', () => {
    expect(() => assignShards(['a'], {}, 0, [])).toThrow(RangeError);
    expect(() => assignShards(['a'], {}, 1.5, [])).toThrow(/positive integer/);
  });
});

describe('shuffleWithSeed', () => {
  const items = Array.from({ length: 20 }, (_, i) => i);

  it('keeps every item, and gives the same order for the same seed', () => {
    const a = shuffleWithSeed(items, 4);
    expect([...a].sort((x, y) => x - y)).toEqual(items);
    expect(shuffleWithSeed(items, 4)).toEqual(a);
  });

  it('gives other orders for other seeds, not the input order', () => {
    const orders = new Set([1, 2, 3, 4, 5].map((seed) => shuffleWithSeed(items, seed).join()));
    expect(orders.size).toBe(5);
    expect(orders.has(items.join())).toBe(false);
  });
});

describe('movedLast', () => {
  it('puts the listed files after the others, each group in the order it had', () => {
    const files = [{ p: 'a' }, { p: 'img2' }, { p: 'b' }, { p: 'img1' }, { p: 'c' }];
    expect(movedLast(files, (f) => f.p, ['img1', 'img2', 'absent']).map((f) => f.p)).toEqual([
      'a',
      'b',
      'c',
      'img2',
      'img1',
    ]);
    expect(movedLast(files, (f) => f.p, []).map((f) => f.p)).toEqual(['a', 'img2', 'b', 'img1', 'c']);
  });

  it('names e2e files that exist, by their paths from the repository root', () => {
    for (const file of [...AFTER_IMAGE_BUILD, ...AWAY_FROM_THE_START])
      expect(existsSync(file), file).toBe(true);
  });
});
