import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { z } from 'zod';
import { createActivities } from '../../src/activities/index.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { AccountId, GenerationStatus, Model, NeedsReview } from '../../src/workflows/search-attributes.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { healthCheckWorkflow, type HealthActivities } from './health-check-workflow.js';

describe('worker on the Temporal dev server', () => {
  let db: TestDatabase;
  let connection: Connection;
  let bundleDir: string;
  let bundlePath: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    connection = await Connection.connect({ address: inject('temporalAddress') });
    // The production bundle holds the generation workflows only; this test's workflow is bundled here.
    bundleDir = await mkdtemp(path.join(os.tmpdir(), 'smoke-bundle-'));
    bundlePath = path.join(bundleDir, 'workflow-bundle.js');
    const { code } = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('./health-check-workflow.ts', import.meta.url)),
      logger: new DefaultLogger('WARN'),
    });
    await writeFile(bundlePath, code);
  });
  afterAll(async () => {
    await connection?.close();
    await db?.drop();
    if (bundleDir) await rm(bundleDir, { recursive: true, force: true });
  });

  it('runs a workflow whose activity reaches PostgreSQL, with our search attributes set', async () => {
    const taskQueue = `smoke-${Date.now()}`;
    const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const health: HealthActivities = {
      databaseTime: () => db.pool.oneFirst(sql.type(z.object({ now: z.string() }))`SELECT now() AS now`),
    };
    // The production activities, and this test's own beside them.
    const activities = {
      ...createActivities({
        db: db.pool,
        providerFor: () => {
          throw new Error('no provider');
        },
        storage: new LocalStorage('/nonexistent', 'http://127.0.0.1:1'),
        concurrencyLimit: 1,
        temporal: () => Promise.resolve(client),
      }),
      ...health,
    };
    const worker = await createWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      activities,
      workflowBundlePath: bundlePath,
    });
    const client = new Client({ connection });
    const workflowId = `health-${Date.now()}`;
    const result = await worker.runUntil(
      client.workflow.execute(healthCheckWorkflow, {
        workflowId,
        taskQueue,
        typedSearchAttributes: [
          { key: GenerationStatus, value: 'queued' },
          { key: AccountId, value: 'acct_smoke' },
          { key: Model, value: 'lumen-pro' },
          { key: NeedsReview, value: false },
        ],
      }),
    );
    await nativeConnection.close();

    expect(result.workflowId).toBe(workflowId);
    expect(Date.now() - Date.parse(result.databaseTime)).toBeLessThan(60_000);
    const description = await client.workflow.getHandle(workflowId).describe();
    expect(description.status.name).toBe('COMPLETED');
    expect(description.typedSearchAttributes.get(AccountId)).toBe('acct_smoke');
    expect(description.typedSearchAttributes.get(NeedsReview)).toBe(false);
  });
});
