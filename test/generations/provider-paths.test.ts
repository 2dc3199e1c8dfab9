import { describe, expect, it } from 'vitest';
import { resolveUpdate } from '../../src/workflows/generation-workflow.js';
import { NeedsReview, GenerationStatus } from '../../src/workflows/search-attributes.js';
import { useGenerationStack } from '../support/stack.js';
import { bearer } from '../support/api.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, providerJobIdOf, workflowIdOf } from '../support/ledger.js';

/** The spec's transition table, row by row, driven through the simulated provider's directives. */
describe('transitions after admission', () => {
  const stack = useGenerationStack();
  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;
  /** POST → 202: the Generation in its body. */
  const post = async (prompt: string, extra: Record<string, unknown> = {}) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt,
      ...extra,
    });
    expect(response.statusCode).toBe(202);
    return response.json<Record<string, any>>();
  };
  const create = async (prompt: string, extra: Record<string, unknown> = {}) =>
    (await post(prompt, extra)).id as string;

  it('provider finishes → succeeded, output populated, completed_at and expires_at set, charged once', async () => {
    const id = await create('a quiet harbour', { quality: 'high', output_format: 'jpeg' });
    const done = await pollGeneration(stack.api, stack.account.key, id);
    expect(done).toMatchObject({
      status: 'succeeded',
      credits: 4,
      credits_refunded: false,
      error: null,
      content_expired: false,
    });
    expect(done.output.images[0]).toMatchObject({ width: 3072, height: 3072 });
    expect((await fetch(done.output.images[0].url)).headers.get('content-type')).toBe('image/jpeg');
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -4, submissions: 1 });
  });

  it('[sim:fail] a task that fails later → failed, generation_failed, refunded exactly once, credits kept', async () => {
    const before = await balance();
    const id = await create('a storm [sim:fail]');
    const done = await pollGeneration(stack.api, stack.account.key, id);
    expect(done).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      output: null,
      error: { code: 'generation_failed' },
    });
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });

  it('[sim:reject] an explicit provider rejection → refunded → failed with provider_rejected, already in the 202', async () => {
    const before = await balance();
    // The spec: the 202 body may already show a failed generation (a submission refunded immediately).
    const answered = await post('forbidden [sim:reject]');
    expect(answered).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      error: { code: 'provider_rejected' },
    });
    const id = answered.id as string;
    expect(await getGeneration(stack.api, stack.account.key, id)).toEqual(answered);
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 0 });
  });

  it('[sim:slow] stays queued while the provider works', async () => {
    const id = await create('slowly [sim:slow=1.5]');
    await new Promise((r) => setTimeout(r, 700));
    expect((await getGeneration(stack.api, stack.account.key, id)).status).toBe('queued');
    expect((await pollGeneration(stack.api, stack.account.key, id)).status).toBe('succeeded');
  });

  it('[sim:persist-fail=2] result downloads fail twice → persistence recovery retries → succeeded', async () => {
    const id = await create('stubborn storage [sim:persist-fail=2]');
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done.status).toBe('succeeded');
    expect((await fetch(done.output.images[0].url)).status).toBe(200);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
  });

  it('[sim:uncertain=recoverable] the answer is lost, the lookup finds the job: no second submission, succeeded', async () => {
    const id = await create('lost letter [sim:uncertain=recoverable]');
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done.status).toBe('succeeded');
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
  });

  it('[sim:uncertain] acceptance unknown → failed and needing review, nothing refunded; support refunds it', async () => {
    const before = await balance();
    // The 202 already tells the client: the second attempt asked the provider, which could not say.
    const review = await post('into the void [sim:uncertain]');
    const id = review.id as string;
    expect(review).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: false,
      error: { code: 'submission_unresolved' },
    });
    expect(review.error.message).toMatch(/Contact support/);
    expect(await balance()).toBe(before - 2);
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    await expect
      .poll(async () => (await handle.describe()).typedSearchAttributes.get(NeedsReview))
      .toBe(true);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });

    await handle.executeUpdate(resolveUpdate, {
      args: [{ action: 'refund', note: 'provider confirmed nothing ran' }],
    });
    const refunded = await pollGeneration(
      stack.api,
      stack.account.key,
      id,
      (g) => g.credits_refunded === true,
    );
    expect(refunded).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      error: { code: 'generation_failed' },
    });
    expect(await balance()).toBe(before);
    await expect
      .poll(async () => (await handle.describe()).typedSearchAttributes.get(NeedsReview))
      .toBe(false);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });

  it('[sim:uncertain] support resolves as succeeded with the provider job → results persisted, no refund', async () => {
    const id = await create('found later [sim:uncertain]');
    await pollGeneration(
      stack.api,
      stack.account.key,
      id,
      (g) => g.error?.code === 'submission_unresolved',
      30_000,
    );
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    await expect(
      handle.executeUpdate(resolveUpdate, { args: [{ action: 'succeed', providerJobId: '' }] }),
    ).rejects.toThrow();
    await handle.executeUpdate(resolveUpdate, {
      args: [{ action: 'succeed', providerJobId: await providerJobIdOf(stack.db.pool, id) }],
    });
    const done = await pollGeneration(
      stack.api,
      stack.account.key,
      id,
      (g) => g.status === 'succeeded',
      30_000,
    );
    expect(done).toMatchObject({ credits_refunded: false, error: null });
    await expect
      .poll(async () => (await handle.describe()).typedSearchAttributes.get(GenerationStatus))
      .toBe('succeeded');
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    // A generation that is not waiting for review cannot be resolved.
    const refused = await handle
      .executeUpdate(resolveUpdate, { args: [{ action: 'refund' }] })
      .catch((e: Error) => e);
    expect(String((refused as Error).cause)).toMatch(/is succeeded, not waiting for review/);
  });
});
