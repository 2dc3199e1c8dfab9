import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-file.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    // Two cores: a couple of files at a time keeps Temporal and PostgreSQL responsive.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // expect.poll waits 1 s by default: on two shared cores a page's render or the request log's
    // batched write can take longer. A poll that is going to pass stops as soon as it does.
    expect: { poll: { timeout: 10_000 } },
  },
});
