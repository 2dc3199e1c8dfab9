import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import sharp from 'sharp';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generationSchema } from '../../src/api/schemas.js';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { createAccount, recordPurchase } from '../../src/db/accounts-repository.js';
import { grantCredits } from '../../src/db/credits-repository.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { chargesOf } from '../support/ledger.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/**
 * The MCP server at /v1/mcp through the real API process (as `npm run api` runs it) and a real
 * worker on the simulated provider, driven by the official TypeScript SDK's client over Streamable
 * HTTP: what an agent's MCP client sees, and the money behind it.
 */
describe('MCP over Streamable HTTP', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiProcess;
  let env: Record<string, string>;
  let account: TestAccount;
  const clients: Client[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool, { simDelayMs: 300 });
    env = { ...worker.apiEnv, DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '100000', MCP_WAIT_SECONDS: '20' };
    api = await startApiProcess(env);
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await api?.stop();
    await worker?.close();
    await db?.drop();
  });

  const connect = async (key = account.key) => {
    const client = new Client({ name: 'mcp-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${api.origin}/v1/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    clients.push(client);
    return client;
  };
  const balance = async () =>
    (
      (await (await connect()).callTool({ name: 'get_credits', arguments: {} })).structuredContent as {
        credits: number;
      }
    ).credits;
  const textOf = (result: CallToolResult) =>
    result.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');

  it('lists the tools, each with a title, an input and output schema and annotations', async () => {
    const client = await connect();
    expect(client.getServerCapabilities()?.tasks).toBeDefined();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'cancel_generation',
      'create_generation',
      'describe_model',
      'get_credits',
      'get_generation',
      'get_key_limits',
      'list_generations',
      'list_models',
      'quote',
    ]);
    for (const tool of tools) {
      expect(tool.title, tool.name).toBeTruthy();
      expect(tool.description!.length, tool.name).toBeGreaterThan(40);
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(tool.annotations?.readOnlyHint, tool.name).toBeTypeOf('boolean');
    }
    expect(tools.find((t) => t.name === 'create_generation')!.execution?.taskSupport).toBe('optional');

    // Where a tool takes a model's fields, its schema is the catalog's for that model, as GET
    // /v1/models gives it: one branch per model, each that model's request_schema.
    const models = (await (
      await fetch(`${api.origin}/v1/models`, { headers: { authorization: `Bearer ${account.key}` } })
    ).json()) as { data: Array<{ id: string; request_schema: Record<string, unknown> }> };
    expect(models.data.length).toBeGreaterThan(1);
    for (const name of ['create_generation', 'quote']) {
      const request = (tools.find((t) => t.name === name)!.inputSchema.properties as Record<string, any>)
        .request;
      expect(request.anyOf, name).toEqual(models.data.map((m) => m.request_schema));
    }
    const described = await client.callTool({ name: 'describe_model', arguments: { model: 'lumen-pro' } });
    expect(described.structuredContent).toEqual(models.data.find((m) => m.id === 'lumen-pro'));
  });

  it('creates an image: progress, the generation, a preview of at most 1 MB and a link to the file', async () => {
    const client = await connect();
    const before = await balance();
    const progress: Array<{ progress: number; message?: string }> = [];
    const result = (await client.callTool(
      {
        name: 'create_generation',
        arguments: { request: { model: 'lumen-pro', prompt: 'a lighthouse at dusk [sim:slow=1]' } },
      },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const generation = generationSchema.parse(result.structuredContent);
    expect(generation.status).toBe('succeeded');
    const key = result._meta?.idempotency_key as string;
    expect(textOf(result)).toContain(`idempotency_key "${key}"`);
    expect(progress.map((p) => p.message)).toEqual(['queued', 'processing (simulated)', 'succeeded']);

    const image = result.content.find((c) => c.type === 'image')!;
    expect(image).toMatchObject({ type: 'image', mimeType: 'image/webp' });
    const bytes = Buffer.from((image as { data: string }).data, 'base64');
    expect(bytes.length).toBeLessThanOrEqual(1024 * 1024);
    const meta = await sharp(bytes).metadata();
    expect(Math.max(meta.width, meta.height)).toBeLessThanOrEqual(1024);
    const link = result.content.find((c) => c.type === 'resource_link')!;
    expect(link).toMatchObject({ uri: generation.output!.images![0]!.url, mimeType: 'image/png' });
    expect((await fetch(generation.output!.images![0]!.url)).status).toBe(200);

    // A retry with the key it returned answers the same generation and charges once.
    const retry = (await client.callTool({
      name: 'create_generation',
      arguments: {
        request: { model: 'lumen-pro', prompt: 'a lighthouse at dusk [sim:slow=1]' },
        idempotency_key: key,
      },
    })) as CallToolResult;
    expect((retry.structuredContent as { id: string }).id).toBe(generation.id);
    expect(await chargesOf(db.pool, generation.id)).toMatchObject({
      debits: 1,
      refunds: 0,
      net: -generation.credits,
    });
    expect(await balance()).toBe(before - generation.credits);
  });

  it('a video: a link to the file and a poster frame; an input image sent as base64', async () => {
    const client = await connect();
    const video = (await client.callTool({
      name: 'create_generation',
      arguments: { request: { model: 'motion-1', prompt: 'waves on a shore' } },
    })) as CallToolResult;
    expect(video.structuredContent).toMatchObject({ status: 'succeeded', media_type: 'video' });
    const link = video.content.find((c) => c.type === 'resource_link')!;
    expect(link).toMatchObject({ mimeType: 'video/mp4' });
    const poster = video.content.find((c) => c.type === 'image') as { data: string } | undefined;
    expect(poster).toBeDefined();
    expect((await sharp(Buffer.from(poster!.data, 'base64')).metadata()).width).toBeGreaterThan(0);

    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3366aa' } })
      .png()
      .toBuffer();
    const edited = (await client.callTool({
      name: 'create_generation',
      arguments: {
        request: {
          model: 'lumen-pro',
          prompt: 'the same in red',
          images: [`data:image/png;base64,${png.toString('base64')}`],
        },
      },
    })) as CallToolResult;
    expect(edited.isError).toBeFalsy();
    expect(edited.structuredContent).toMatchObject({ status: 'succeeded' });
  });

  const createTask = (client: Client, prompt: string, model = 'lumen-lite') =>
    client.request(
      {
        method: 'tools/call',
        params: {
          name: 'create_generation',
          arguments: { request: { model, prompt } },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );

  it('a task: created, then its result as soon as the generation finishes (the time is measured)', async () => {
    const client = await connect();
    const times: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const startedAt = performance.now();
      const { task } = await createTask(client, `a heron, take ${i}`);
      const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      times.push(Math.round(performance.now() - startedAt));
      expect(result.structuredContent).toMatchObject({ id: task.taskId, status: 'succeeded' });
    }
    console.info(`create → task completed over the simulator (300 ms job): ${times.join(', ')} ms`);
  });

  it('a task: created, polled, finished, and answered by an API process restarted in between', async () => {
    const client = await connect();
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'create_generation',
          arguments: { request: { model: 'lumen-lite', prompt: 'a heron [sim:slow=1]' } },
          task: { ttl: 60_000 },
        },
      },
      CreateTaskResultSchema,
    );
    const id = created.task.taskId;
    expect(id).toMatch(/^gen_/);
    expect(created.task.status).toBe('working');
    expect((await client.experimental.tasks.getTask(id)).status).toBe('working');
    expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(id);

    // The process that created it goes; a new one (another port: another replica) answers.
    await api.stop();
    api = await startApiProcess(env);
    const again = await connect();
    const result = await again.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    expect(generationSchema.parse(result.structuredContent)).toMatchObject({ id, status: 'succeeded' });
    expect(result.content.some((c) => c.type === 'image')).toBe(true);
    expect((await again.experimental.tasks.getTask(id)).status).toBe('completed');
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('a task cancelled before the provider runs it is refunded once', async () => {
    const client = await connect();
    const before = await balance();
    const created = await createTask(client, 'a slow heron [sim:queued=30]');
    const id = created.task.taskId;
    const cancelled = await client.experimental.tasks.cancelTask(id);
    expect(cancelled.status).toBe('cancelled');
    expect((await client.experimental.tasks.getTask(id)).status).toBe('cancelled');
    const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ id, status: 'failed', error: { code: 'canceled' } });
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(await balance()).toBe(before);
    // A terminal task cannot be cancelled again: a protocol error.
    await expect(client.experimental.tasks.cancelTask(id)).rejects.toThrow(/terminal/);
  });

  it('a 402 is a tool error naming the price and the balance; an unknown tool is a protocol error', async () => {
    const poor = await createPaidAccount(db.pool, { oneTime: 1 });
    const client = await connect(poor.key);
    const result = (await client.callTool({
      name: 'create_generation',
      arguments: { request: { model: 'lumen-pro', prompt: 'an expensive lighthouse' } },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(
      /insufficient_credits: This generation costs 4 credits; the balance is 1\./,
    );
    const invalid = (await client.callTool({
      name: 'create_generation',
      arguments: { request: { model: 'lumen-pro', prompt: 'x', aspect_ratio: '7:5' } },
    })) as CallToolResult;
    expect(invalid.isError).toBe(true);
    expect(textOf(invalid)).toMatch(/invalid_request/);
    await expect(client.callTool({ name: 'paint', arguments: {} })).rejects.toThrow(/Unknown tool/);

    // As a task: the refusal was recorded as a rejected generation, and the task is that generation.
    const { task } = await createTask(client, 'an expensive heron', 'lumen-pro');
    expect(task).toMatchObject({
      status: 'failed',
      statusMessage: expect.stringMatching(/costs 4 credits; the balance is 1/),
    });
    const refusedResult = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
    expect(refusedResult).toMatchObject({ isError: true, structuredContent: { status: 'rejected' } });
    // The request log records each refused call's code, though the HTTP answer is a 200.
    const logged = () =>
      db.pool.anyFirst(sql.type(z.object({ error_code: z.string().nullable() }))`
        SELECT error_code FROM api_request_log WHERE account_id = ${poor.accountId} AND path = '/v1/mcp'`);
    await expect.poll(logged, { timeout: 10_000 }).toContain('insufficient_credits');

    // An account without a paid purchase (a gift only) connects and lists the tools; each call is
    // the paid-purchase rule's 403 in words.
    const free = await createAccount(db.pool, { email: `free-${Date.now()}@example.test` });
    await recordPurchase(db.pool, { accountId: free.id, kind: 'credit_pack', status: 'completed' });
    await grantCredits(db.pool, { accountId: free.id, pool: 'one_time', amount: 5, reason: 'test' });
    const { key } = await createApiKey(db.pool, { accountId: free.id });
    await db.pool.query(sql.unsafe`UPDATE purchases SET status = 'refunded' WHERE account_id = ${free.id}`);
    await recordPurchase(db.pool, { accountId: free.id, kind: 'gift', status: 'completed', credits: 100 });
    const freeClient = await connect(key);
    expect((await freeClient.listTools()).tools.length).toBe(9);
    const refused = (await freeClient.callTool({ name: 'get_credits', arguments: {} })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(
      /^payment_required: API access needs a completed credit-pack or subscription purchase\./,
    );
  });

  it('401 names the protected-resource metadata; GET is 405; a foreign Origin is refused', async () => {
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    const post = (headers: Record<string, string>) =>
      fetch(`${api.origin}/v1/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
        body: JSON.stringify(initialize),
      });
    const anonymous = await post({});
    await anonymous.text();
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe(
      `Bearer scope="mcp", resource_metadata="${api.origin}/.well-known/oauth-protected-resource/v1/mcp"`,
    );
    const foreign = await post({
      authorization: `Bearer ${account.key}`,
      origin: 'https://evil.example.com',
    });
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 }, id: null });
    const local = await post({ authorization: `Bearer ${account.key}`, origin: 'http://localhost:6274' });
    await local.text();
    expect(local.status).toBe(200);
    const get = await fetch(`${api.origin}/v1/mcp`, { headers: { authorization: `Bearer ${account.key}` } });
    await get.text();
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    const garbled = await fetch(`${api.origin}/v1/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${account.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: '{"jsonrpc": "2.0", ',
    });
    expect(garbled.status).toBe(400);
    expect(await garbled.json()).toMatchObject({ error: { code: -32700 } });
  });
});
