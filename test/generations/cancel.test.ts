import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { generationSchema } from '../../src/api/schemas.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

describe('POST /v1/generations/{id}/cancel with the simulated provider', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 50 }, account: { oneTime: 1000 } });
  const cancel = (id: string, key = stack.account.key) =>
    stack.api.app.inject({ method: 'POST', url: `/v1/generations/${id}/cancel`, headers: bearer(key) });
  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode).toBe(202);
    return String(response.headers['x-request-id']);
  };
  const balance = () =>
    stack.db.pool.oneFirst(
      sql.unsafe`SELECT one_time_credits FROM credit_balances WHERE account_id = ${stack.account.accountId}`,
    );

  it('a job still in the provider’s queue is stopped: failed, canceled, refunded once; a second cancel is 200', async () => {
    const before = await balance();
    const id = await create('waits in the queue [sim:queued=60]');
    const response = await cancel(id);
    expect(response.statusCode).toBe(200);
    expect(response.headers['x-request-id']).toBe(id);
    const generation = generationSchema.parse(response.json());
    expect(generation).toMatchObject({
      id,
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      output: null,
      error: { code: 'canceled' },
    });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({
      debits: 1,
      refunds: 1,
      net: 0,
      submissions: 1,
    });
    expect(await balance()).toBe(before);
    const again = await cancel(id);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(response.json());
    expect(await getGeneration(stack.api, stack.account.key, id)).toEqual(response.json());
    expect((await chargesOf(stack.db.pool, id)).refunds).toBe(1);
  });

  it('a job the provider is running is not cancelable: 409 with the generation, which then succeeds and is charged', async () => {
    const id = await create('runs at once [sim:slow=3]');
    const response = await cancel(id);
    expect(response.statusCode).toBe(409);
    expect(response.json().error.code).toBe('not_cancelable');
    expect(generationSchema.parse(response.json().generation)).toMatchObject({ id, status: 'queued' });
    const done = await pollGeneration(stack.api, stack.account.key, id);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a terminal generation is 409 not_cancelable with the generation, and nothing changes', async () => {
    const id = await create('quick');
    const done = await pollGeneration(stack.api, stack.account.key, id);
    const failed = await create('[sim:fail]');
    await pollGeneration(stack.api, stack.account.key, failed);
    for (const target of [id, failed]) {
      const response = await cancel(target);
      expect(response.statusCode).toBe(409);
      expect(response.json().error.code).toBe('not_cancelable');
      expect(response.json().generation.id).toBe(target);
    }
    expect(await getGeneration(stack.api, stack.account.key, id)).toEqual(done);
    expect((await chargesOf(stack.db.pool, failed)).refunds).toBe(1);
  });

  it('an unknown id, or another account’s, is 404', async () => {
    const id = await create('mine [sim:queued=60]');
    const stranger = await createPaidAccount(stack.db.pool);
    expect((await cancel(id, stranger.key)).statusCode).toBe(404);
    expect((await cancel('gen_doesNotExist000000')).statusCode).toBe(404);
    expect((await cancel(id)).statusCode).toBe(200);
  });

  it('a cancel racing the job leaving the queue: either canceled and refunded once, or delivered and charged, never both', async () => {
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => create(`race ${i} [sim:queued=1]`)));
    // Cancels spread across the moment each job leaves the queue.
    const answers = await Promise.all(
      ids.map(async (id, i) => {
        await new Promise((r) => setTimeout(r, 700 + i * 100));
        return cancel(id);
      }),
    );
    const outcomes = new Set<number>();
    for (const [i, id] of ids.entries()) {
      const answer = answers[i]!;
      outcomes.add(answer.statusCode);
      const final = await pollGeneration(stack.api, stack.account.key, id);
      const charges = await chargesOf(stack.db.pool, id);
      if (answer.statusCode === 200) {
        expect(final).toMatchObject({
          status: 'failed',
          error: { code: 'canceled' },
          credits_refunded: true,
        });
        expect(final.output).toBeNull();
        expect(charges).toMatchObject({ debits: 1, refunds: 1 });
      } else {
        expect(answer.statusCode).toBe(409);
        expect(final).toMatchObject({ status: 'succeeded', credits_refunded: false });
        expect(charges).toMatchObject({ debits: 1, refunds: 0 });
      }
    }
    expect([...outcomes].every((s) => s === 200 || s === 409)).toBe(true);
  });

  it('a cancel sent while no worker runs is decided when one is back (a worker kill), once', async () => {
    const id = await create('queued through a restart [sim:queued=60]');
    await stack.worker.stopWorker();
    const pending = cancel(id);
    await new Promise((r) => setTimeout(r, 500));
    await stack.worker.startWorker();
    let response = await pending;
    // The API gives up waiting after its admission timeout: the same cancel again gets the decision.
    for (let attempt = 0; response.statusCode === 503 && attempt < 10; attempt++) response = await cancel(id);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1 });
  });

  describe('"Request Cancellation" on the run (Temporal UI, temporal workflow cancel) follows the same rules', () => {
    it('a queued job is stopped and refunded within seconds, and the run completes', async () => {
      const id = await create('operator stops it [sim:queued=60]');
      const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
      await handle.cancel();
      const final = await pollGeneration(
        stack.api,
        stack.account.key,
        id,
        (g) => g.status !== 'queued',
        10_000,
      );
      expect(final).toMatchObject({ status: 'failed', error: { code: 'canceled' }, credits_refunded: true });
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1 });
    });

    it('a running job runs on: the request changes nothing, and it is delivered and charged', async () => {
      const id = await create('operator cannot [sim:slow=2]');
      await stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id)).cancel();
      const final = await pollGeneration(stack.api, stack.account.key, id);
      expect(final).toMatchObject({ status: 'succeeded', credits_refunded: false });
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    });
  });
});
