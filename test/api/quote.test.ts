import { readdir } from 'node:fs/promises';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { sql } from 'slonik';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { quoteSchema } from '../../src/api/schemas.js';
import { getBalance } from '../../src/db/credits-repository.js';
import { setKeyRules } from '../../src/db/key-limits.js';
import { quoteAnswer } from '../../src/generations/key-rules.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

const png =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

describe('POST /v1/generations/quote', () => {
  const stack = useGenerationStack({ account: { subscription: 3, oneTime: 10 } });
  const quote = (body: unknown) =>
    stack.api.app.inject({
      method: 'POST',
      url: '/v1/generations/quote',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  const generationCount = () =>
    stack.db.pool.oneFirst(
      sql.type(
        z.object({ count: z.number() }),
      )`SELECT count(*)::int FROM generations WHERE account_id = ${stack.account.accountId}`,
    );

  it('quotes exactly what the create then debits, from the balance a create draws on', async () => {
    const body = { model: 'lumen-pro', prompt: 'a lighthouse', resolution: '2K', images: [png] };
    const quoted = await quote(body);
    expect(quoted.statusCode).toBe(200);
    expect(quoteSchema.strict().parse(quoted.json())).toEqual({
      model: 'lumen-pro',
      credits: 6,
      provider: 'simulated',
      balance: { subscription: 3, one_time: 10, total: 13 },
      affordable: true,
      limited_by: null,
      key_limit: null,
    });
    // Nothing stored: no inline image was written, no generation recorded, nothing debited.
    expect(await readdir(stack.worker.storageDir)).toEqual([]);
    expect(await generationCount()).toBe(0);

    const created = await createGeneration(stack.api, stack.account.key, body);
    expect(created.statusCode).toBe(202);
    const done = await pollGeneration(stack.api, stack.account.key, String(created.headers['x-request-id']));
    expect(done.credits).toBe(quoted.json().credits);

    // Defaults are priced as admission prices them; the balance shows the debit (subscription first).
    const lite = (await quote({ model: 'lumen-lite', prompt: 'x' })).json();
    expect(lite).toEqual({
      model: 'lumen-lite',
      credits: 2,
      provider: 'simulated',
      balance: { subscription: 0, one_time: 7, total: 7 },
      affordable: true,
      limited_by: null,
      key_limit: null,
    });
  });

  it('an unaffordable quote says so, and the create is then 402', async () => {
    const body = { model: 'lumen-pro', prompt: 'dear', resolution: '4K' };
    const quoted = (await quote(body)).json();
    expect(quoted).toMatchObject({ credits: 10, affordable: false });
    expect((await createGeneration(stack.api, stack.account.key, body)).statusCode).toBe(402);
  });

  it('is validated exactly as a create: the same 400 and issues, but nothing is recorded', async () => {
    for (const body of [
      { model: 'lumen-lite', prompt: '', colour: 'red' },
      { model: 'nope', prompt: 'x' },
      { prompt: 'x' },
      [1, 2],
    ]) {
      const before = await generationCount();
      const quoted = await quote(body);
      expect(quoted.statusCode).toBe(400);
      const created = await createGeneration(stack.api, stack.account.key, body);
      expect(created.statusCode).toBe(400);
      expect(quoted.json()).toEqual(created.json());
      // The create recorded its rejection; the quote did not.
      expect(await generationCount()).toBe(before + 1);
    }
  });

  it('fetches no reference image: a URL nobody serves is quoted at once', async () => {
    const started = Date.now();
    const quoted = await quote({ model: 'lumen-lite', prompt: 'x', images: ['https://127.0.0.1:9/a.png'] });
    expect(quoted.statusCode).toBe(200);
    expect(quoted.json().credits).toBe(2);
    expect(Date.now() - started).toBeLessThan(2000);
  });
  it('is POST only: GET /v1/generations/quote is 405 with Allow, not "no generation quote"', async () => {
    const answer = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/generations/quote',
      headers: bearer(stack.account.key),
    });
    expect(answer.statusCode).toBe(405);
    expect(answer.headers.allow).toBe('POST');
    expect(answer.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
  });

  it('the three quotes (this one, POST /v1/batches/quote, the MCP tool) give the one answer quoteAnswer makes', async () => {
    const account = await createPaidAccount(stack.db.pool, { subscription: 2, oneTime: 3 });
    await setKeyRules(stack.db.pool, account.keyId, { spend_limit: 3, limit_reset: 'daily' });
    const request = { model: 'lumen-pro', prompt: 'a lighthouse' };
    const post = (url: string, body: unknown) =>
      stack.api.app.inject({
        method: 'POST',
        url,
        headers: {
          ...bearer(account.key),
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        payload: JSON.stringify(body),
      });
    const single = (await post('/v1/generations/quote', request)).json();
    const batch = (await post('/v1/batches/quote', { requests: [{ custom_id: 'a', ...request }] })).json();
    const called = await post('/v1/mcp', {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'quote', arguments: { request } },
    });
    const data = called.body.split('\n').find((line) => line.startsWith('data: '))!;
    const tool = (JSON.parse(data.slice('data: '.length)) as { result: CallToolResult }).result;

    const priced = { model: 'lumen-pro', credits: 4, provider: 'simulated' };
    const answer = await quoteAnswer(
      stack.db.pool,
      account.keyId,
      priced,
      await getBalance(stack.db.pool, account.accountId),
    );
    expect(answer).toMatchObject({
      balance: { subscription: 2, one_time: 3, total: 5 },
      affordable: false,
      limited_by: 'key_spend_limit',
      key_limit: { spend_limit: 3, limit_reset: 'daily', limit_remaining: 3 },
    });
    expect(single).toEqual(answer);
    expect(tool.structuredContent).toEqual(answer);
    const { model: _model, provider: _provider, ...bounds } = answer;
    expect(batch).toEqual({ ...bounds, lines: 1 });
    expect((tool.content[0] as { text: string }).text).toMatch(
      /^lumen-pro costs 4 credits; the balance is 5; this connection's limit has 3 of 3 credits left, which does not cover it \(it resets at .+\)\.$/,
    );
  });
});
