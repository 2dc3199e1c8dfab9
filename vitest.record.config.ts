import { defineConfig } from 'vitest/config';

/** `npm run record:histories`: the recorder only (see test/workflows/histories.record.ts). */
export default defineConfig({
  test: {
    include: ['test/workflows/histories.record.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-file.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
