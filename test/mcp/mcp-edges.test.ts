import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * /v1/mcp at its edges (issue 44): one HTTP request is one call's worth of limits. The real API
 * service in this process, with a per-key limit of 2 requests a minute.
 */
describe('MCP at its edges', () => {
  let db: TestDatabase;
  let api: ApiService;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { RATE_LIMIT_PER_MINUTE: '2' });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const post = (key: string, body: unknown) =>
    api.app.inject({
      method: 'POST',
      url: '/v1/mcp',
      headers: { ...mcpHeaders, ...bearer(key) },
      payload: JSON.stringify(body),
    });
  const call = (id: number, name: string, args: Record<string, unknown> = {}) => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args },
  });

  it('a JSON-RPC batch is refused with -32600 before any message runs, as one request counted and logged', async () => {
    const account = await createPaidAccount(db.pool, { oneTime: 100 });
    const batch = Array.from({ length: 5 }, (_, i) =>
      call(i + 1, 'create_generation', {
        request: { model: 'lumen-lite', prompt: `batched ${i}` },
        idempotency_key: `batched-${i}`,
      }),
    );
    const refused = await post(account.key, batch);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: expect.stringMatching(/batches are not supported/) },
      id: null,
    });
    // One unit of the key's 2 counted; no tool ran: no generation, no debit.
    expect(refused.headers['x-ratelimit-remaining']).toBe('1');
    const generations = await db.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      SELECT count(*)::int AS n FROM generations WHERE account_id = ${account.accountId}`);
    expect(generations).toBe(0);
    // The request log has the one request, with why it was refused.
    await expect
      .poll(() =>
        db.pool.any(sql.type(z.object({ status_code: z.number(), error_code: z.string().nullable() }))`
          SELECT status_code, error_code FROM api_request_log WHERE account_id = ${account.accountId}`),
      )
      .toEqual([{ status_code: 400, error_code: 'batch_not_supported' }]);
    // One message per request is answered, until the key's limit: the third request is a 429.
    const single = await post(account.key, call(7, 'get_credits'));
    expect(single.statusCode).toBe(200);
    expect(single.body).toContain('"credits":100');
    expect((await post(account.key, call(8, 'get_credits'))).statusCode).toBe(429);
    // A batch of one message is a batch too.
    const other = await createPaidAccount(db.pool);
    expect((await post(other.key, [call(9, 'get_credits')])).json().error.code).toBe(-32600);
  });
});
