import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { generationSchema } from '../../src/api/schemas.js';
import type { ApiService } from '../../src/api/service.js';
import { bearer, startTestApi } from '../support/api.js';
import { createGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

describe('Prefer: wait=N on GET /v1/generations/{id} and POST /v1/generations', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 50 }, account: { oneTime: 10_000 } });
  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode).toBe(202);
    return String(response.headers['x-request-id']);
  };
  const waitFor = async (id: string, prefer: string, api: ApiService = stack.api) => {
    const started = Date.now();
    const response = await api.app.inject({
      method: 'GET',
      url: `/v1/generations/${id}`,
      headers: { ...bearer(stack.account.key), prefer },
    });
    return { response, ms: Date.now() - started, at: Date.now() };
  };
  /** How long after the row turned terminal the waiter was answered. */
  const lateBy = (answeredAt: number, generation: { completed_at: string | null }) =>
    answeredAt - Date.parse(generation.completed_at!);

  it('a waiter is woken by success, with what was applied', async () => {
    const id = await create('slow success [sim:slow=2]');
    const { response, ms, at } = await waitFor(id, 'wait=30');
    expect(response.statusCode).toBe(200);
    expect(response.headers['preference-applied']).toBe('wait=30');
    const generation = generationSchema.parse(response.json());
    expect(generation.status).toBe('succeeded');
    expect(ms).toBeGreaterThan(1000);
    expect(ms).toBeLessThan(20_000);
    expect(lateBy(at, generation)).toBeLessThan(1000);
    expect(response.headers['retry-after']).toBeUndefined();
  });

  it('a waiter is woken by failure (refunded)', async () => {
    const id = await create('slow failure [sim:slow=2] [sim:fail]');
    const { response } = await waitFor(id, 'wait=30');
    expect(response.json()).toMatchObject({ status: 'failed', credits_refunded: true });
  });

  it('a rejected generation, terminal already, answers at once', async () => {
    const rejected = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: '',
    });
    expect(rejected.statusCode).toBe(400);
    const { response, ms } = await waitFor(String(rejected.headers['x-request-id']), 'wait=30');
    expect(response.json().status).toBe('rejected');
    expect(response.headers['preference-applied']).toBe('wait=30');
    expect(ms).toBeLessThan(1000);
  });

  it('a waiter whose generation is still running is answered after N seconds with queued', async () => {
    const id = await create('very slow [sim:slow=60]');
    const { response, ms } = await waitFor(id, 'wait=1');
    expect(response.statusCode).toBe(200);
    expect(response.json().status).toBe('queued');
    expect(response.headers['retry-after']).toBe('2');
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(5000);
  });

  it('N is clamped to 60 and said so; a malformed or zero wait is no preference', async () => {
    const id = await create('quick');
    expect((await waitFor(id, 'wait=3600')).response.headers['preference-applied']).toBe('wait=60');
    expect((await waitFor(id, 'respond-async, wait=5; foo=bar')).response.headers['preference-applied']).toBe(
      'wait=5',
    );
    const slow = await create('slow [sim:slow=60]');
    for (const prefer of ['wait=0', 'wait=soon', 'wait', 'handling=lenient']) {
      const { response, ms } = await waitFor(slow, prefer);
      expect(response.headers['preference-applied'], prefer).toBeUndefined();
      expect(response.json().status).toBe('queued');
      expect(ms).toBeLessThan(1000);
    }
  });

  it('on POST the 202 comes once the generation is terminal, and a replay with its key waits the same way', async () => {
    const post = () =>
      stack.api.app.inject({
        method: 'POST',
        url: '/v1/generations',
        headers: {
          ...bearer(stack.account.key),
          'content-type': 'application/json',
          'idempotency-key': 'wait-post-1',
          prefer: 'wait=30',
        },
        payload: JSON.stringify({ model: 'lumen-lite', prompt: 'posted and waited [sim:slow=2]' }),
      });
    const first = await post();
    expect(first.statusCode).toBe(202);
    expect(first.headers['preference-applied']).toBe('wait=30');
    expect(first.json().status).toBe('succeeded');
    const replay = await post();
    expect(replay.statusCode).toBe(202);
    expect(replay.json()).toEqual(first.json());
  });

  it('1,000 waiters on one process are all answered on time; the 1,001st on the key is answered at once', async () => {
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => create(`crowd ${i} [sim:slow=6]`)));
    const waiters = Array.from({ length: 1000 }, (_, i) => waitFor(ids[i % ids.length]!, 'wait=45'));
    // Let all thousand register before the next one asks.
    await new Promise((r) => setTimeout(r, 1500));
    // Past the cap the preference is not honoured: the current state now, and no Preference-Applied.
    const unheld = await waitFor(ids[0]!, 'wait=45');
    expect(unheld.response.statusCode).toBe(200);
    expect(unheld.response.headers['preference-applied']).toBeUndefined();
    expect(unheld.response.json().status).toBe('queued');
    const answers = await Promise.all(waiters);
    const late = answers.map(({ response, at }) => {
      const generation = generationSchema.parse(response.json());
      expect(generation.status).toBe('succeeded');
      return lateBy(at, generation);
    });
    late.sort((a, b) => a - b);
    expect(late[late.length - 1]).toBeLessThan(3000);
    // Once answered, the key may wait again.
    expect((await waitFor(ids[0]!, 'wait=1')).response.statusCode).toBe(200);
  });

  it('a dropped notification connection still answers waiters on time', async () => {
    const id = await create('through a drop [sim:slow=3]');
    const waiting = waitFor(id, 'wait=30');
    await new Promise((r) => setTimeout(r, 300));
    const dropped = await stack.db.pool.anyFirst(sql.unsafe`
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`);
    expect(dropped.length).toBeGreaterThan(0);
    const { response, at } = await waiting;
    const generation = generationSchema.parse(response.json());
    expect(generation.status).toBe('succeeded');
    expect(lateBy(at, generation)).toBeLessThan(2500);
  });

  it("a POST past the key's cap on waiters is answered 202 at once: charged once, listed", async () => {
    // An API of its own, so that closing it lets its thousand waiters go at once.
    const other = await startTestApi(stack.db.url, stack.worker.apiEnv);
    let closed: Promise<void> | undefined;
    try {
      const held = await create('holds the crowd [sim:slow=60]');
      const crowd = Array.from({ length: 1000 }, () => waitFor(held, 'wait=45', other));
      await expect.poll(() => other.waiting()).toBe(1000);
      const posted = await other.app.inject({
        method: 'POST',
        url: '/v1/generations',
        headers: { ...bearer(stack.account.key), 'content-type': 'application/json', prefer: 'wait=30' },
        // Done in about 5 s: a 202 that had waited would show it succeeded.
        payload: JSON.stringify({ model: 'lumen-lite', prompt: 'posted past the cap [sim:slow=5]' }),
      });
      expect(posted.statusCode, posted.body).toBe(202);
      expect(posted.headers['preference-applied']).toBeUndefined();
      const generation = generationSchema.parse(posted.json());
      expect(generation.status).toBe('queued');
      expect(posted.headers['x-request-id']).toBe(generation.id);
      expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 0 });
      const listed = await stack.api.app.inject({
        method: 'GET',
        url: '/v1/generations?limit=100',
        headers: bearer(stack.account.key),
      });
      expect(listed.json().data.map((g: { id: string }) => g.id)).toContain(generation.id);
      await (closed = other.close());
      for (const { response } of await Promise.all(crowd)) expect(response.json().status).toBe('queued');
    } finally {
      await (closed ?? other.close());
    }
  });

  it('shutting the API down answers a waiting POST with its 202 and the current state', async () => {
    const other = await startTestApi(stack.db.url, stack.worker.apiEnv);
    const posting = other.app.inject({
      method: 'POST',
      url: '/v1/generations',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json', prefer: 'wait=30' },
      payload: JSON.stringify({ model: 'lumen-lite', prompt: 'posted, then the api goes [sim:slow=60]' }),
    });
    await expect.poll(() => other.waiting()).toBe(1);
    await other.close();
    const posted = await posting;
    expect(posted.statusCode, posted.body).toBe(202);
    const generation = generationSchema.parse(posted.json());
    expect(generation.status).toBe('queued');
    expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('shutting the API down answers its waiters with the current state', async () => {
    const other = await startTestApi(stack.db.url, stack.worker.apiEnv);
    const id = await create('outlives the api [sim:slow=60]');
    const waiting = waitFor(id, 'wait=30', other);
    await new Promise((r) => setTimeout(r, 500));
    const closing = Date.now();
    await other.close();
    const { response, at } = await waiting;
    expect(response.statusCode).toBe(200);
    expect(response.json().status).toBe('queued');
    expect(at - closing).toBeLessThan(3000);
  });
});
