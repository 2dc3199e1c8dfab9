import { describe, expect, it } from 'vitest';
import { Client } from '../../clients/typescript/src/index.js';
import { checkCancelAfter } from '../../src/generations/admission/cancel-after.js';
import { bearer } from '../support/api.js';
import { useListeningStack } from '../client/client-stack.js';
import { getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';

/**
 * `Cancel-After` on POST /v1/generations: a generation not yet handed to a provider by its
 * deadline is canceled and refunded once; one the provider has runs on. The provider's one
 * in-flight place (the worker's cap) is what keeps a generation from being handed over here;
 * the shortest Cancel-After is 1 s for this file (CANCEL_AFTER_MIN_SECONDS) so nothing waits long.
 */
describe('Cancel-After', () => {
  const stack = useListeningStack({
    apiEnv: { CANCEL_AFTER_MIN_SECONDS: '1' },
    worker: { overrides: { inFlightCap: () => 1 } },
    account: { oneTime: 1000 },
  });
  const create = (prompt: string, headers: Record<string, string>) =>
    stack.api.app.inject({
      method: 'POST',
      url: '/v1/generations',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ model: 'lumen-lite', prompt }),
    });
  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;

  it('reads durations as Replicate writes them: hours, minutes and seconds in that order, or plain seconds', () => {
    const read = (value: string) => {
      const checked = checkCancelAfter(value, 5);
      return checked.ok ? checked.seconds : null;
    };
    expect(['30s', '5m', '1h30m', '2h', '1h30m45s', '90', ' 45s ', '24h'].map(read)).toEqual([
      30, 300, 5400, 7200, 5445, 90, 45, 86_400,
    ]);
    expect(['4s', '24h1s', '30m1h', '1d', '5S', '1h 30m', 'h', '5e1'].map(read)).toEqual(Array(8).fill(null));
    expect(checkCancelAfter(undefined, 5)).toEqual({ ok: true, seconds: null });
  });

  it('refuses a value that is not a duration from the minimum to 24 h: 400 naming the header, nothing charged', async () => {
    const before = await balance();
    for (const value of ['soon', '0', '0s', '25h', '90000', '1m30', '1.5s', '-5s', '5s5m', '']) {
      const response = await create('never runs', { 'cancel-after': value });
      expect(response.statusCode, value).toBe(400);
      expect(response.json().error.code, value).toBe('invalid_request');
      expect(response.json().issues, value).toEqual([
        expect.objectContaining({ field: 'Cancel-After', code: 'invalid_value' }),
      ]);
    }
    expect(await balance()).toBe(before);
  });

  it('is part of the request: the same key with another Cancel-After is a conflict, the same duration written otherwise is not', async () => {
    const key = { 'idempotency-key': `ca-${Date.now()}` };
    // The TypeScript client sends it as the header (cancelAfter).
    const client = new Client({ apiKey: stack.account.key, baseURL: stack.listening.baseURL });
    const created = await client.generations.create(
      { model: 'lumen-lite', prompt: 'keyed' },
      { idempotencyKey: key['idempotency-key'], cancelAfter: '1m' },
    );
    expect(Date.parse(created.cancel_after!) - Date.parse(created.created_at)).toBe(60_000);
    const again = await create('keyed', { ...key, 'cancel-after': '60' });
    expect(again.statusCode).toBe(202);
    expect(again.json().id).toBe(created.id);
    expect((await create('keyed', { ...key, 'cancel-after': '2m' })).statusCode).toBe(409);
    expect((await create('keyed', key)).statusCode).toBe(409);
    await pollGeneration(stack.api, stack.account.key, created.id);
  });

  it('canceled and refunded once when no place frees before the deadline; the one handed over before it runs on and is charged', async () => {
    // The provider's one place is taken by a job that runs past both deadlines.
    const running = await create('holds the place [sim:slow=4]', { 'cancel-after': '1s' });
    expect(running.statusCode).toBe(202);
    const runningId = running.json().id as string;
    await pollGeneration(stack.api, stack.account.key, runningId, (g) => g.provider !== null);
    const waiting = await create('waits for a place', { 'cancel-after': '2s' });
    expect(waiting.statusCode).toBe(202);
    const waitingId = waiting.json().id as string;
    expect(waiting.json()).toMatchObject({ status: 'queued', provider: null });

    const canceled = await pollGeneration(stack.api, stack.account.key, waitingId, undefined, 30_000);
    expect(canceled).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      provider: null,
      error: { code: 'canceled', message: expect.stringContaining('Cancel-After deadline passed') },
    });
    expect(Date.parse(canceled.cancel_after) - Date.parse(canceled.created_at)).toBe(2_000);
    expect(await chargesOf(stack.db.pool, waitingId)).toEqual({
      debits: 1,
      refunds: 1,
      net: 0,
      submissions: 0,
    });

    const succeeded = await pollGeneration(stack.api, stack.account.key, runningId, undefined, 30_000);
    expect(succeeded).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(Date.parse(succeeded.cancel_after)).toBeLessThan(Date.parse(succeeded.completed_at));
    expect(await chargesOf(stack.db.pool, runningId)).toEqual({
      debits: 1,
      refunds: 0,
      net: -2,
      submissions: 1,
    });
    // A generation created without the header shows no deadline.
    const plain = await create('no deadline', {});
    expect(plain.json().cancel_after).toBeNull();
    expect((await getGeneration(stack.api, stack.account.key, runningId)).cancel_after).toBe(
      succeeded.cancel_after,
    );
    await pollGeneration(stack.api, stack.account.key, plain.json().id, undefined, 30_000);
  });
});
