/**
 * The e2e files split into shards of about equal time, each shard run by its own vitest process on a
 * stack of its own (`scripts/test.sh`; docs/testing.md, "In parallel"). Within a shard the files run
 * one after another on one stack, as every e2e file expects; the shards run side by side.
 *
 * vitest's own `--shard` splits by count after hashing the paths, so one shard may get the four
 * slowest files; here each file weighs what it took in the last measured run
 * (`test/e2e/file-durations.json`, written by `npx tsx test/update-file-durations.ts` from the
 * reports in `test-results/`), and the files are dealt slowest first to the shard with the least
 * time so far (longest-processing-time-first). A file without a figure weighs the median.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** The committed weights: each e2e file's time in the last measured run, ms, by path from the repository root. */
export const FILE_DURATIONS_PATH = 'test/e2e/file-durations.json';

/** The shape of FILE_DURATIONS_PATH. */
export interface FileDurations {
  /** Which run the figures come from (a date and the command), for the reader. */
  measured: string;
  /** Each file's total time (import, setup files, tests and hooks), ms. */
  totalMs: Record<string, number>;
}

/**
 * Files that must run in the same shard, because they use something of the host that two stacks
 * cannot both have: Envoy Gateway's xDS server binds 127.0.0.1:18000, a constant of Envoy Gateway
 * (src/data-planes/envoy-gateway/sandbox-process.ts), and the tests read the translated config from that port.
 */
export const SAME_SHARD: readonly (readonly string[])[] = [
  [
    'test/e2e/envoy-gateway-project-subdomain.test.ts',
    'test/e2e/envoy-gateway-ratelimit.test.ts',
    'test/e2e/envoy-gateway-routes.test.ts',
  ],
];

/**
 * Files that wait for the image build `npm test` runs beside the tests (scripts/test.sh; their
 * support/image-build.ts wait, helm-kubelet's own): they run after the other files of their process,
 * by when that build has ended, instead of holding up their shard at its start while it runs.
 */
export const AFTER_IMAGE_BUILD: readonly string[] = [
  'test/e2e/helm-kubelet.test.ts',
  'test/e2e/release.test.ts',
];

/**
 * Files whose cases hold third-party timings to a bound (a Redis Sentinel or Cluster failover under
 * load, a Redis Cluster's slots): they run after the other files of their process and before AFTER_IMAGE_BUILD's, away from
 * the suite's first minutes, when the unit tests, the image build and every shard's stack start
 * share the two cores (a Sentinel failover case and a Redis Cluster case failed there in a fresh-clone run).
 */
export const AWAY_FROM_THE_START: readonly string[] = [
  'test/e2e/ratelimit-redis-failover.test.ts',
  'test/e2e/ratelimit-resilience.test.ts',
];

/**
 * `files` in the same order, except that those whose path (`pathOf`) is in `last` come after the
 * others, in the order they had. Pure.
 */
export function movedLast<T>(files: readonly T[], pathOf: (file: T) => string, last: readonly string[]): T[] {
  const isLast = (f: T): boolean => last.includes(pathOf(f));
  return [...files.filter((f) => !isLast(f)), ...files.filter(isLast)];
}

/**
 * Deals `files` (paths from the repository root) into `count` shards of about equal time.
 *
 * Each file weighs `weightsMs[file]`, or the median of the known weights when it has none (1 when
 * none is known). A group of SAME_SHARD-style `together` files is dealt as one item weighing their
 * sum (only its members present in `files`). Items go slowest first, each to the shard with the
 * least time so far, the lower index on a tie; the result is the same for the same input.
 *
 * @returns `count` arrays of paths, each in the order dealt (slowest first); every file in exactly one.
 * @throws RangeError when `count` is not a positive integer.
 */
export function assignShards(
  files: readonly string[],
  weightsMs: Readonly<Record<string, number>>,
  count: number,
  together: readonly (readonly string[])[] = SAME_SHARD,
): string[][] {
  if (!Number.isInteger(count) || count < 1)
    throw new RangeError(`shard count must be a positive integer, got ${count}`);
  const known = files.map((f) => weightsMs[f]).filter((w): w is number => typeof w === 'number' && w >= 0);
  const median = [...known].sort((a, b) => a - b)[Math.floor(known.length / 2)] ?? 1;
  const weight = (f: string): number => {
    const w = weightsMs[f];
    return typeof w === 'number' && w >= 0 ? w : median;
  };

  const present = new Set(files);
  const grouped = new Set<string>();
  const items: { files: string[]; weight: number }[] = [];
  for (const group of together) {
    const members = group.filter((f) => present.has(f) && !grouped.has(f));
    if (members.length === 0) continue;
    for (const f of members) grouped.add(f);
    items.push({ files: members, weight: members.reduce((sum, f) => sum + weight(f), 0) });
  }
  for (const f of new Set(files)) if (!grouped.has(f)) items.push({ files: [f], weight: weight(f) });
  items.sort((a, b) => b.weight - a.weight || a.files.join().localeCompare(b.files.join()));

  const shards = Array.from({ length: count }, () => ({ files: [] as string[], total: 0 }));
  for (const item of items) {
    const lightest = shards.reduce((least, shard) => (shard.total < least.total ? shard : least));
    lightest.files.push(...item.files);
    lightest.total += item.weight;
  }
  return shards.map((s) => s.files);
}

/** Reads FILE_DURATIONS_PATH under `root`; no weights when it is missing or unreadable. */
export function readFileDurations(root: string): Record<string, number> {
  try {
    const parsed = JSON.parse(readFileSync(`${root}/${FILE_DURATIONS_PATH}`, 'utf8')) as FileDurations;
    return parsed.totalMs ?? {};
  } catch {
    return {};
  }
}

/**
 * `items` in an order shuffled by `seed` (Fisher-Yates over mulberry32, a 32-bit seeded generator):
 * the same seed and input give the same order on every machine.
 */
export function shuffleWithSeed<T>(items: readonly T[], seed: number): T[] {
  let state = seed >>> 0;
  const random = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * vitest's sequencer (`sequence.sequencer` in vitest.config.ts) with `--shard=<index>/<count>` dealt
 * by assignShards instead of by path hash. The order of the files in a process is vitest's own
 * with the AWAY_FROM_THE_START files next to last and the AFTER_IMAGE_BUILD files last, or, with PORTICO_TEST_SHUFFLE_SEED=<n>, shuffled by that
 * seed: a custom sequencer takes the place of vitest's RandomSequencer, so
 * `--sequence.shuffle.files` has no effect on its own here.
 */
export default class DurationShardSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seed = process.env.PORTICO_TEST_SHUFFLE_SEED;
    if (seed === undefined || seed === '') {
      const { root } = this.ctx.config;
      const pathOf = (spec: TestSpecification): string => relative(root, spec.moduleId);
      return movedLast(
        movedLast(await super.sort(files), pathOf, AWAY_FROM_THE_START),
        pathOf,
        AFTER_IMAGE_BUILD,
      );
    }
    if (!/^\d+$/.test(seed))
      throw new Error(`PORTICO_TEST_SHUFFLE_SEED must be a whole number, got "${seed}"`);
    const byPath = [...files].sort((a, b) =>
      a.moduleId < b.moduleId ? -1 : a.moduleId > b.moduleId ? 1 : 0,
    );
    return shuffleWithSeed(byPath, Number(seed));
  }

  override shard(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { config } = this.ctx;
    const { index, count } = config.shard ?? { index: 1, count: 1 };
    const byPath = new Map(files.map((spec) => [relative(config.root, spec.moduleId), spec]));
    const shards = assignShards([...byPath.keys()], readFileDurations(config.root), count);
    return Promise.resolve((shards[index - 1] ?? []).flatMap((path) => byPath.get(path) ?? []));
  }
}
