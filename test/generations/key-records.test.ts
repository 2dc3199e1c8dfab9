import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { createActivities } from '../../src/activities/index.js';
import { fingerprint } from '../../src/generations/admission/generation-request.js';
import {
  startGeneration,
  type StartGenerationDeps,
} from '../../src/generations/admission/start-generation.js';
import { getGeneration } from '../../src/db/generation-reads.js';
import { newId, randomBase62 } from '../../src/vocabulary/ids.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { ensureSearchAttributes } from '../../src/temporal/search-attributes-setup.js';
import { createWorker } from '../../src/worker/create-worker.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { admitUpdate, generationWorkflow, progressQuery } from '../../src/workflows/generation-workflow.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

const DAY = 24 * 3600 * 1000;
const timing = {
  submitTimeoutMs: 3000,
  pollIntervalMs: 10,
  resultRetentionMs: 30 * DAY,
  idempotencyRetentionMs: 180 * DAY,
};

/**
 * The Idempotency-Key outlives its generation's workflow (issue 13): the workflow ends after content
 * expiry, and the key's record in PostgreSQL answers until the 180-day horizon. Through the API's
 * own startGeneration, whose clock follows the time-skipping server's.
 */
describe('Idempotency-Key records on the time-skipping server', () => {
  let db: TestDatabase;
  let env: TestWorkflowEnvironment;
  let worker: Awaited<ReturnType<typeof createWorker>>;
  let running: Promise<void>;
  let storageDir: string;
  let deps: StartGenerationDeps;
  let serverNow = 0;
  const taskQueue = `key-records-${randomBase62(8)}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    env = await TestWorkflowEnvironment.createTimeSkipping({
      server: { executable: { type: 'existing-path', path: inject('temporalTestServerPath') } },
    });
    await ensureSearchAttributes(env.connection, 'default');
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'key-records-'));
    const storage = new LocalStorage(storageDir, 'http://results.test');
    const provider = new SimulatedProvider(db.pool, { delayMs: 0 });
    worker = await createWorker({
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
    running = worker.run();
    deps = {
      db: db.pool,
      temporal: env.client,
      taskQueue,
      storage,
      admissionTimeoutMs: 15_000,
      timing,
      clock: () => serverNow,
    };
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await env?.teardown();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  /** A POST as the route makes it, at the test server's time. */
  async function post(account: TestAccount, key: string, body: { model: string; prompt: string }) {
    serverNow = await env.currentTimeMs();
    const { model, ...input } = body;
    return startGeneration(deps, {
      accountId: account.accountId,
      apiKeyId: account.keyId,
      idempotencyKey: key,
      model: { id: model, media_type: 'image' },
      input,
      fingerprint: fingerprint(body),
    });
  }
  const statusOf = async (workflowId: string) =>
    (await env.client.workflow.getHandle(workflowId).describe()).status.name;
  const generationsWithKey = (key: string) =>
    db.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
      SELECT id FROM generations WHERE idempotency_key = ${key} ORDER BY created_at`);
  const keyRecord = (account: TestAccount, key: string) =>
    db.pool.maybeOne(sql.type(z.object({ generation_id: z.string(), held_until: z.string() }))`
      SELECT generation_id, held_until FROM idempotency_keys
      WHERE api_key_id = ${account.keyId} AND idempotency_key = ${key}`);

  it('the workflow ends after content expiry; the record answers replays and conflicts until the horizon, then the key is new', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 100 });
    const body = { model: 'lumen-lite', prompt: 'kept for a month' };
    const first = await post(account, 'month', body);
    expect(first.outcome).toBe('admitted');
    const id = first.generationId;
    const workflowId = await workflowIdOf(db.pool, id);
    await expect
      .poll(async () => (await getGeneration(db.pool, account.accountId, id))?.status, { timeout: 15_000 })
      .toBe('succeeded');
    expect(Date.parse((await keyRecord(account, 'month'))!.held_until)).toBe(
      Date.parse((await getGeneration(db.pool, account.accountId, id))!.created_at) + 180 * DAY,
    );

    await env.sleep(31 * DAY);
    await expect
      .poll(async () => (await getGeneration(db.pool, account.accountId, id))?.content_expired, {
        timeout: 15_000,
      })
      .toBe(true);
    // Nothing holds the workflow open any more: it ends with the content.
    await expect.poll(() => statusOf(workflowId), { timeout: 15_000 }).toBe('COMPLETED');
    const endedRun = (await env.client.workflow.getHandle(workflowId).describe()).runId;

    // A replay, and another body under the key, are answered from the record: no new run.
    // The replay carries the generation as the record's read showed it, to answer with should a later read fail.
    expect(await post(account, 'month', body)).toEqual({
      outcome: 'admitted',
      generationId: id,
      known: await getGeneration(db.pool, account.accountId, id),
    });
    expect(await post(account, 'month', { ...body, prompt: 'another body' })).toEqual({
      outcome: 'conflict',
      generationId: id,
      inputPrefix: null,
    });
    expect((await env.client.workflow.getHandle(workflowId).describe()).runId).toBe(endedRun);
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, submissions: 1 });

    await env.sleep(150 * DAY);
    const fresh = await post(account, 'month', body);
    expect(fresh.outcome).toBe('admitted');
    expect(fresh.generationId).not.toBe(id);
    expect(await generationsWithKey('month')).toEqual([id, fresh.generationId]);
    expect((await keyRecord(account, 'month'))!.generation_id).toBe(fresh.generationId);
    expect(await chargesOf(db.pool, fresh.generationId)).toMatchObject({ debits: 1 });
  }, 120_000);

  it('a request that missed the record (read just before the workflow ended) still answers for its generation', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 100 });
    const body = { model: 'lumen-lite', prompt: 'ended a moment ago' };
    const { generationId: id } = await post(account, 'late', body);
    const workflowId = await workflowIdOf(db.pool, id);
    await expect
      .poll(async () => (await getGeneration(db.pool, account.accountId, id))?.status, { timeout: 15_000 })
      .toBe('succeeded');
    await env.sleep(31 * DAY);
    await expect.poll(() => statusOf(workflowId), { timeout: 15_000 }).toBe('COMPLETED');

    // What startGeneration does when its look-up found no record: update-with-start of a new generation.
    const late: GenerationStart = {
      generationId: newId('gen'),
      workflowId,
      accountId: account.accountId,
      apiKeyId: account.keyId,
      model: 'lumen-lite',
      mediaType: 'image',
      input: { prompt: body.prompt },
      fingerprint: fingerprint(body),
      idempotencyKey: 'late',
      inputPrefix: null,
      createdAt: new Date(await env.currentTimeMs()).toISOString(),
      timing,
    };
    const answer = await env.client.workflow.executeUpdateWithStart(admitUpdate, {
      updateId: `admit-late-${late.generationId}`,
      startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
        workflowId,
        taskQueue,
        args: [late],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
    expect(answer).toMatchObject({
      generationId: id,
      fingerprint: late.fingerprint,
      admission: { outcome: 'accepted', credits: 2 },
    });
    // The run that answered is no generation: it ends at once, charging, submitting and recording nothing.
    const handle = env.client.workflow.getHandle(workflowId);
    expect(await handle.result()).toMatchObject({ generationId: late.generationId, step: 'key_held' });
    expect(await getGeneration(db.pool, account.accountId, late.generationId)).toBeNull();
    expect(await chargesOf(db.pool, late.generationId)).toMatchObject({ debits: 0, submissions: 0 });
    expect(await generationsWithKey('late')).toEqual([id]);
  }, 60_000);

  it('a 402 claims its key in PostgreSQL: the run ends at once, replays keep its error until the horizon', async () => {
    const poor = await createPaidAccount(db.pool, { oneTime: 3 });
    const body = { model: 'lumen-pro', prompt: 'too dear', resolution: '4K' };
    const refused = await post(poor, 'dear', body);
    expect(refused).toMatchObject({ outcome: 'rejected', error: { code: 'insufficient_credits' } });
    const workflowId = await workflowIdOf(db.pool, refused.generationId);
    await expect.poll(() => statusOf(workflowId), { timeout: 15_000 }).toBe('COMPLETED');

    await env.sleep(100 * DAY);
    expect(await post(poor, 'dear', body)).toEqual(refused);
    await env.sleep(81 * DAY);
    const after = await post(poor, 'dear', body);
    expect(after).toMatchObject({ outcome: 'rejected', error: { code: 'insufficient_credits' } });
    expect(after.generationId).not.toBe(refused.generationId);
  }, 60_000);

  it('two first requests with one key meet in one workflow: one generation, one debit', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 100 });
    const body = { model: 'lumen-lite', prompt: 'twins' };
    const [a, b] = await Promise.all([post(account, 'race', body), post(account, 'race', body)]);
    expect(a).toMatchObject({ outcome: 'admitted' });
    expect(b).toEqual(a);
    expect(await generationsWithKey('race')).toEqual([a.generationId]);
    await expect
      .poll(async () => (await getGeneration(db.pool, account.accountId, a.generationId))?.status, {
        timeout: 15_000,
      })
      .toBe('succeeded');
    expect(await chargesOf(db.pool, a.generationId)).toMatchObject({ debits: 1, submissions: 1 });
    // The active run continues as new into its retention run once the generation has succeeded; the
    // time-skipping server never answers a query that reaches a run in that moment, so ask the retention run.
    const handle = env.client.workflow.getHandle(await workflowIdOf(db.pool, a.generationId));
    await expect
      .poll(async () => (await handle.describe()).type, { timeout: 15_000 })
      .toBe('generationRetentionWorkflow');
    expect((await handle.query(progressQuery)).generationId).toBe(a.generationId);
  }, 60_000);
});
