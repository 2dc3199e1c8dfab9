import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * What tools/list gives an agent, byte for byte: each tool's name, words, input and output schema
 * and annotations. The input schemas are derived from the zod schemas the tools parse their
 * arguments with; a change here is a change of what agents are told, made deliberately by updating
 * the snapshot in its own commit.
 */
describe('MCP tools/list contract', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { MCP_WAIT_SECONDS: '20' });
    account = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('tools/list', async () => {
    const response = await api.app.inject({
      method: 'POST',
      url: '/v1/mcp',
      headers: {
        ...bearer(account.key),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(response.statusCode, response.body).toBe(200);
    // One message, sent as a server-sent event (the transport's answer to a request).
    const data = response.body.split('\n').find((line) => line.startsWith('data: '))!;
    const { result } = JSON.parse(data.slice('data: '.length)) as { result: unknown };
    await expect(`${JSON.stringify(result, null, 2)}\n`).toMatchFileSnapshot('__snapshots__/tools-list.json');
  });
});
