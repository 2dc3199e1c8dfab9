import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpCommand } from '../../clients/typescript/src/cli/mcp-command.js';
import type { ApiService } from '../../src/api/service.js';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { storedAccessToken } from '../support/oauth.js';

const apiPublicUrl = 'http://127.0.0.1:9/v1';
const resource = `${apiPublicUrl}/mcp`;
const resourceMetadata = 'http://127.0.0.1:9/.well-known/oauth-protected-resource/v1/mcp';
const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const call = (id: number, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});
/** A bearer value shaped as the console's access tokens are (43 base64url characters), issued by nobody. */
const madeUpToken = () => randomBytes(32).toString('base64url');
let address = 0;
/** A client address of its own, so that the per-address failed-authentication limit stays out of the way. */
const nextAddress = () => `10.44.${Math.floor(++address / 250)}.${(address % 250) + 1}`;

/** `gen mcp` relaying these lines to `baseURL`, as a desktop client writes them: what it answered. */
async function relayed(baseURL: string, apiKey: string, lines: string[]) {
  const stdin = new PassThrough();
  let stdout = '';
  let stderr = '';
  const exit = mcpCommand(
    { apiKey, baseURL },
    {
      stdin,
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
    },
  );
  stdin.end(`${lines.join('\n')}\n`);
  const code = await exit;
  return {
    code,
    answers: stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as unknown),
    stderr,
  };
}

function poster(api: () => ApiService) {
  return (key: string | null, body: unknown, headers: Record<string, string> = {}) =>
    api().app.inject({
      method: 'POST',
      url: '/v1/mcp',
      headers: { ...mcpHeaders, ...(key === null ? {} : bearer(key)), ...headers },
      payload: JSON.stringify(body),
      remoteAddress: nextAddress(),
    });
}

/**
 * /v1/mcp at its edges (issue 44): one HTTP request is one call's worth of limits. The real API
 * service in this process, with a per-key limit of 2 requests a minute.
 */
describe('MCP at its edges', () => {
  let db: TestDatabase;
  let api: ApiService;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { RATE_LIMIT_PER_MINUTE: '2', API_PUBLIC_URL: apiPublicUrl });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });
  const post = poster(() => api);

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

  it('gen mcp answers every request it cannot relay: a line `null`, a batch the API refuses, one that never reaches it', async () => {
    await api.app.listen({ host: '127.0.0.1', port: 0 });
    const baseURL = `http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}/v1`;
    const account = await createPaidAccount(db.pool);
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      call(2, 'get_credits'),
    ]);
    const answered = await relayed(baseURL, account.key, [
      'null',
      batch,
      JSON.stringify(call(3, 'get_credits')),
    ]);
    expect(answered.code).toBe(0);
    const refusal = { code: -32600, message: expect.stringMatching(/batches are not supported/) };
    expect(answered.answers).toEqual(
      expect.arrayContaining([
        {
          jsonrpc: '2.0',
          id: null,
          error: { code: -32600, message: 'Invalid Request: not a JSON-RPC message.' },
        },
        { jsonrpc: '2.0', id: 1, error: refusal },
        { jsonrpc: '2.0', id: 2, error: refusal },
        expect.objectContaining({ jsonrpc: '2.0', id: 3, result: expect.anything() }),
      ]),
    );
    expect(answered.answers).toHaveLength(4);

    // Nothing listens at port 9: each request of the batch is told, the notification is not answered.
    const unreachable = await relayed('http://127.0.0.1:9/v1', account.key, [batch]);
    expect(unreachable.code).toBe(0);
    expect(unreachable.answers).toEqual([
      { jsonrpc: '2.0', id: 1, error: { code: -32603, message: expect.stringMatching(/^Not relayed: /) } },
      { jsonrpc: '2.0', id: 2, error: { code: -32603, message: expect.stringMatching(/^Not relayed: /) } },
    ]);
    expect(unreachable.stderr).toMatch(/gen mcp: a batch of 3 was not relayed/);
  });

  it('a token without the mcp scope is 403 insufficient_scope; a bad credential 401 invalid_token; none a 401 naming the scope', async () => {
    const account = await createPaidAccount(db.pool);
    const scoped = await storedAccessToken(db.pool, { accountId: account.accountId, resource, scope: 'mcp' });
    const unscoped = await storedAccessToken(db.pool, {
      accountId: account.accountId,
      resource,
      scope: 'offline_access',
    });
    expect((await post(scoped, call(1, 'get_credits'))).statusCode).toBe(200);

    const refused = await post(unscoped, call(2, 'get_credits'));
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.headers['www-authenticate']).toBe(
      `Bearer error="insufficient_scope", scope="mcp", resource_metadata="${resourceMetadata}"`,
    );
    expect(refused.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32000, message: expect.stringMatching(/not granted the "mcp" scope/) },
      id: null,
    });
    await expect
      .poll(() =>
        db.pool.anyFirst(sql.type(z.object({ error_code: z.string().nullable() }))`
          SELECT error_code FROM api_request_log
          WHERE account_id = ${account.accountId} AND status_code = 403`),
      )
      .toEqual(['insufficient_scope']);

    const challenges = {
      none: (await post(null, call(3, 'get_credits'))).headers['www-authenticate'],
      madeUpToken: (await post(madeUpToken(), call(4, 'get_credits'))).headers['www-authenticate'],
      unknownKey: (await post(null, call(5, 'get_credits'), { 'x-api-key': 'gsk_live_nope' })).headers[
        'www-authenticate'
      ],
      notBearer: (await post(null, call(6, 'get_credits'), { authorization: `Basic ${account.key}` }))
        .headers['www-authenticate'],
    };
    expect(challenges).toEqual({
      none: `Bearer scope="mcp", resource_metadata="${resourceMetadata}"`,
      madeUpToken: `Bearer error="invalid_token", scope="mcp", resource_metadata="${resourceMetadata}"`,
      unknownKey: `Bearer error="invalid_token", scope="mcp", resource_metadata="${resourceMetadata}"`,
      notBearer: `Bearer error="invalid_request", scope="mcp", resource_metadata="${resourceMetadata}"`,
    });
  });
});

describe('made-up OAuth tokens meet the failed-lookup budget and the unknown-key memory (issue 44 §8)', () => {
  let db: TestDatabase;
  let api: ApiService;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { FAILED_AUTH_PROCESS_PER_MINUTE: '5', API_PUBLIC_URL: apiPublicUrl });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });
  const post = poster(() => api);

  it('one token guessed again and again is looked up once; past the budget, guesses are refused unasked and a working token still works', async () => {
    const account = await createPaidAccount(db.pool);
    const working = await storedAccessToken(db.pool, {
      accountId: account.accountId,
      resource,
      scope: 'mcp',
    });
    expect((await post(working, call(1, 'get_credits'))).statusCode).toBe(200);
    // Ten times the same guess, from ten addresses: one lookup, one unit of the budget of 5.
    const guess = madeUpToken();
    for (let i = 0; i < 10; i++) expect((await post(guess, call(2, 'ping'))).statusCode).toBe(401);
    // Four guesses more spend it; the next is refused without a query, as a made-up key would be.
    for (let i = 0; i < 4; i++) expect((await post(madeUpToken(), call(3, 'ping'))).statusCode).toBe(401);
    const refused = await post(madeUpToken(), call(4, 'ping'));
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.json().error).toMatchObject({
      code: 'rate_limited',
      message: expect.stringMatching(/on this server/),
    });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // A token that worked lately is still looked up, and works.
    expect((await post(working, call(5, 'get_credits'))).statusCode).toBe(200);
  });
});
