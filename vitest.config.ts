import { defineConfig } from 'vitest/config';
import DurationShardSequencer from './test/e2e-shards.js';

export default defineConfig({
  test: {
    // The default output, the slowest files (all of them with their times in test-results/durations.json,
    // test/duration-reporter.ts), then one line per failure at the very end (test/failure-summary-reporter.ts).
    reporters: ['default', './test/duration-reporter.ts', './test/failure-summary-reporter.ts'],
    // `--shard=<i>/<n>` deals the e2e files by their measured time (test/e2e-shards.ts); scripts/test.sh
    // runs each shard in its own process on a stack of its own.
    sequence: { sequencer: DurationShardSequencer },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'test/*.test.ts'],
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/e2e/global-setup.ts'],
          // After each file's own afterAll hooks: removes what the file made (test/e2e/support/file-cleanup.ts).
          setupFiles: ['test/e2e/support/file-cleanup.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
      {
        // `npm run release:check`, not part of `npm test`: a release of every plugin platform and a
        // second build of its image (test/release/; docs/testing.md, "The release's other platforms"),
        // on the e2e project's stack.
        test: {
          name: 'release',
          include: ['test/release/**/*.test.ts'],
          globalSetup: ['test/e2e/global-setup.ts'],
          setupFiles: ['test/e2e/support/file-cleanup.ts'],
          testTimeout: 120_000,
          hookTimeout: 1_200_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
