import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The default output, then one line per failure at the very end (test/failure-summary-reporter.ts).
    reporters: ['default', './test/failure-summary-reporter.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/e2e/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 600_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
