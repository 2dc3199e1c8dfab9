import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { until, useCancelStack } from '../support/cancel-stack.js';
import { getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 20 §3's cancel per provider, end to end: the real API, the generation workflow on the
 * Temporal dev server and the real worker process (`npm run worker`), against the protocol fakes
 * of fal, Replicate and OpenAI. Never run: 200, failed `canceled`, refunded once. Running or run
 * (the provider bills it): 409 not_cancelable with the generation, nothing changed.
 */
describe('cancel at each provider', () => {
  const { stack, cancel, balance, handedOver, killWorker, restartWorker, ...calls } = useCancelStack(
    'cancel',
    {
      openai: true,
    },
  );
  const create = async (body: Record<string, unknown>) => (await calls.create(body)).id;
  const expectCanceled = async (id: string, response: Awaited<ReturnType<typeof cancel>>, before: number) => {
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({
      id,
      status: 'failed',
      credits_refunded: true,
      output: null,
      error: { code: 'canceled' },
    });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(await balance()).toBe(before);
    // Idempotent: the same answer again, and still one refund.
    const again = await cancel(id);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(response.json());
    expect((await chargesOf(stack.db.pool, id)).refunds).toBe(1);
  };
  const expectNotCancelable = (id: string, response: Awaited<ReturnType<typeof cancel>>) => {
    expect(response.statusCode, response.body).toBe(409);
    expect(response.json().error.code).toBe('not_cancelable');
    expect(response.json().generation).toMatchObject({ id, status: 'queued', credits_refunded: false });
  };

  it('fal IN_QUEUE: 200 canceled and refunded once; fal saw the cancel and never ran the request', async () => {
    const prompt = 'fal waits in its queue';
    stack.fal.script({ pollsInQueue: 1_000_000 }, promptContains(prompt));
    const before = await balance();
    const id = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    await expectCanceled(id, await cancel(id), before);
    const job = stack.fal.accepted().find((j) => j.input.prompt === prompt)!;
    expect(job.cancelled).toBe(true);
    // It never left the queue: a result read from fal is the cancellation's error, never an output.
    expect(job.result === undefined || job.result.status === 499).toBe(true);
  });

  it('fal IN_PROGRESS: 409 with the generation, nothing changed; it then succeeds and is charged', async () => {
    const prompt = 'fal is already running it';
    stack.fal.script({ pollsInQueue: 0, hold: true }, promptContains(prompt));
    const id = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    const job = await until(() => stack.fal.accepted().find((j) => j.input.prompt === prompt) ?? null);
    // The wait's first poll takes it out of the queue: fal's runner has it.
    await until(() => stack.fal.statusOf(job.id) === 'IN_PROGRESS');
    expectNotCancelable(id, await cancel(id));
    expect(stack.fal.accepted().find((j) => j.id === job.id)!.cancelled).toBe(false);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    stack.fal.release(job.id);
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('Replicate starting: 200 canceled and refunded once; the prediction was canceled before it started', async () => {
    const prompt = 'replicate has not started it';
    stack.replicate.script({ pollsStarting: 1_000_000 }, promptContains(prompt));
    const before = await balance();
    const id = await create({ model: 'replicate-flux-schnell', prompt });
    await handedOver(id);
    await expectCanceled(id, await cancel(id), before);
    const prediction = stack.replicate.accepted().find((p) => p.input.prompt === prompt)!;
    expect(prediction.canceled).toBe(true);
  });

  it('Replicate processing: 409 with the generation; it then succeeds and is charged', async () => {
    const prompt = 'replicate is processing it';
    stack.replicate.script({ pollsStarting: 0, hold: true }, promptContains(prompt));
    const id = await create({ model: 'replicate-flux-schnell', prompt });
    await handedOver(id);
    const prediction = await until(
      () => stack.replicate.accepted().find((p) => p.input.prompt === prompt) ?? null,
    );
    expectNotCancelable(id, await cancel(id));
    expect(stack.replicate.accepted().find((p) => p.id === prediction.id)!.canceled).toBe(false);
    stack.replicate.release(prediction.id);
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('OpenAI sent: 409 with the generation; the call completes and is charged', async () => {
    const prompt = 'openai call in flight';
    stack.openai!.script({ delayMs: 4_000 }, promptContains(prompt));
    const id = await create({ model: 'openai-gpt-image-1', prompt });
    await until(() => stack.openai!.requests.some((r) => r.body.includes(prompt)), 30_000);
    expectNotCancelable(id, await cancel(id));
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(stack.openai!.accepted().filter((c) => c.input.prompt === prompt)).toHaveLength(1);
  });

  it('OpenAI pending (OpenAI unreachable, nothing sent yet): 200 canceled, refunded once, OpenAI got no call', async () => {
    const prompt = 'openai call not sent yet';
    const before = await balance();
    const call = () =>
      stack.db.pool.maybeOne(sql.type(z.object({ state: z.string(), error: z.string().nullable() }))`
        SELECT state, error FROM openai_image_calls WHERE token = ${`tok_${id}`}`);
    // Connections refused: the wait's call provably never left us, so it goes back to pending.
    await stack.openai!.goDown();
    let id = '';
    try {
      id = await create({ model: 'openai-gpt-image-1', prompt });
      await waitFor(async () => {
        const row = await call();
        return row?.state === 'pending' && row.error !== null;
      }, 30_000);
      await expectCanceled(id, await cancel(id), before);
    } finally {
      await stack.openai!.goUp();
    }
    expect((await call())!.state).toBe('canceled');
    // OpenAI is back; the wait (if it tries again) finds nothing to send.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(stack.openai!.requests.filter((r) => r.body.includes(prompt))).toHaveLength(0);
    expect((await call())!.state).toBe('canceled');
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
  });

  describe('a cancel while the worker is dead (SIGKILL)', () => {
    /** Sends the cancel now, and again while the API gives up waiting (503), until it is decided. */
    const decidedCancel = async (id: string, first: Promise<Awaited<ReturnType<typeof cancel>>>) => {
      let response = await first;
      for (let attempt = 0; response.statusCode === 503 && attempt < 20; attempt++)
        response = await cancel(id);
      return response;
    };

    it('queued at fal: decided by the next worker, 200 canceled, one refund, fal cancelled it', async () => {
      const prompt = 'fal queued through a crash';
      stack.fal.script({ pollsInQueue: 1_000_000 }, promptContains(prompt));
      const before = await balance();
      const id = await create({ model: 'fal-flux-schnell', prompt });
      await handedOver(id);
      await killWorker();
      const first = cancel(id);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      // Nothing can be decided without a worker: the generation stands as it was.
      expect(await getGeneration(stack.api, stack.account.key, id)).toMatchObject({ status: 'queued' });
      await restartWorker();
      await expectCanceled(id, await decidedCancel(id, first), before);
      expect(stack.fal.accepted().find((j) => j.input.prompt === prompt)!.cancelled).toBe(true);
      // The restarted wait and the cancel never both refund.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    }, 120_000);

    it('running at Replicate: decided by the next worker, 409, then delivered and charged once', async () => {
      const prompt = 'replicate runs through a crash';
      stack.replicate.script({ pollsStarting: 0, hold: true }, promptContains(prompt));
      const id = await create({ model: 'replicate-flux-schnell', prompt });
      await handedOver(id);
      const prediction = await until(
        () => stack.replicate.accepted().find((p) => p.input.prompt === prompt) ?? null,
      );
      await killWorker();
      const first = cancel(id);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await restartWorker();
      expectNotCancelable(id, await decidedCancel(id, first));
      stack.replicate.release(prediction.id);
      const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 60_000);
      expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false });
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
      expect(stack.replicate.accepted().find((p) => p.id === prediction.id)!.canceled).toBe(false);
    }, 120_000);
  });
});
