import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { routeAttemptsOf } from '../../src/db/route-attempts.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer } from '../support/api.js';
import { pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { falRequestError } from '../support/providers/fal-queue-server.js';
import { useRoutedStack } from '../support/routed-stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 29: `flux-schnell` of catalog/examples/routed.json (fal first, Replicate second), the real
 * API and worker processes, the fal queue and Replicate stand-ins. A route is left only on the
 * provider's proof that it did not take the job; one debit whatever the routes tried.
 */
describe('a model routed across fal and Replicate', () => {
  const { stack, post, accepted, settled, created, attempts, balance } = useRoutedStack();
  const setFalDown = async (down: boolean) => {
    await stack.db.pool.query(
      down
        ? sql.unsafe`INSERT INTO provider_health (provider, state, consecutive_failures, last_error, last_failure_at, down_since, probe_at)
            VALUES ('fal', 'down', 5, 'test: fal is down', now(), now(), now() + interval '1 hour')
            ON CONFLICT (provider) DO UPDATE SET state = 'down', down_since = now(), probe_at = now() + interval '1 hour'`
        : sql.unsafe`UPDATE provider_health SET state = 'up', consecutive_failures = 0, down_since = NULL, probe_at = NULL
            WHERE provider = 'fal'`,
    );
    // The API hears of it by NOTIFY: its quote says which route would serve now.
    await waitFor(async () => {
      const quote = await stack.api.app.inject({
        method: 'POST',
        url: '/v1/generations/quote',
        headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
        payload: JSON.stringify({ model: 'flux-schnell', prompt: 'quote' }),
      });
      return quote.json<{ provider: string }>().provider === (down ? 'replicate' : 'fal');
    }, 10_000);
  };

  for (const [name, refuse] of [
    ['503', () => stack.fal.failCreate({ kind: 'status', status: 503 }, promptContains('refused 503'))],
    ['429', () => stack.fal.failCreate({ kind: 'status', status: 429 }, promptContains('refused 429'))],
    ['connection refused', () => stack.fal.goDown()],
  ] as const) {
    it(`fal refusing the create (${name}) → served by Replicate, one debit, provider "replicate"`, async () => {
      const prompt = `refused ${name}`;
      await refuse();
      const before = await balance();
      const generation = await accepted({ prompt });
      if (name === 'connection refused') await stack.fal.goUp();
      const done = await settled(generation.id as string);
      expect(done).toMatchObject({ status: 'succeeded', provider: 'replicate', credits_refunded: false });
      expect(created(stack.fal, prompt)).toBe(0);
      expect(created(stack.replicate, prompt)).toBe(1);
      expect(await chargesOf(stack.db.pool, generation.id as string)).toMatchObject({
        debits: 1,
        refunds: 0,
      });
      expect(await balance()).toBe(before - 1);
      expect(await attempts(generation.id as string)).toEqual([
        ['fal', 'not_accepted'],
        ['replicate', 'accepted'],
      ]);
      const get = await stack.api.app.inject({
        method: 'GET',
        url: `/v1/generations/${generation.id}`,
        headers: bearer(stack.account.key),
      });
      expect(get.headers['generation-provider']).toBe('replicate');
    });
  }

  it('fal’s breaker open → the first attempt goes to Replicate; provider.only fal → 503 before any debit', async () => {
    await setFalDown(true);
    try {
      const before = await balance();
      const generation = await accepted({ prompt: 'breaker open' });
      expect(await settled(generation.id as string)).toMatchObject({
        status: 'succeeded',
        provider: 'replicate',
      });
      expect(
        stack.fal.requests.filter((r) => r.method === 'POST' && r.body.includes('breaker open')),
      ).toEqual([]);
      expect(await attempts(generation.id as string)).toEqual([['replicate', 'accepted']]);

      const only = await post({ prompt: 'only fal', provider: { only: ['fal'] } });
      expect(only.statusCode, only.body).toBe(503);
      expect(only.json()).toMatchObject({ error: { code: 'service_unavailable' } });
      const noFallback = await post({ prompt: 'no fallback', provider: { allow_fallbacks: false } });
      expect(noFallback.statusCode).toBe(503);
      expect(await balance()).toBe(before - 1);
    } finally {
      await setFalDown(false);
    }
  });

  it('fal accepts and its answer is lost → no failover: review, one debit, nothing at Replicate', async () => {
    stack.fal.failCreate({ kind: 'drop', accepted: true }, promptContains('answer lost'));
    const generation = await accepted({ prompt: 'answer lost' });
    const done = await pollGeneration(
      stack.api,
      stack.account.key,
      generation.id as string,
      (g) => g.status !== 'queued',
    );
    expect(done).toMatchObject({ status: 'failed', credits_refunded: false, provider: 'fal' });
    const review = await stack.db.pool.oneFirst(sql.type(z.object({ needs_review: z.boolean() }))`
      SELECT needs_review FROM generations WHERE id = ${generation.id as string}`);
    expect(review).toBe(true);
    expect(created(stack.fal, 'answer lost')).toBe(1);
    expect(created(stack.replicate, 'answer lost')).toBe(0);
    expect(await chargesOf(stack.db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('Replicate reports its job aborted before it started → the next route (fal) serves it, one debit', async () => {
    stack.replicate.script(
      { pollsStarting: 1, pollsProcessing: 0, final: 'aborted' },
      promptContains('aborted'),
    );
    const generation = await accepted({ prompt: 'aborted first', provider: { order: ['replicate'] } });
    const done = await settled(generation.id as string);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'fal', credits_refunded: false });
    expect(created(stack.replicate, 'aborted first')).toBe(1);
    expect(created(stack.fal, 'aborted first')).toBe(1);
    expect(await chargesOf(stack.db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 0 });
    const recorded = await routeAttemptsOf(stack.db.pool, generation.id as string);
    expect(recorded.map((a) => [a.provider, a.outcome, a.reason])).toEqual([
      ['replicate', 'not_accepted', 'The prediction was aborted at the provider before it started.'],
      ['fal', 'accepted', null],
    ]);
  });

  it('a fal job that fails after running → failed and refunded, not moved to Replicate', async () => {
    stack.fal.script(
      { pollsInQueue: 0, error: falRequestError('runner_disconnected', 503) },
      promptContains('ran and failed'),
    );
    const generation = await accepted({ prompt: 'ran and failed' });
    const done = await settled(generation.id as string);
    expect(done).toMatchObject({ status: 'failed', credits_refunded: true, provider: 'fal' });
    expect(created(stack.replicate, 'ran and failed')).toBe(0);
    expect(await chargesOf(stack.db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 1 });
    expect(await attempts(generation.id as string)).toEqual([['fal', 'accepted']]);
  });

  it('refuses a provider field naming a provider the model is not served by (400, nothing charged)', async () => {
    const before = await balance();
    const response = await post({ prompt: 'openai only', provider: { only: ['openai'], order: ['nobody'] } });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: { code: 'invalid_request' } });
    expect(response.json<{ issues: Array<{ field: string }> }>().issues.map((i) => i.field)).toEqual([
      'provider.order.0',
    ]);
    const unserved = await post({ prompt: 'openai only', provider: { only: ['openai'] } });
    expect(unserved.statusCode).toBe(400);
    expect(unserved.json()).toMatchObject({
      issues: [{ field: 'provider.only.0', code: 'invalid_value' }],
    });
    expect(await balance()).toBe(before);
  });

  it('provider is part of the Idempotency-Key’s body: another provider field is a conflict', async () => {
    const key = `routed-${randomBase62(8)}`;
    const first = await post({ prompt: 'keyed', provider: { order: ['replicate'] } }, key);
    expect(first.statusCode, first.body).toBe(202);
    const again = await post({ prompt: 'keyed', provider: { order: ['replicate'] } }, key);
    expect(again.json<{ id: string }>().id).toBe(first.json<{ id: string }>().id);
    const other = await post({ prompt: 'keyed' }, key);
    expect(other.statusCode).toBe(409);
    expect(await settled(first.json<{ id: string }>().id).then((g) => [g.status, g.provider])).toEqual([
      'succeeded',
      'replicate',
    ]);
  });
});
