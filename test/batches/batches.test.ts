import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bearer, createPaidAccount } from '../support/api.js';
import {
  balanceOf,
  batchCharges,
  batchLines as lines,
  postBatch,
  useBatchStack,
  waitForBatch,
} from '../support/batches.js';

/**
 * The big batch's size: 100 lines in `npm test` (about 15 s here), the issue's 1,000 in
 * `npm run test:faults` (BATCH_TEST_LINES=1000: the stack, not the batch, sets the pace).
 */
const bigBatch = Number(process.env.BATCH_TEST_LINES ?? 100);

describe('batches', () => {
  const stack = useBatchStack({
    worker: { simDelayMs: 10 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '40' },
    account: { oneTime: 100_000 },
  });

  it(`runs a ${bigBatch}-line batch: one generation and one debit per line, results in input order`, async () => {
    const { api, account, db } = stack;
    const before = await balanceOf(db.pool, account.accountId);
    const created = await postBatch(
      api,
      account.key,
      { requests: lines(bigBatch), metadata: { run: 'big' } },
      'big-1',
    );
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    expect(batch).toMatchObject({
      status: expect.any(String),
      request_counts: { total: bigBatch },
      metadata: { run: 'big' },
    });
    // The same key and lines: the same batch; other lines: a conflict.
    const again = await postBatch(
      api,
      account.key,
      { requests: lines(bigBatch), metadata: { run: 'big' } },
      'big-1',
    );
    expect(again.statusCode).toBe(200);
    expect(again.json().id).toBe(batch.id);
    const other = await postBatch(api, account.key, { requests: lines(bigBatch - 1) }, 'big-1');
    expect(other.statusCode).toBe(409);

    const done = await waitForBatch(api, account.key, batch.id);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toMatchObject({
      total: bigBatch,
      succeeded: bigBatch,
      pending: 0,
      queued: 0,
    });
    const charges = await batchCharges(db.pool, batch.id);
    expect(charges).toMatchObject({
      generations: bigBatch,
      lines_with_generation: bigBatch,
      debits: bigBatch,
      refunds: 0,
      most_per_line: 1,
    });
    expect(-charges.net).toBe(batch.credits_quoted);
    expect(done.credits_spent).toBe(batch.credits_quoted);
    expect(before - (await balanceOf(db.pool, account.accountId))).toBe(batch.credits_quoted);

    const results = await api.app.inject({
      method: 'GET',
      url: `/v1/batches/${batch.id}/results`,
      headers: bearer(account.key),
    });
    const rows = results.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.custom_id)).toEqual(lines(bigBatch).map((l) => l.custom_id));
    expect(rows[7].generation).toMatchObject({
      status: 'succeeded',
      batch_id: batch.id,
      custom_id: 'line-7',
    });
    const resumed = await api.app.inject({
      method: 'GET',
      url: `/v1/batches/${batch.id}/results?after=${bigBatch - 3}`,
      headers: bearer(account.key),
    });
    expect(
      resumed.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).line),
    ).toEqual([bigBatch - 2, bigBatch - 1]);
    const generation = await api.app.inject({
      method: 'GET',
      url: `/v1/generations/${rows[0].generation.id}`,
      headers: bearer(account.key),
    });
    expect(generation.json()).toMatchObject({ batch_id: batch.id, custom_id: 'line-0' });
  }, 180_000);

  it('refuses a batch with bad lines as one 400 naming each line, and writes nothing', async () => {
    const { api, account, db } = stack;
    const bad = [
      ...lines(3),
      { custom_id: 'no-model', prompt: 'x' },
      { custom_id: 'line-1', model: 'lumen-lite', prompt: 'a duplicate custom_id' },
      { model: 'lumen-lite', prompt: 'no custom_id' },
    ];
    const response = await postBatch(api, account.key, { requests: bad });
    expect(response.statusCode).toBe(400);
    const { issues } = response.json();
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          field: 'requests[3].model',
          message: expect.stringContaining('custom_id "no-model"'),
        }),
        expect.objectContaining({ field: 'requests[4].custom_id', code: 'duplicate' }),
        expect.objectContaining({ field: 'requests[5].custom_id', code: 'required' }),
      ]),
    );
    const written = await db.pool.oneFirst(sql.type(z.object({ n: z.coerce.number() }))`
      SELECT count(*) AS n FROM batches WHERE account_id = ${account.accountId} AND line_count = 6`);
    expect(written).toBe(0);
  });

  it('refuses with 402 a batch quoted above the balance, stating both numbers', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 5 });
    const response = await postBatch(stack.api, poor.key, { requests: lines(10) });
    expect(response.statusCode).toBe(402);
    expect(response.json().error.message).toMatch(/quoted at \d+ credits; the balance is 5/);
  });

  it('takes the same lines as JSONL (the same fingerprint as JSON), and quotes a batch without starting it', async () => {
    const { api } = stack;
    // An account of its own: its event log holds this batch's events only.
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    const jsonl = lines(3)
      .map((line) => JSON.stringify(line))
      .join('\n');
    const quote = await api.app.inject({
      method: 'POST',
      url: '/v1/batches/quote',
      headers: { ...bearer(account.key), 'content-type': 'application/x-ndjson' },
      payload: jsonl,
    });
    expect(quote.statusCode, quote.body).toBe(200);
    expect(quote.json()).toMatchObject({ lines: 3, credits: expect.any(Number), affordable: true });
    const post = (payload: string, type: string, url = '/v1/batches?completion_window=1h') =>
      api.app.inject({
        method: 'POST',
        url,
        headers: { ...bearer(account.key), 'content-type': type, 'idempotency-key': 'jsonl-1' },
        payload,
      });
    const created = await post(jsonl, 'application/x-ndjson');
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ completion_window: '1h', credits_quoted: quote.json().credits });
    // The same lines as JSON, with the same envelope: the same batch.
    const same = await post(
      JSON.stringify({ requests: lines(3), completion_window: '1h' }),
      'application/json',
      '/v1/batches',
    );
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json().id).toBe(created.json().id);
    const bad = await api.app.inject({
      method: 'POST',
      url: '/v1/batches',
      headers: { ...bearer(account.key), 'content-type': 'application/x-ndjson' },
      payload: `${jsonl}\nnot json\n`,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().issues).toEqual([expect.objectContaining({ field: 'line 3' })]);
    await waitForBatch(api, account.key, created.json().id);
    // Its events are in the account's log, beside its lines' generations' events.
    const events = await api.app.inject({
      method: 'GET',
      url: '/v1/events?after=0',
      headers: bearer(account.key),
    });
    const own = (events.json().data as Array<{ event: { type: string; data: { id: string } } }>)
      .map((e) => e.event)
      .filter((e) => e.data.id === created.json().id);
    expect(own[0]).toMatchObject({ type: 'batch.created', data: { request_counts: { total: 3 } } });
    expect(own.at(-1)).toMatchObject({ type: 'batch.completed', data: { status: 'completed' } });
    expect(own.map((e) => e.type)).toContain('batch.progress');
  });
});
