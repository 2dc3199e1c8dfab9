import { defineConfig } from 'vitest/config';

/** `npm run console:screenshots`: the console's pages in Chromium, saved to docs/console/ (not part of npm test). */
export default defineConfig({
  test: {
    include: ['test/console/screenshots.shots.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-file.ts'],
    pool: 'forks',
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
