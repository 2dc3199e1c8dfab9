import { describe, expect, it } from 'vitest';
import { cancelUpdate, progressQuery, resolveUpdate } from '../../src/workflows/generation-messages.js';
import { generationWorkflow } from '../../src/workflows/generation-workflow.js';
import {
  AccountId,
  GenerationId,
  GenerationStatus,
  NeedsReview,
} from '../../src/workflows/search-attributes.js';
import { bearer } from '../support/api.js';
import { createGeneration, generationStart, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, providerJobIdOf, workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * A generation's active life continues as new into its retention run (Auto-Upgrade, on the current
 * version), which must answer everything a run of that workflow id answers: a repeated POST with
 * the Idempotency-Key, a cancel, the progress query, support's resolve, and the search attributes.
 */
describe('the retention run answers for the generation', () => {
  const stack = useGenerationStack();

  it('a succeeded generation: repeated POST, cancel, progress and search attributes answer from the retention run', async () => {
    const body = { model: 'lumen-lite', prompt: 'kept for thirty days' };
    const first = await createGeneration(stack.api, stack.account.key, body, 'retention-run-key');
    expect(first.statusCode).toBe(202);
    const id = first.json().id as string;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    await expect.poll(async () => (await handle.describe()).type).toBe('generationRetentionWorkflow');
    const retention = await handle.describe();
    // Same workflow id, carried search attributes (the Temporal UI's and support's queries).
    expect(retention.typedSearchAttributes.get(GenerationId)).toBe(id);
    expect(retention.typedSearchAttributes.get(AccountId)).toBe(stack.account.accountId);
    expect(retention.typedSearchAttributes.get(GenerationStatus)).toBe('succeeded');
    expect(retention.typedSearchAttributes.get(NeedsReview)).toBe(false);
    expect(await handle.query(progressQuery)).toMatchObject({ generationId: id, step: 'succeeded' });

    // A repeat of the POST lands on the retention run (update-with-start, USE_EXISTING): the original.
    const again = await createGeneration(stack.api, stack.account.key, body, 'retention-run-key');
    expect(again.statusCode).toBe(202);
    expect(again.json()).toMatchObject({ id, status: 'succeeded' });
    const conflict = await createGeneration(
      stack.api,
      stack.account.key,
      { ...body, prompt: 'another body' },
      'retention-run-key',
    );
    expect(conflict.statusCode).toBe(409);

    const cancel = await stack.api.app.inject({
      method: 'POST',
      url: `/v1/generations/${id}/cancel`,
      headers: bearer(stack.account.key),
    });
    expect(cancel.statusCode).toBe(409);
    expect(cancel.json().error.code).toBe('not_cancelable');
    expect(await handle.executeUpdate(cancelUpdate, { args: [id] })).toEqual({
      outcome: 'not_cancelable',
      step: 'succeeded',
    });
    const refused = await handle
      .executeUpdate(resolveUpdate, { args: [{ action: 'refund' }] })
      .catch((e: Error) => e);
    expect(String((refused as Error).cause)).toMatch(/is succeeded, not waiting for review/);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    // Still the one workflow id, now on its second run; nothing was started for the repeat.
    expect((await handle.describe()).runId).toBe(retention.runId);
  });

  it('a review support does not answer within the hand-off moves to the review run, which resolves it', async () => {
    const start = generationStart(stack.account, 'unanswered for a while [sim:uncertain]');
    start.timing = { ...start.timing, reviewHandOffMs: 300, pollIntervalMs: 50 };
    const handle = await stack.client.workflow.start(generationWorkflow, {
      workflowId: start.workflowId,
      taskQueue: stack.worker.taskQueue,
      args: [start],
      typedSearchAttributes: [{ key: GenerationId, value: start.generationId }],
    });
    await expect
      .poll(async () => (await handle.describe()).type, { timeout: 15_000 })
      .toBe('generationRetentionWorkflow');
    const review = await handle.describe();
    expect(review.typedSearchAttributes.get(NeedsReview)).toBe(true);
    expect(review.typedSearchAttributes.get(GenerationId)).toBe(start.generationId);
    expect(await handle.query(progressQuery)).toMatchObject({ step: 'needs_review' });
    expect(await handle.executeUpdate(cancelUpdate, { args: [start.generationId] })).toMatchObject({
      outcome: 'not_cancelable',
    });

    // Support names the provider's job: a fresh active run waits for it and persists.
    const jobId = await providerJobIdOf(stack.db.pool, start.generationId);
    await handle.executeUpdate(resolveUpdate, { args: [{ action: 'succeed', providerJobId: jobId }] });
    await expect
      .poll(async () => (await getGeneration(stack.api, stack.account.key, start.generationId)).status, {
        timeout: 20_000,
      })
      .toBe('succeeded');
    expect(await chargesOf(stack.db.pool, start.generationId)).toEqual({
      debits: 1,
      refunds: 0,
      net: -2,
      submissions: 1,
    });
    await expect
      .poll(async () => (await handle.describe()).typedSearchAttributes.get(NeedsReview))
      .toBe(false);
  });
});
