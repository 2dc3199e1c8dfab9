import { readFile, rm } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { imageSize } from 'image-size';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { parseCatalogFile } from '../../src/catalog/catalog-file.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import type { ProviderName } from '../../src/catalog/provider-mapping.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import type { Provider } from '../../src/providers/provider.js';
import { resolveUpdate } from '../../src/workflows/generation-workflow.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { workerProcesses } from '../support/worker-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { expectFlaggedForReview } from '../support/provider-lifecycle.js';
import { drawImage } from '../support/providers/fake-files.js';
import { promptContains } from '../support/providers/fake-http.js';
import { OpenAiImagesServer, openAiError } from '../support/providers/openai-images-server.js';
import { useGenerationStack } from '../support/stack.js';
import { workerProviders } from '../support/worker-providers.js';
import { waitFor } from '../support/wait.js';
import { chainHistory } from '../support/workflow-runs.js';

/** The models of catalog/examples/openai.json, checked and imported as `npm run admin -- import-catalog` does. */
async function insertOpenAiModels(pool: DatabasePool): Promise<void> {
  const file = 'catalog/examples/openai.json';
  const text = await readFile(new URL(`../../${file}`, import.meta.url), 'utf8');
  const summary = await importCatalog(pool, file, parseCatalogFile(text, file));
  expect(summary.added).toEqual(['openai-gpt-image-1', 'openai-gpt-image-1-mini']);
}

/** Waits until GET /v1/models offers the OpenAI models (the API reloads its catalog on NOTIFY). */
async function offered(api: ApiService, key: string): Promise<void> {
  await waitFor(async () => {
    const models = await api.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(key) });
    return models.json<{ data: Array<{ id: string }> }>().data.some((m) => m.id === 'openai-gpt-image-1');
  });
}

/** Every table's rows that mention `text`, by table. */
async function tablesMentioning(pool: DatabasePool, text: string): Promise<string[]> {
  const tables = await pool.anyFirst(sql.type(z.object({ table_name: z.string() }))`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`);
  const found: string[] = [];
  for (const table of tables) {
    const hits = await pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      SELECT count(*) AS n FROM ${sql.identifier([table])} t WHERE t::text LIKE ${`%${text}%`}`);
    if (hits > 0) found.push(table);
  }
  return found;
}

const callsWith = (openai: OpenAiImagesServer, prompt: string) =>
  openai.requests.filter((r) => r.url.startsWith('/v1/images/') && r.body.includes(prompt)).length;
const billedWith = (openai: OpenAiImagesServer, prompt: string) =>
  openai.accepted().filter((c) => c.input.prompt === prompt).length;

describe('OpenAI Images through the API, the workflow and the worker', () => {
  const key = `sk-proj-${randomBase62(40)}`;
  let openai: OpenAiImagesServer;
  // Filled before the stack starts: the API offers OpenAI models only with the key set.
  const apiEnv: Record<string, string> = {};
  let providerFor: (name: ProviderName) => Provider;
  beforeAll(async () => {
    openai = await OpenAiImagesServer.start({ key });
    Object.assign(apiEnv, openai.env());
  });
  afterAll(() => openai?.close());
  const stack = useGenerationStack({
    apiEnv,
    worker: { overrides: { providerFor: (name) => providerFor(name) } },
  });
  beforeAll(async () => {
    providerFor = workerProviders(stack, openai.env());
    await insertOpenAiModels(stack.db.pool);
    await offered(stack.api, stack.account.key);
  });

  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;
  const post = async (body: Record<string, unknown>) => {
    const started = Date.now();
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'openai-gpt-image-1',
      ...body,
    });
    expect(response.statusCode, response.body).toBe(202);
    return { generation: response.json<Record<string, any>>(), answeredInMs: Date.now() - started };
  };
  const history = async (id: string) =>
    JSON.stringify(await chainHistory(stack.client, await workflowIdOf(stack.db.pool, id)));

  it('succeeds with the stored file of the true size, one call billed, the key nowhere', async () => {
    const prompt = 'a lighthouse at dusk';
    const { generation } = await post({ prompt, aspect_ratio: '3:2', quality: 'low' });
    const done = await pollGeneration(stack.api, stack.account.key, generation.id);
    expect(done).toMatchObject({ status: 'succeeded', credits: 2, credits_refunded: false });
    expect(done.output.images[0]).toMatchObject({ width: 1536, height: 1024 });
    const file = Buffer.from(await (await fetch(done.output.images[0].url)).arrayBuffer());
    expect(imageSize(file)).toMatchObject({ width: 1536, height: 1024, type: 'png' });
    expect([callsWith(openai, prompt), billedWith(openai, prompt)]).toEqual([1, 1]);
    expect(openai.accepted().at(-1)!.input).toMatchObject({
      model: 'gpt-image-1',
      size: '1536x1024',
      quality: 'low',
      output_format: 'png',
      background: 'auto',
      n: 1,
    });
    expect(await history(generation.id)).not.toContain(key);
    expect(await tablesMentioning(stack.db.pool, key)).toEqual([]);
  });

  it('answers the POST at once, even when OpenAI takes seconds: the call is not in the POST', async () => {
    const prompt = 'a slow sunrise';
    openai.script({ delayMs: 3_000 }, promptContains(prompt));
    const { generation, answeredInMs } = await post({ prompt, model: 'openai-gpt-image-1-mini' });
    expect(answeredInMs).toBeLessThan(1_500);
    expect(generation).toMatchObject({ status: 'queued', credits: 2 });
    const done = await pollGeneration(stack.api, stack.account.key, generation.id);
    expect(done.status).toBe('succeeded');
    expect(Date.parse(done.completed_at) - Date.parse(done.created_at)).toBeGreaterThanOrEqual(3_000);
    expect(openai.accepted().at(-1)!.input).toMatchObject({ model: 'gpt-image-1-mini', prompt });
  });

  it('edits: an inline (data URI) reference image reaches OpenAI as an uploaded file', async () => {
    const prompt = 'the same fox, at night';
    const reference = await drawImage(48, 32, 'png');
    const { generation } = await post({
      prompt,
      aspect_ratio: '2:3',
      images: [`data:image/png;base64,${reference.toString('base64')}`],
    });
    const done = await pollGeneration(stack.api, stack.account.key, generation.id);
    expect(done.status).toBe('succeeded');
    expect(done.output.images[0]).toMatchObject({ width: 1024, height: 1536 });
    const call = openai.accepted().find((c) => c.input.prompt === prompt)!;
    expect(call.endpoint).toBe('edits');
    expect(call.images).toEqual([{ name: 'image-1.png', type: 'image/png', size: reference.length }]);
    expect(call.input).toMatchObject({ model: 'gpt-image-1', size: '1024x1536', n: 1 });
  });

  it('400 (a moderation refusal): refunded, provider_rejected', async () => {
    const prompt = 'something the safety system refuses';
    openai.script(
      {
        fault: {
          kind: 'status',
          status: 400,
          body: openAiError(
            'Your request was rejected by the safety system.',
            'image_generation_user_error',
            'moderation_blocked',
          ),
        },
      },
      promptContains(prompt),
    );
    const before = await balance();
    const { generation } = await post({ prompt, quality: 'high' });
    const done = await pollGeneration(stack.api, stack.account.key, generation.id);
    expect(done).toMatchObject({
      status: 'failed',
      credits: 25,
      credits_refunded: true,
      error: { code: 'provider_rejected' },
    });
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
    expect(callsWith(openai, prompt)).toBe(1);
  });

  it('429 with Retry-After is ridden out: the call again after the wait, succeeded, billed once', async () => {
    const prompt = 'a busy harbour';
    openai.script({ fault: { kind: 'status', status: 429, retryAfter: 1 } }, promptContains(prompt));
    const { generation } = await post({ prompt });
    const done = await pollGeneration(stack.api, stack.account.key, generation.id);
    expect(done.status).toBe('succeeded');
    expect([callsWith(openai, prompt), billedWith(openai, prompt)]).toEqual([2, 1]);
    expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it.each([
    ['the connection dropped mid-call', 'a dropped line', { fault: { kind: 'drop' as const } }],
    ['the answer cut off mid-body', 'a torn letter', { truncate: true }],
  ])('%s: needs review, nothing refunded, exactly one call billed', async (_, prompt, outcome) => {
    openai.script(outcome, promptContains(prompt));
    const before = await balance();
    const { generation } = await post({ prompt });
    const review = await pollGeneration(
      stack.api,
      stack.account.key,
      generation.id,
      (g) => g.error?.code === 'submission_unresolved',
    );
    expect(review).toMatchObject({ status: 'failed', credits: 7, credits_refunded: false });
    expect(await balance()).toBe(before - 7);
    expect([callsWith(openai, prompt), billedWith(openai, prompt)]).toEqual([1, 1]);
    await expectFlaggedForReview(stack.client, stack.db.pool, generation.id);
    expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await history(generation.id)).not.toContain(key);
  });
});

/** The real worker process (`npm run worker`), killed with SIGKILL while its call to OpenAI is in flight. */
describe('a worker killed in the middle of an OpenAI call', () => {
  const key = `sk-proj-${randomBase62(40)}`;
  const taskQueue = `openai-crash-${randomBase62(8)}`;
  const storageDir = `/tmp/openai-crash-${taskQueue}`;
  let openai: OpenAiImagesServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let temporal: Connection;
  const workers = workerProcesses(() => ({
    ...openai.env(),
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    // Everything a worker says, so that the key's absence means something.
    LOG_LEVEL: 'trace',
  }));
  const startWorker = () => workers.start();

  beforeAll(async () => {
    openai = await OpenAiImagesServer.start({ key });
    db = await createTestDatabase();
    await insertOpenAiModels(db.pool);
    api = await startTestApi(db.url, {
      ...openai.env(),
      TEMPORAL_TASK_QUEUE: taskQueue,
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9',
      PROVIDER_POLL_INTERVAL_MS: '100',
    });
    account = await createPaidAccount(db.pool, { oneTime: 50 });
    temporal = await Connection.connect({ address: inject('temporalAddress') });
  });
  afterAll(async () => {
    workers.killAll();
    await temporal?.close();
    await api?.close();
    await db?.drop();
    await openai?.close();
    await rm(storageDir, { recursive: true, force: true });
  });

  it('the resumed wait does not call again: review, one call billed, nothing refunded, the key in no log', async () => {
    const prompt = 'a call nobody hears back from';
    // OpenAI reads the call whole (and will bill it), and the answer never comes.
    openai.script({ fault: { kind: 'hang' } }, promptContains(prompt));
    const first = await startWorker();
    const response = await createGeneration(api, account.key, { model: 'openai-gpt-image-1', prompt });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    await expect.poll(() => callsWith(openai, prompt), { timeout: 15_000 }).toBe(1);
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));

    // The wait's heartbeat times out, and its next attempt runs on the new worker.
    await startWorker();
    const review = await pollGeneration(
      api,
      account.key,
      id,
      (g) => g.error?.code === 'submission_unresolved',
      60_000,
    );
    expect(review).toMatchObject({ status: 'failed', credits: 7, credits_refunded: false });
    expect([callsWith(openai, prompt), billedWith(openai, prompt)]).toEqual([1, 1]);
    expect(
      await db.pool.oneFirst(sql.type(z.object({ state: z.string() }))`
        SELECT state FROM openai_image_calls WHERE token = ${`tok_${id}`}`),
    ).toBe('sent');
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });

    const handle = new Client({ connection: temporal }).workflow.getHandle(await workflowIdOf(db.pool, id));
    expect(JSON.stringify(await handle.fetchHistory())).not.toContain(key);
    expect(await tablesMentioning(db.pool, key)).toEqual([]);
    expect(workers.logs()).toContain('worker running');
    expect(workers.logs()).not.toContain(key);

    // Support can only refund it or leave the charge: there is no job at OpenAI to look up.
    await handle.executeUpdate(resolveUpdate, { args: [{ action: 'refund', note: 'lost OpenAI call' }] });
    const refunded = await pollGeneration(api, account.key, id, (g) => g.credits_refunded === true);
    expect(refunded).toMatchObject({ status: 'failed', credits_refunded: true });
    expect(callsWith(openai, prompt)).toBe(1);
  }, 120_000);
});
