import { configDefaults, defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The routed fault run and the submit's kill run (minutes each) are `npm run test:faults`'s,
    // which sets their lengths; npm test keeps the mixed fault run and a worker killed mid-submit
    // (submit-prepare-kill) as the fast representatives, and routed failover is covered file by file.
    exclude: [
      ...configDefaults.exclude,
      ...(process.env.ROUTED_FAULTS_TRAFFIC_MS ? [] : ['test/generations/routed-pause.test.ts']),
      ...(process.env.SUBMIT_CLAIM_WINDOW_MS ? [] : ['test/generations/submit-chaos.test.ts']),
    ],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup-file.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    pool: 'forks',
    // Files share their test process (three processes in all), with its imports: each file spent
    // about a fifth of its time importing and setting up before (the suite 15:09 → 12:15 on two
    // cores, 21.8 → 17.2 CPU-minutes). A file leaves no process state behind: what it changes in
    // process.env it puts back, and test/setup-file.ts installs the SDK's runtime once.
    isolate: false,
    // The longest files first, on a fresh clone too (test/support/slow-first-sequencer.ts).
    sequence: { sequencer: SlowFirstSequencer },
    // Two cores, three files at a time: most files spend their time waiting on timers, processes
    // and the providers' simulated jobs, so a third file fills the cores' idle time (the suite in
    // 14–15 minutes with two would not fit its budget once the MCP and batch tests came).
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // expect.poll waits 1 s by default: on two shared cores a page's render or the request log's
    // batched write can take longer. A poll that is going to pass stops as soon as it does.
    expect: { poll: { timeout: 10_000 } },
  },
});
