import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { freePort } from '../src/dev/free-port.js';
import { startMigratedPostgres } from '../src/dev/migrated-postgres.js';
import { startTemporalDevServer } from '../src/dev/temporal-dev-server.js';
import { temporalTestServerPath } from '../src/dev/temporal-binaries.js';
import { buildWorkflowBundle } from '../src/worker/workflow-bundle.js';

export const TEMPLATE_DATABASE = 'template_app';

/**
 * Starts, once per test run, the real servers every test file shares: an
 * embedded PostgreSQL holding a migrated template database (each file clones
 * its own database from it) and an in-memory Temporal dev server. The workflow
 * bundle is built once here too, and the Temporal time-skipping server is
 * fetched (many files use it). Tools only a few files use (moto's S3, Valkey)
 * are fetched by the first of those files, so a run without them fetches none.
 */
export default async function setup(project: TestProject) {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'generation-service-test-'));
  const postgres = await startMigratedPostgres({
    dataDir: path.join(process.cwd(), '.data', `test-postgres-${process.pid}`),
    port: await freePort(),
    database: TEMPLATE_DATABASE,
    persistent: false,
  });

  const temporal = await startTemporalDevServer({
    port: await freePort(),
    uiPort: null,
    dbFile: null,
    // Every test file's workers poll task queues of their own, all in one Worker Deployment version
    // (one build of the workflow code): past the server's default of 100 task queues per version, a
    // new queue is never routed and its generations never start.
    // Timers: the server's default shifts a timer's firing by up to 1 s, so a test's 50 ms poll
    // between two reads of a job would take a second each (2 s per generation on the stand-ins).
    dynamicConfig: {
      'matching.maxTaskQueuesInDeploymentVersion': 10_000,
      'history.timerProcessorMaxTimeShift': '10ms',
    },
  });
  const bundlePath = path.join(scratch, 'workflow-bundle.js');
  await buildWorkflowBundle(bundlePath);
  // Fetched now (once, outside any test's timeout) so time-skipping tests start at once.
  const testServerPath = await temporalTestServerPath();

  project.provide('pgAdminUrl', postgres.adminUrl);
  project.provide('pgTemplate', TEMPLATE_DATABASE);
  project.provide('temporalAddress', temporal.address);
  project.provide('workflowBundlePath', bundlePath);
  project.provide('temporalTestServerPath', testServerPath);

  return async () => {
    await temporal.stop();
    await postgres.stop();
    await rm(scratch, { recursive: true, force: true });
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    temporalAddress: string;
    workflowBundlePath: string;
    temporalTestServerPath: string;
  }
}
