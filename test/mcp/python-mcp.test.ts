import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createPaidAccount } from '../support/api.js';
import { chargesOf } from '../support/ledger.js';
import { useListeningStack } from '../client/client-stack.js';
import { mustRun, uvEnv, uvPath } from '../clients/python-tools.js';

/** The official Python MCP SDK, pinned: what an agent written in Python installs. */
const pythonMcp = 'mcp==2.3.0';

interface PythonRun {
  protocolVersion: string;
  tools: string[];
  created: {
    isError: boolean;
    generation: { id: string; status: string; credits: number };
    blocks: { type: string; mimeType?: string; bytes?: number; uri?: string }[];
  };
  again: { id: string };
  tooDear: { isError: boolean; text: string };
  credits: { credits: number };
}

/**
 * /v1/mcp from the official Python MCP client (issue 37 §4): test/mcp/python_mcp_e2e.py lists the
 * tools, creates an image twice with one idempotency_key, asks for more than the balance, and reads
 * the credits, over Streamable HTTP with the key as a header. The package comes from PyPI through uv
 * (cached under .tools/, like the Python client's tests). The Python SDK has no client side of MCP
 * tasks yet; tasks are covered with the TypeScript SDK (test/mcp).
 */
describe('/v1/mcp from the official Python MCP client', () => {
  const stack = useListeningStack({ account: { oneTime: 1 }, worker: { simDelayMs: 200 } });

  it('lists the tools, creates an image (preview, link) charged once, and a 402 is a tool error with both numbers', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 5 });
    const output = await mustRun(
      await uvPath(),
      ['run', '--no-project', '--python', 'python3', '--with', pythonMcp, 'python', 'python_mcp_e2e.py'],
      {
        cwd: path.join(import.meta.dirname),
        env: { ...uvEnv(), MCP_URL: `${stack.listening.baseURL}/mcp`, GENERATION_API_KEY: account.key },
      },
    );
    // The script's one JSON line; uv's own lines ("Installed 28 packages…" on a first run) come after it.
    const line = output.split('\n').find((l) => l.startsWith('{"protocolVersion"'));
    expect(line, output).toBeDefined();
    const run = JSON.parse(line!) as PythonRun;
    expect(run.protocolVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(run.tools).toEqual(expect.arrayContaining(['create_generation', 'get_generation', 'quote']));
    const { generation, blocks } = run.created;
    expect(run.created.isError).toBe(false);
    expect(generation.status).toBe('succeeded');
    const image = blocks.find((block) => block.type === 'image');
    expect(image?.mimeType).toMatch(/^image\//);
    expect(image!.bytes).toBeGreaterThan(0);
    expect(image!.bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(blocks.find((block) => block.type === 'resource_link')?.uri).toMatch(/^https?:\/\//);
    expect(run.again.id).toBe(generation.id);
    // 5 credits, 2 spent: lumen-pro at 4K (10 credits) is refused, in words, and charges nothing.
    expect(run.tooDear.isError).toBe(true);
    expect(run.tooDear.text).toMatch(/insufficient_credits/);
    expect(run.tooDear.text).toMatch(/\b10\b/);
    expect(run.tooDear.text).toMatch(/\b3\b/);
    expect(run.credits.credits).toBe(5 - generation.credits);
    expect(await chargesOf(stack.db.pool, generation.id)).toEqual({
      debits: 1,
      refunds: 0,
      net: -generation.credits,
      submissions: 1,
    });
  }, 240_000);
});
