import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { createDatabasePool } from '../../src/db/pool.js';
import { getGeneration as getGenerationRow, type GenerationRow } from '../../src/db/generation-reads.js';
import { ApiError } from '../../src/vocabulary/errors.js';
import { answerUnanswered } from '../../src/generations/admission/unanswered-admission.js';
import { newId, randomBase62 } from '../../src/vocabulary/ids.js';
import type { ProviderStatus } from '../../src/providers/provider.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * A POST without an Idempotency-Key whose admission outlasts ADMISSION_TIMEOUT_MS: no retry can meet
 * its generation, so it must not be charged behind a 503. Whichever decides first, the request giving
 * up or admission, decides for both.
 */
describe('an unkeyed POST whose admission does not answer in time', () => {
  let submitDelayMs = 0;
  const stack = useGenerationStack({
    // The handover may take 10 s an attempt (so a slow submit is not retried), the POST waits 3.
    apiEnv: { ADMISSION_TIMEOUT_MS: '3000', PROVIDER_SUBMIT_TIMEOUT_MS: '10000' },
    account: { oneTime: 10 },
    worker: {
      wrapProvider: (simulated) => ({
        submit: async (job) => {
          await delay(submitDelayMs);
          return simulated.submit(job);
        },
        status: (jobId): Promise<ProviderStatus> => simulated.status(jobId),
        fetchResult: (jobId, index, result) => simulated.fetchResult(jobId, index, result),
        lookup: (token) => simulated.lookup(token),
        cancel: (jobId) => simulated.cancel(jobId),
      }),
    },
  });
  const credits = async () =>
    (
      await stack.api.app.inject({
        method: 'GET',
        url: '/v1/credits',
        headers: { authorization: `Bearer ${stack.account.key}` },
      })
    ).json().credits as number;

  it('gives up first when no worker admits it: 503, recorded refused, and the admission that comes later charges nothing', async () => {
    await stack.worker.stopWorker();
    const body = { model: 'lumen-lite', prompt: 'nobody is listening' };
    const refused = await createGeneration(stack.api, stack.account.key, body);
    expect(refused.statusCode).toBe(503);
    expect(refused.json().error).toMatchObject({
      code: 'service_unavailable',
      message: expect.stringContaining('not charged'),
    });
    const id = String(refused.headers['x-request-id']);
    expect(id).toMatch(/^gen_/);

    // The worker comes back and runs the workflow the POST started: admission finds the refusal.
    await stack.worker.startWorker();
    // Its active life ends either way: refused at admission (now), or having run (a charged 503).
    const handle = stack.client.workflow.getHandle(`generation-${id}`);
    await expect
      .poll(
        async () => {
          const run = await handle.describe();
          return run.status.name !== 'RUNNING' || run.type === 'generationRetentionWorkflow';
        },
        { timeout: 30_000 },
      )
      .toBe(true);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 0, refunds: 0, net: 0, submissions: 0 });
    expect(await credits()).toBe(10);
    const shown = await getGeneration(stack.api, stack.account.key, id);
    expect(shown).toMatchObject({ status: 'rejected', credits: 0, error: { code: 'service_unavailable' } });
  }, 60_000);

  it('is answered with its generation when admission decided first: 202 queued, charged once, and it runs', async () => {
    submitDelayMs = 6000;
    try {
      const body = { model: 'lumen-lite', prompt: 'a slow hand-over' };
      const answered = await createGeneration(stack.api, stack.account.key, body);
      expect(answered.statusCode).toBe(202);
      const generation = answered.json();
      expect(generation).toMatchObject({ status: 'queued', credits: 2 });
      const done = await pollGeneration(stack.api, stack.account.key, generation.id as string);
      expect(done.status).toBe('succeeded');
      expect(await chargesOf(stack.db.pool, generation.id as string)).toEqual({
        debits: 1,
        refunds: 0,
        net: -2,
        submissions: 1,
      });
      expect(await credits()).toBe(8);
    } finally {
      submitDelayMs = 0;
    }
  }, 60_000);

  it('admission decided first but its generation cannot be read: 202 with what is known, not a 503 (issue 35, item 5)', async () => {
    // A role that may write a refusal (and learn that the row is there) but not read the row back:
    // PostgreSQL itself refuses the read, as it would while a replica lags or a connection breaks.
    const role = `unanswered_${randomBase62(8).toLowerCase()}`;
    const { pool } = stack.db;
    const admin = new pg.Client({ connectionString: stack.db.url });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'reader'`);
    await admin.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    await admin.query(`GRANT SELECT, UPDATE ON accounts TO ${role}`);
    await admin.query(`GRANT INSERT, SELECT (id) ON generations TO ${role}`);
    const url = new URL(stack.db.url);
    url.username = role;
    url.password = 'reader';
    const restricted = await createDatabasePool(url.toString(), { maximumPoolSize: 1 });
    try {
      const generationId = newId('gen');
      const start = {
        generationId,
        workflowId: `generation-${generationId}`,
        accountId: stack.account.accountId,
        apiKeyId: stack.account.keyId,
        model: 'lumen-lite',
        mediaType: 'image' as const,
        input: { prompt: 'decided first' },
        fingerprint: 'f'.repeat(64),
        idempotencyKey: null,
        inputPrefix: null,
        createdAt: new Date().toISOString(),
        timing: { submitTimeoutMs: 1, pollIntervalMs: 1, resultRetentionMs: 1, idempotencyRetentionMs: 1 },
      };
      // Admission wrote it first: accepted, debited.
      await pool.query(sql.unsafe`
        INSERT INTO generations (id, account_id, api_key_id, workflow_id, status, model, media_type, credits,
                                 input, fingerprint, created_at)
        VALUES (${generationId}, ${start.accountId}, ${start.apiKeyId}, ${start.workflowId}, 'queued',
                'lumen-lite', 'image', 2, ${sql.jsonb(start.input)}, ${start.fingerprint}, ${start.createdAt})`);
      const assumed: GenerationRow = {
        id: generationId,
        account_id: start.accountId,
        status: 'queued',
        model: 'lumen-lite',
        media_type: 'image',
        credits: 2,
        credits_refunded: false,
        input: start.input,
        output: null,
        error: null,
        needs_review: false,
        content_expired: false,
        provider: null,
        created_at: start.createdAt,
        completed_at: null,
        expires_at: null,
        batch_id: null,
        custom_id: null,
        cancel_after: null,
      };
      // The role can tell the row is there (a refusal is not written over it), and cannot read it.
      await expect(getGenerationRow(restricted, start.accountId, generationId)).rejects.toThrow(
        /permission denied/,
      );
      const failure = new ApiError('service_unavailable', 'Admission did not answer in time.');
      const answer = await answerUnanswered(restricted, start, failure, assumed).catch((e: unknown) => e);
      expect(answer).toEqual({ outcome: 'admitted', generationId, known: assumed });
    } finally {
      await restricted.end();
      await admin.query(`DROP OWNED BY ${role}`);
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    }
  });
});
