import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { getGeneration } from '../../src/db/generation-reads.js';
import { newId, randomBase62 } from '../../src/vocabulary/ids.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { ensureSearchAttributes } from '../../src/temporal/search-attributes-setup.js';
import { createWorker } from '../../src/worker/create-worker.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { admitUpdate, generationWorkflow, progressQuery } from '../../src/workflows/generation-workflow.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';

const DAY = 24 * 3600 * 1000;

/** Month-long timers on the time-skipping test server: 30-day content expiry and the 180-day key horizon. */
describe('retention on the time-skipping server', () => {
  let db: TestDatabase;
  let env: TestWorkflowEnvironment;
  let storageDir: string;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    env = await TestWorkflowEnvironment.createTimeSkipping({
      server: { executable: { type: 'existing-path', path: inject('temporalTestServerPath') } },
    });
    await ensureSearchAttributes(env.connection, 'default');
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'retention-'));
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(async () => {
    await env?.teardown();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  const startFor = (workflowId: string): GenerationStart => ({
    generationId: newId('gen'),
    workflowId,
    accountId: account.accountId,
    apiKeyId: account.keyId,
    model: 'lumen-lite',
    mediaType: 'image',
    input: { prompt: 'a month-long wait' },
    fingerprint: 'f'.repeat(64),
    idempotencyKey: 'retention',
    inputPrefix: null,
    createdAt: new Date(Date.now()).toISOString(),
    timing: {
      submitTimeoutMs: 3000,
      pollIntervalMs: 10,
      resultRetentionMs: 30 * DAY,
      idempotencyRetentionMs: 180 * DAY,
    },
  });
  const admit = (taskQueue: string, workflowId: string) =>
    env.client.workflow.executeUpdateWithStart(admitUpdate, {
      updateId: `admit-${workflowId}`,
      startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
        workflowId,
        taskQueue,
        args: [startFor(workflowId)],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });

  it('expires content 30 days after storage, replays as expired, and frees the key after 180 days', async () => {
    const taskQueue = `retention-${randomBase62(8)}`;
    const storage = new LocalStorage(storageDir, 'http://results.test');
    const provider = new SimulatedProvider(db.pool, { delayMs: 0 });
    const worker = await createWorker({
      connection: env.nativeConnection,
      namespace: 'default',
      taskQueue,
      workflowBundlePath: inject('workflowBundlePath'),
      activities: createActivities({
        db: db.pool,
        providerFor: () => provider,
        storage,
        concurrencyLimit: 10,
        temporal: () => Promise.resolve(env.client),
      }),
    });
    const workflowId = `generation-retention-${randomBase62(8)}`;

    await worker.runUntil(async () => {
      const first = await admit(taskQueue, workflowId);
      expect(first.admission).toEqual({ outcome: 'accepted', credits: 2 });
      const handle = env.client.workflow.getHandle(workflowId);
      // The active life ends succeeded and continues as the retention run, which keeps the results.
      await expect
        .poll(async () => (await handle.describe()).type, { timeout: 15_000 })
        .toBe('generationRetentionWorkflow');
      expect((await handle.query(progressQuery)).step).toBe('succeeded');

      const stored = await getGeneration(db.pool, account.accountId, first.generationId);
      expect(stored).toMatchObject({ status: 'succeeded', content_expired: false });
      expect(Date.parse(stored!.expires_at!) - Date.parse(stored!.completed_at!)).toBe(30 * DAY);
      const file = path.join(
        storageDir,
        new URL(String((stored!.output!.images as Array<{ url: string }>)[0]!.url)).pathname,
      );
      expect(existsSync(file)).toBe(true);

      await env.sleep(29 * DAY);
      expect((await getGeneration(db.pool, account.accountId, first.generationId))!.content_expired).toBe(
        false,
      );
      await env.sleep(2 * DAY);
      await expect
        .poll(
          async () => (await getGeneration(db.pool, account.accountId, first.generationId))!.content_expired,
          { timeout: 15_000 },
        )
        .toBe(true);
      const expired = await getGeneration(db.pool, account.accountId, first.generationId);
      expect(expired).toMatchObject({
        status: 'succeeded',
        input: null,
        output: null,
        credits: 2,
        credits_refunded: false,
      });
      expect(existsSync(file)).toBe(false);

      // Within the horizon the key still names the expired generation: no new debit, no new job.
      const replay = await admit(taskQueue, workflowId);
      expect(replay.generationId).toBe(first.generationId);

      await env.sleep(150 * DAY);
      await handle.result();
      // After the horizon the key is new: the same call starts a new generation.
      const fresh = await admit(taskQueue, workflowId);
      expect(fresh.generationId).not.toBe(first.generationId);
      expect(fresh.admission.outcome).toBe('accepted');
    });
  }, 120_000);
});
