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
    // expect.poll waits 1 s by default: on two shared cores a page's render or the request log's
    // batched write can take longer. A poll that is going to pass stops as soon as it does.
    expect: { poll: { timeout: 10_000 } },
  },
});
