import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import Ajv2019 from 'ajv/dist/2019.js';
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

  /** One JSON-RPC request to /v1/mcp: its result (the answer is one server-sent event). */
  const rpc = async (method: string, params?: unknown) => {
    const response = await api.app.inject({
      method: 'POST',
      url: '/v1/mcp',
      headers: {
        ...bearer(account.key),
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(params ? { params } : {}) }),
    });
    expect(response.statusCode, response.body).toBe(200);
    const data = response.body.split('\n').find((line) => line.startsWith('data: '))!;
    return (JSON.parse(data.slice('data: '.length)) as { result: unknown }).result;
  };

  it('tools/list', async () => {
    const result = await rpc('tools/list');
    await expect(`${JSON.stringify(result, null, 2)}\n`).toMatchFileSnapshot('__snapshots__/tools-list.json');
  });

  it('what tools/list publishes of a tool’s arguments is what tools/call takes', async () => {
    const { tools } = (await rpc('tools/list')) as { tools: Tool[] };
    const ajv = new Ajv2019.default({ strict: false, unicodeRegExp: true });
    const request = { model: 'lumen-lite', prompt: 'x' };
    // Arguments that start nothing: a valid create is left out (it would admit a generation).
    const cases: Array<[string, Record<string, unknown>]> = [
      ['list_models', {}],
      ['list_models', { verbose: true }],
      ['describe_model', { model: 'lumen-lite' }],
      ['describe_model', { model: 3 }],
      ['describe_model', {}],
      ['quote', { request }],
      ['quote', { request, extra: 1 }],
      ['create_generation', { request, idempotency_key: 'a b' }],
      ['create_generation', { request, idempotency_key: 'x'.repeat(129) }],
      ['create_generation', { request, wait_seconds: -1 }],
      ['create_generation', { request, wait_seconds: 1.5 }],
      ['get_generation', { id: 'gen_nope', wait_seconds: 0 }],
      ['get_generation', { id: '' }],
      ['get_generation', { id: 'gen_nope', wait_seconds: -1 }],
      ['get_generation', {}],
      ['list_generations', {}],
      ['list_generations', { limit: 100, status: ['queued', 'failed'], model: 'lumen-lite' }],
      ['list_generations', { limit: 0 }],
      ['list_generations', { limit: 101 }],
      ['list_generations', { status: [] }],
      ['list_generations', { status: ['done'] }],
      ['list_generations', { cursor: 7 }],
      ['cancel_generation', { id: 'gen_nope' }],
      ['cancel_generation', { id: 5 }],
      ['get_credits', {}],
      ['get_credits', { account: 'a' }],
      ['get_key_limits', {}],
    ];
    for (const [name, args] of cases) {
      const tool = tools.find((t) => t.name === name)!;
      const result = (await rpc('tools/call', { name, arguments: args })) as CallToolResult;
      const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
      const refusedAsArguments = result.isError === true && text.includes('The tool arguments are invalid.');
      expect({ name, args, published: ajv.validate(tool.inputSchema, args) }).toEqual({
        name,
        args,
        published: !refusedAsArguments,
      });
    }
  });
});
