import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chargesOf } from '../support/ledger.js';
import { ensureClientBuilt, generationCount, useListeningStack } from '../client/client-stack.js';
import { genBin } from '../client/gen-cli.js';

/**
 * `npx gen mcp` (issue 37 §1): a desktop agent starts it as a command and speaks MCP on its stdin
 * and stdout; it relays every message to {base URL}/mcp with the user's key. Driven here by the
 * official TypeScript SDK's stdio client, against the real stack: the remote server's tools, an
 * image created through it with its preview and link, one debit for a retried create.
 */
describe('gen mcp: the MCP server over stdio (official SDK client)', () => {
  const stack = useListeningStack({ account: { oneTime: 100 }, worker: { simDelayMs: 200 } });
  let home = '';
  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'gen-mcp-'));
    await ensureClientBuilt();
  }, 180_000);
  afterAll(async () => {
    if (home) await rm(home, { recursive: true, force: true });
  });

  /** An MCP client connected to `gen mcp` as a desktop agent starts it, with this key. */
  async function connect(key: string): Promise<{ client: Client }> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [genBin, 'mcp'],
      env: {
        PATH: process.env.PATH!,
        HOME: home,
        XDG_CONFIG_HOME: path.join(home, 'config'),
        GENERATION_API_KEY: key,
        GENERATION_BASE_URL: stack.listening.baseURL,
      },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'stdio-e2e', version: '1.0.0' });
    await client.connect(transport);
    return { client };
  }

  it('lists the remote tools, creates an image (preview and link), and a retry with the key charges once', async () => {
    const { client } = await connect(stack.account.key);
    try {
      const tools = (await client.listTools()).tools.map((tool) => tool.name);
      expect(tools).toEqual(
        expect.arrayContaining(['list_models', 'create_generation', 'get_generation', 'get_credits']),
      );
      const args = {
        request: { model: 'lumen-lite', prompt: 'a lighthouse at dusk, over stdio' },
        idempotency_key: 'stdio-e2e-1',
      };
      const first = await client.callTool({ name: 'create_generation', arguments: args });
      expect(first.isError ?? false).toBe(false);
      const generation = first.structuredContent as { id: string; status: string; credits: number };
      expect(generation.status).toBe('succeeded');
      const content = first.content as { type: string; mimeType?: string; data?: string; uri?: string }[];
      const image = content.find((block) => block.type === 'image');
      expect(image?.mimeType).toMatch(/^image\//);
      expect(Buffer.from(image!.data!, 'base64').length).toBeLessThanOrEqual(1024 * 1024);
      expect(content.find((block) => block.type === 'resource_link')?.uri).toMatch(/^https?:\/\//);
      // The agent retries the call (its answer was lost): the same generation, no second debit.
      const again = await client.callTool({ name: 'create_generation', arguments: args });
      expect((again.structuredContent as { id: string }).id).toBe(generation.id);
      expect(await generationCount(stack.db.pool, stack.account.accountId)).toBe(1);
      expect(await chargesOf(stack.db.pool, generation.id)).toEqual({
        debits: 1,
        refunds: 0,
        net: -generation.credits,
        submissions: 1,
      });
    } finally {
      await client.close();
    }
  });

  it('answers a request the API refused with a JSON-RPC error saying why (a wrong key: 401)', async () => {
    await expect(connect('gsk_live_not-a-key-at-all')).rejects.toThrow(/HTTP 401 .*check the API key/);
  });
});
