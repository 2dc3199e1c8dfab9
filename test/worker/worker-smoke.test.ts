import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { healthCheckWorkflow } from '../../src/workflows/index.js';
import { AccountId, GenerationStatus, Model, NeedsReview } from '../../src/workflows/search-attributes.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('worker on the Temporal dev server', () => {
  let db: TestDatabase;
  let connection: Connection;
  beforeAll(async () => {
    db = await createTestDatabase();
    connection = await Connection.connect({ address: inject('temporalAddress') });
  });
  afterAll(async () => {
    await connection?.close();
    await db?.drop();
  });

  it('runs a workflow whose activity reaches PostgreSQL, with our search attributes set', async () => {
    const taskQueue = `smoke-${Date.now()}`;
    const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await createWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      activities: createActivities({
        db: db.pool,
        providerFor: () => {
          throw new Error('no provider');
        },
        storage: new LocalStorage('/nonexistent', 'http://127.0.0.1:1'),
        concurrencyLimit: 1,
        temporal: () => Promise.resolve(client),
      }),
      workflowBundlePath: inject('workflowBundlePath'),
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
