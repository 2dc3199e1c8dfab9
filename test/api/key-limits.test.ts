import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKeySchema, keyEventSchema } from '../../src/api/key-schemas.js';
import { quoteSchema } from '../../src/api/schemas.js';
import { setKeyRules } from '../../src/db/key-limits.js';
import { runAdminCli } from '../support/admin.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { createGeneration, pollGeneration } from '../support/generations.js';

const terminal = (g: Record<string, unknown>) =>
  ['succeeded', 'failed', 'rejected'].includes(String(g.status));
const lite = (prompt: string) => ({ model: 'lumen-lite', prompt }); // 2 credits

describe('spend controls on keys', () => {
  const stack = useBatchStack({ apiEnv: { CONCURRENT_GENERATIONS_PER_ACCOUNT: '50' } });
  let second: ApiProcess;
  beforeAll(async () => {
    second = await startApiProcess({
      DATABASE_URL: stack.db.url,
      ...stack.worker.apiEnv,
      CONCURRENT_GENERATIONS_PER_ACCOUNT: '50',
    });
  });
  afterAll(async () => {
    await second?.stop();
  });

  const get = (key: string, url: string) =>
    stack.api.app.inject({ method: 'GET', url, headers: bearer(key) });
  const post = (key: string, url: string, body: unknown) =>
    stack.api.app.inject({
      method: 'POST',
      url,
      headers: { ...bearer(key), 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  const keyDebits = (keyId: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ credits: z.coerce.number() }))`
      SELECT coalesce(-sum(c.subscription_delta + c.one_time_delta), 0) AS credits
      FROM credit_ledger c JOIN generations g ON g.id = c.generation_id WHERE g.api_key_id = ${keyId}`);

  it('holds a limit exactly under 20 concurrent POSTs across two API processes', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await setKeyRules(stack.db.pool, account.keyId, { spend_limit: 10, limit_reset: 'daily' });
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const body = JSON.stringify(lite(`concurrent ${i}`));
        const headers = { ...bearer(account.key), 'content-type': 'application/json' };
        if (i % 2 === 0) {
          const r = await stack.api.app.inject({
            method: 'POST',
            url: '/v1/generations',
            headers,
            payload: body,
          });
          return { status: r.statusCode, body: r.json<Record<string, any>>() };
        }
        const r = await fetch(`${second.origin}/v1/generations`, { method: 'POST', headers, body });
        return { status: r.status, body: (await r.json()) as Record<string, any> };
      }),
    );
    const statuses = answers.map((a) => a.status).sort();
    console.log(
      `20 concurrent POSTs, limit 10, price 2: ${statuses.filter((s) => s === 202).length} × 202, ${statuses.filter((s) => s === 402).length} × 402`,
    );
    expect(statuses).toEqual([...Array(5).fill(202), ...Array(15).fill(402)]);
    const refusal = answers.find((a) => a.status === 402)!.body.error;
    expect(refusal.code).toBe('key_spend_limit_exceeded');
    expect(refusal.message).toMatch(
      /limit is 10 credits a day \(UTC\) and 0 are left until it resets at \d{4}-\d\d-\d\dT00:00:00\.000Z/,
    );
    expect(await keyDebits(account.keyId)).toBe(10);

    const key = apiKeySchema.strict().parse((await get(account.key, '/v1/key')).json());
    expect(key).toMatchObject({
      id: account.keyId,
      spend_limit: 10,
      limit_reset: 'daily',
      limit_remaining: 0,
    });
    expect(key.spend).toMatchObject({ today: 10, total: 10 });
    const tomorrow = new Date();
    tomorrow.setUTCHours(24, 0, 0, 0);
    expect(key.resets_at).toBe(tomorrow.toISOString());

    // key.spend_limit_reached once in the window, in the account's event log.
    const events = (await get(account.key, '/v1/events?after=0')).json().data.map((e: any) => e.event);
    const reached = events.filter((e: any) => e.type === 'key.spend_limit_reached');
    expect(reached).toHaveLength(1);
    expect(keyEventSchema.strict().parse(reached[0]).data).toMatchObject({
      id: account.keyId,
      spend_limit: 10,
      limit_reset: 'daily',
      model: 'lumen-lite',
      price: 2,
    });
  });

  it('a refund gives its credits back to the window; the quote says which bound refuses', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await setKeyRules(stack.db.pool, account.keyId, { spend_limit: 4, limit_reset: 'weekly' });
    const kept = await createGeneration(stack.api, account.key, lite('kept'));
    await pollGeneration(stack.api, account.key, kept.json().id, terminal);
    expect((await get(account.key, '/v1/key')).json()).toMatchObject({ limit_remaining: 2 });

    const full = await post(account.key, '/v1/generations/quote', { model: 'lumen-pro', prompt: 'x' });
    expect(quoteSchema.strict().parse(full.json())).toMatchObject({
      affordable: false,
      limited_by: 'key_spend_limit',
      key_limit: { spend_limit: 4, limit_reset: 'weekly', limit_remaining: 2 },
    });
    // A generation that fails is refunded: its 2 credits count again in the window.
    const failed = await createGeneration(stack.api, account.key, lite('[sim:fail]'));
    expect(failed.statusCode).toBe(202);
    expect((await pollGeneration(stack.api, account.key, failed.json().id, terminal)).status).toBe('failed');
    expect((await get(account.key, '/v1/key')).json()).toMatchObject({
      limit_remaining: 2,
      spend: { total: 2 },
    });
    expect((await post(account.key, '/v1/generations/quote', lite('y'))).json()).toMatchObject({
      affordable: true,
      limited_by: null,
    });
  });

  it('a model outside the key’s list: 403 at the door, and a batch line of it ends rejected', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await setKeyRules(stack.db.pool, account.keyId, { models: ['lumen-lite'] });
    const refused = await createGeneration(stack.api, account.key, { model: 'lumen-pro', prompt: 'x' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('key_model_not_allowed');
    expect(refused.json().error.message).toContain('lumen-lite');
    expect(
      (await post(account.key, '/v1/generations/quote', { model: 'lumen-pro', prompt: 'x' })).statusCode,
    ).toBe(403);
    expect((await createGeneration(stack.api, account.key, lite('allowed'))).statusCode).toBe(202);

    const batch = await postBatch(stack.api, account.key, {
      requests: [...batchLines(1), { custom_id: 'lite', ...lite('batch lite') }],
    });
    expect(batch.statusCode).toBe(201);
    const done = await waitForBatch(stack.api, account.key, batch.json().id);
    expect(done.request_counts).toMatchObject({ rejected: 1, succeeded: 1 });
    const results = (await get(account.key, `/v1/batches/${done.id}/results`)).body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(results[0].error.code).toBe('key_model_not_allowed');
  });

  it('a batch line over the limit ends rejected with that code, nothing charged, and the batch goes on', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await setKeyRules(stack.db.pool, account.keyId, { spend_limit: 3, limit_reset: 'none' });
    const batch = await postBatch(stack.api, account.key, {
      requests: [1, 2, 3].map((i) => ({ custom_id: `l${i}`, ...lite(`line ${i}`) })),
    });
    expect(batch.statusCode).toBe(201);
    const done = await waitForBatch(stack.api, account.key, batch.json().id);
    expect(done.request_counts).toMatchObject({ succeeded: 1, rejected: 2 });
    expect(done.credits_spent).toBe(2);
    const results = (await get(account.key, `/v1/batches/${done.id}/results`)).body.trim().split('\n');
    expect(results.map((l) => JSON.parse(l).error?.code ?? null).sort()).toEqual([
      'key_spend_limit_exceeded',
      'key_spend_limit_exceeded',
      null,
    ]);
    expect(await keyDebits(account.keyId)).toBe(2);
  });

  it('a read-only key reads, streams and quotes, and may not create, cancel or change', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    const made = await createGeneration(stack.api, account.key, lite('before'));
    await setKeyRules(stack.db.pool, account.keyId, { access: 'read_only' });
    // The change reaches the API's authentication cache by PostgreSQL's notification.
    await expect
      .poll(async () => (await post(account.key, '/v1/webhooks/secret/rotate', {})).statusCode)
      .toBe(403);
    for (const [url, body] of [
      ['/v1/generations', lite('x')],
      [`/v1/generations/${made.json().id}/cancel`, {}],
      ['/v1/batches', { requests: batchLines(1) }],
      ['/v1/webhooks/secret/rotate', {}],
    ] as const) {
      const refused = await post(account.key, url, body);
      expect({ url, status: refused.statusCode, code: refused.json().error?.code }).toEqual({
        url,
        status: 403,
        code: 'key_read_only',
      });
    }
    expect((await get(account.key, '/v1/generations')).statusCode).toBe(200);
    expect((await get(account.key, '/v1/key')).json()).toMatchObject({ access: 'read_only' });
    expect((await post(account.key, '/v1/generations/quote', lite('q'))).statusCode).toBe(200);
    const count = await stack.db.pool.oneFirst(sql.type(z.object({ n: z.coerce.number() }))`
      SELECT count(*) AS n FROM generations WHERE account_id = ${account.accountId}`);
    expect(count).toBe(1);
  });

  it('over MCP: get_key_limits tells the budget, a create past it is a tool error saying what is left', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await setKeyRules(stack.db.pool, account.keyId, { spend_limit: 3, limit_reset: 'monthly' });
    const client = new Client({ name: 'key-limits-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${second.origin}/v1/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${account.key}` } },
      }),
    );
    try {
      const limits = await client.callTool({ name: 'get_key_limits', arguments: {} });
      expect(apiKeySchema.strict().parse(limits.structuredContent)).toMatchObject({
        spend_limit: 3,
        limit_reset: 'monthly',
        limit_remaining: 3,
      });
      const call = () =>
        client.callTool({
          name: 'create_generation',
          arguments: { request: { model: 'lumen-pro', prompt: 'x' } },
        });
      const refused = (await call()) as CallToolResult;
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toContain('key_spend_limit_exceeded');
      expect(JSON.stringify(refused.content)).toMatch(/3 are left/);
      await setKeyRules(stack.db.pool, account.keyId, { access: 'read_only' });
      await expect
        .poll(async () => JSON.stringify(((await call()) as CallToolResult).content))
        .toContain('key_read_only');
    } finally {
      await client.close();
    }
  });

  it('windows: UTC days, ISO weeks from Monday, calendar months, and none', async () => {
    const windowAt = (reset: string, at: string) =>
      stack.db.pool.one(sql.type(
        z.object({ starts: z.string().nullable(), resets_at: z.string().nullable() }),
      )`
        SELECT starts::text, resets_at FROM key_limit_window(${reset}, ${at}::timestamptz)`);
    // Sunday 2026-12-06 23:30 in UTC−5 is Monday 04:30 UTC.
    expect(await windowAt('daily', '2026-12-06T23:30:00-05:00')).toEqual({
      starts: '2026-12-07',
      resets_at: '2026-12-08T00:00:00.000Z',
    });
    expect(await windowAt('weekly', '2026-12-06T23:30:00Z')).toEqual({
      starts: '2026-11-30',
      resets_at: '2026-12-07T00:00:00.000Z',
    });
    expect(await windowAt('monthly', '2026-12-31T23:59:59Z')).toEqual({
      starts: '2026-12-01',
      resets_at: '2027-01-01T00:00:00.000Z',
    });
    expect(await windowAt('none', '2026-12-31T23:59:59Z')).toEqual({ starts: null, resets_at: null });
  });

  it('the admin CLI sets a key’s limits and show-account lists them', { timeout: 120_000 }, async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    const set = await runAdminCli(
      [
        'set-key-limits',
        '--key',
        account.keyId,
        '--spend-limit',
        '25',
        '--reset',
        'monthly',
        '--models',
        'lumen-lite,lumen-pro',
        '--access',
        'read_only',
      ],
      stack.db.url,
    );
    expect(set.code).toBe(0);
    expect(set.stdout).toContain('0/25 credits monthly, models lumen-lite, lumen-pro, read-only');
    const bad = await runAdminCli(
      ['set-key-limits', '--key', account.keyId, '--reset', 'hourly'],
      stack.db.url,
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('The reset must be one of daily, weekly, monthly, none.');
    const shown = await runAdminCli(['show-account', '--account', account.accountId], stack.db.url);
    expect(shown.stdout).toContain('0/25 credits monthly');
    expect((await get(account.key, '/v1/key')).json()).toMatchObject({
      spend_limit: 25,
      limit_reset: 'monthly',
      models: ['lumen-lite', 'lumen-pro'],
      access: 'read_only',
    });
  });
});
