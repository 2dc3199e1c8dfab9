import { describe, expect, it } from 'vitest';
import { until, useCancelStack } from '../support/cancel-stack.js';
import { pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';

/**
 * Issue 27 §2: a client's cancel where the provider's state changes between our read and our
 * cancel, as the real services' can. The real API, the generation workflow and a real worker
 * process, against the protocol fakes. Whatever the provider bills, the cancel's answer and the
 * final generation say: a job it ran is charged (never refunded), one it never ran is refunded.
 */
describe('a cancel racing the provider picking the job up', () => {
  const { stack, create, cancel, balance, handedOver } = useCancelStack('cancel-race');

  it('Replicate started it between our read and our cancel: 200 canceled, charged (Replicate bills the run)', async () => {
    const prompt = 'replicate picks it up as we cancel';
    stack.replicate.script({ pollsStarting: 1_000_000 }, promptContains(prompt));
    const before = await balance();
    const { id, credits } = await create({ model: 'replicate-flux-schnell', prompt });
    await handedOver(id);
    const prediction = stack.replicate.accepted().find((p) => p.input.prompt === prompt)!;
    stack.replicate.beforeCancel = (predictionId) => {
      if (predictionId === prediction.id) stack.replicate.startNow(predictionId);
    };
    let response;
    try {
      response = await cancel(id);
    } finally {
      stack.replicate.beforeCancel = undefined;
    }
    // Replicate canceled it running: the answer says it is stopped, and that the credits stay spent.
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({
      id,
      status: 'failed',
      credits_refunded: false,
      output: null,
      error: { code: 'canceled', message: expect.stringContaining('not refunded') },
    });
    expect(stack.replicate.accepted().find((p) => p.id === prediction.id)!.canceled).toBe(true);
    expect(stack.replicate.statusOf(prediction.id)).toBe('canceled');
    // The wait saw its end; nothing refunds it later, and a second cancel says the same.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await balance()).toBe(before - credits);
    const again = await cancel(id);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(response.json());
  });

  it('a fal runner took it between our read and our cancel and ran it on: 409, delivered and charged once', async () => {
    const prompt = 'fal runner takes it as we cancel';
    stack.fal.script({ pollsInQueue: 1_000_000, hold: true, ignoresCancel: true }, promptContains(prompt));
    const { id } = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    const request = stack.fal.accepted().find((j) => j.input.prompt === prompt)!;
    stack.fal.beforeCancel = (requestId) => {
      if (requestId === request.id) stack.fal.pickUp(requestId);
    };
    let response;
    try {
      const answered = cancel(id);
      // fal answered CANCELLATION_REQUESTED, and its runner goes on to the end.
      await until(() => stack.fal.accepted().find((j) => j.id === request.id)?.cancelIgnored);
      stack.fal.release(request.id);
      response = await answered;
    } finally {
      stack.fal.beforeCancel = undefined;
    }
    expect(response.statusCode, response.body).toBe(409);
    expect(response.json().error.code).toBe('not_cancelable');
    const done = await pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);
    expect(done).toMatchObject({ status: 'succeeded', credits_refunded: false, error: null });
    expect(done.output.images).toHaveLength(1);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a fal runner took it between our read and our cancel and stopped: no output (fal bills none), 200 refunded', async () => {
    const prompt = 'fal runner takes it and stops';
    stack.fal.script({ pollsInQueue: 1_000_000, hold: true }, promptContains(prompt));
    const before = await balance();
    const { id } = await create({ model: 'fal-flux-schnell', prompt });
    await handedOver(id);
    const request = stack.fal.accepted().find((j) => j.input.prompt === prompt)!;
    stack.fal.beforeCancel = (requestId) => {
      if (requestId === request.id) stack.fal.pickUp(requestId);
    };
    let response;
    try {
      response = await cancel(id);
    } finally {
      stack.fal.beforeCancel = undefined;
    }
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({
      id,
      status: 'failed',
      credits_refunded: true,
      error: { code: 'canceled' },
    });
    expect(stack.fal.accepted().find((j) => j.id === request.id)).toMatchObject({
      pickedUp: true,
      cancelled: true,
    });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(await balance()).toBe(before);
  });
});
