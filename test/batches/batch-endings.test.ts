import { describe, expect, it } from 'vitest';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import {
  balanceOf,
  batchCharges,
  batchLines as lines,
  postBatch,
  useBatchStack,
  waitForBatch,
} from '../support/batches.js';

describe('batch endings: cancel, the completion window, an empty balance', () => {
  const stack = useBatchStack({
    worker: { simDelayMs: 10 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '20' },
    account: { oneTime: 100_000 },
  });

  it('cancel mid-way: lines not started end canceled, never charged', async () => {
    const { api, db } = stack;
    const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    const created = await postBatch(api, account.key, {
      requests: lines(60, (i) => `slow ${i} [sim:slow=2]`),
    });
    const batch = created.json();
    // More lines in flight than the account's concurrency limit (the test worker's 10): they do not
    // count against it, and an interactive POST is still accepted.
    await waitForBatch(api, account.key, batch.id, (b) => b.request_counts.queued > 10, 60_000);
    const interactive = await createGeneration(api, account.key, { model: 'lumen-pro', prompt: 'now' });
    expect(interactive.statusCode, interactive.body).toBe(202);
    const canceled = await api.app.inject({
      method: 'POST',
      url: `/v1/batches/${batch.id}/cancel`,
      headers: bearer(account.key),
    });
    expect(canceled.json().status).toBe('canceling');
    const done = await waitForBatch(api, account.key, batch.id);
    expect(done.status).toBe('canceled');
    expect(done.request_counts.canceled).toBeGreaterThan(0);
    const charges = await batchCharges(db.pool, batch.id);
    expect(charges.generations).toBe(60 - done.request_counts.canceled);
    expect(charges.debits).toBe(charges.generations);
    expect(charges.most_per_line).toBe(1);
    const own = await pollGeneration(api, account.key, interactive.json().id as string);
    const interactiveCost = own.credits_refunded ? 0 : (own.credits as number);
    expect(10_000 - (await balanceOf(db.pool, account.accountId))).toBe(-charges.net + interactiveCost);
    expect(done.credits_spent).toBe(-charges.net);
  }, 120_000);

  it('a keyed batch whose workflow start failed, then canceled, ends canceled: lines canceled, nothing charged', async () => {
    const { api, db } = stack;
    const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    // An API that cannot start workflows (its Temporal namespace does not exist): the create is a
    // 503 and, having a key, its batch is kept for a retry with it.
    const away = await startTestApi(db.url, {
      ...stack.worker.apiEnv,
      TEMPORAL_NAMESPACE: 'no-such-namespace',
    });
    try {
      const created = await postBatch(away, account.key, { requests: lines(5) }, 'start-fails-1');
      expect(created.statusCode, created.body).toBe(503);
    } finally {
      await away.close();
    }
    const listed = await api.app.inject({ method: 'GET', url: '/v1/batches', headers: bearer(account.key) });
    const [batch] = listed.json().data;
    expect(batch).toMatchObject({ status: 'validating', started_at: null, request_counts: { total: 5 } });
    // No retry comes: the cancel alone ends it.
    const canceled = await api.app.inject({
      method: 'POST',
      url: `/v1/batches/${batch.id}/cancel`,
      headers: bearer(account.key),
    });
    expect(canceled.statusCode, canceled.body).toBe(200);
    expect(canceled.json().status).toBe('canceling');
    const done = await waitForBatch(api, account.key, batch.id, undefined, 30_000);
    expect(done).toMatchObject({
      status: 'canceled',
      credits_spent: 0,
      request_counts: { total: 5, canceled: 5 },
    });
    expect(await batchCharges(db.pool, batch.id)).toMatchObject({ generations: 0, debits: 0, net: 0 });
    expect(await balanceOf(db.pool, account.accountId)).toBe(10_000);
    // A retry with the key now answers the ended batch, and starts nothing again.
    const retry = await postBatch(api, account.key, { requests: lines(5) }, 'start-fails-1');
    expect(retry.statusCode, retry.body).toBe(200);
    expect(retry.json()).toMatchObject({ id: batch.id, status: 'canceled' });
    const again = await api.app.inject({
      method: 'POST',
      url: `/v1/batches/${batch.id}/cancel`,
      headers: bearer(account.key),
    });
    expect(again.json().status).toBe('canceled');
    expect((await batchCharges(db.pool, batch.id)).generations).toBe(0);
  }, 60_000);

  it('the completion window expires lines not started, never charged', async () => {
    const { api, db } = stack;
    const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    const created = await postBatch(api, account.key, {
      requests: lines(60, (i) => `slow ${i} [sim:slow=2]`),
      completion_window: '1s',
    });
    const batch = created.json();
    const done = await waitForBatch(api, account.key, batch.id);
    expect(done.status).toBe('expired');
    expect(done.request_counts.expired).toBeGreaterThan(0);
    const charges = await batchCharges(db.pool, batch.id);
    expect(charges.generations + done.request_counts.expired).toBe(60);
    expect(charges.debits).toBe(charges.generations);
    // 0 - net, not -net: when every line expired (a slow start), net is 0 and -0 is not 0 to toBe.
    expect(10_000 - (await balanceOf(db.pool, account.accountId))).toBe(0 - charges.net);
  }, 120_000);

  it('credits for half the lines: the other half end rejected (insufficient_credits), nothing else charged', async () => {
    const { api, db } = stack;
    const quote = (await postBatch(api, stack.account.key, { requests: lines(1) })).json();
    const price = quote.credits_quoted as number;
    await waitForBatch(api, stack.account.key, quote.id);
    // Two batches of 20, each quoted within the balance: together they need twice what there is.
    const account = await createPaidAccount(db.pool, { oneTime: 20 * price });
    const first = (await postBatch(api, account.key, { requests: lines(20) })).json();
    const second = (await postBatch(api, account.key, { requests: lines(20) })).json();
    const ends = [
      await waitForBatch(api, account.key, first.id),
      await waitForBatch(api, account.key, second.id),
    ];
    const sum = (key: string) => ends.reduce((n, b) => n + (b.request_counts[key] as number), 0);
    expect(ends.map((b) => b.status)).toEqual(['completed', 'completed']);
    expect(sum('succeeded')).toBe(20);
    expect(sum('rejected')).toBe(20);
    const charges = [await batchCharges(db.pool, first.id), await batchCharges(db.pool, second.id)];
    expect(charges.reduce((n, c) => n + c.debits, 0)).toBe(20);
    expect(charges.reduce((n, c) => n + c.generations, 0)).toBe(40);
    expect(await balanceOf(db.pool, account.accountId)).toBe(0);
  }, 120_000);
});
