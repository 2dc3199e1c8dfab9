import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The routed fault run (minutes) is `npm run test:faults`'s, which sets its length; npm test keeps
    // the mixed fault run as the fast representative, and routed failover is covered file by file.
    exclude: [
      ...configDefaults.exclude,
      ...(process.env.ROUTED_FAULTS_TRAFFIC_MS ? [] : ['test/generations/routed-pause.test.ts']),
    ],
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
