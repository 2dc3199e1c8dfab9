import type { ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql, type DatabaseTransactionConnection } from 'slonik';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { routeAttemptsOf } from '../../src/db/route-attempts.js';
import { randomBase62 } from '../../src/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { exampleCatalog, importExampleCatalog } from '../support/example-catalog.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { FalQueueServer, falRequestError } from '../support/providers/fal-queue-server.js';
import { ReplicateServer } from '../support/providers/replicate-server.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses } from '../support/worker-process.js';

/**
 * Issue 29: `flux-schnell` of catalog/examples/routed.json (fal first, Replicate second), the real
 * API and worker processes, the fal queue and Replicate stand-ins. A route is left only on the
 * provider's proof that it did not take the job; one debit whatever the routes tried.
 */
describe('a model routed across fal and Replicate', () => {
  const taskQueue = `routed-${randomBase62(8)}`;
  let fal: FalQueueServer;
  let replicate: ReplicateServer;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let storageDir: string;
  const apiEnv = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '50',
    ...fal.env(),
    ...replicate.env(),
  });
  const workers = workerProcesses(() => ({
    ...apiEnv(),
    DATABASE_URL: db.url,
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    // The faults here are each test's own: none may take a provider down but the breaker test's.
    PROVIDER_DOWN_AFTER_FAILURES: '1000',
    LOG_LEVEL: 'warn',
  }));
  let worker: ChildProcess | undefined;

  beforeAll(async () => {
    fal = await FalQueueServer.start();
    replicate = await ReplicateServer.start();
    db = await createTestDatabase();
    await importExampleCatalog(db.pool, 'routed');
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'routed-'));
    await chmod(storageDir, 0o755);
    api = await startTestApi(db.url, apiEnv());
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
    worker = await workers.start();
  });
  afterAll(async () => {
    workers.killAll();
    await api?.close();
    await fal?.close();
    await replicate?.close();
    await db?.drop();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    fal.beforeCreateAnswer = undefined;
  });

  const post = (body: Record<string, unknown>, key?: string) =>
    createGeneration(api, account.key, { model: 'flux-schnell', ...body }, key);
  const accepted = async (body: Record<string, unknown>) => {
    const response = await post(body);
    expect(response.statusCode, response.body).toBe(202);
    return response.json<Record<string, any>>();
  };
  const settled = (id: string) =>
    pollGeneration(api, account.key, id, (g) => g.status !== 'queued' || g.provider !== null, 30_000).then(
      () => pollGeneration(api, account.key, id, (g) => g.status !== 'queued', 30_000),
    );
  const created = (server: FalQueueServer | ReplicateServer, prompt: string) =>
    server.accepted().filter((job) => String(job.input.prompt).includes(prompt)).length;
  const attempts = async (id: string) =>
    (await routeAttemptsOf(db.pool, id)).map((a) => [a.provider, a.outcome]);
  const balance = async () =>
    (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })).json()
      .credits as number;
  const setFalDown = async (down: boolean) => {
    await db.pool.query(
      down
        ? sql.unsafe`INSERT INTO provider_health (provider, state, consecutive_failures, last_error, last_failure_at, down_since, probe_at)
            VALUES ('fal', 'down', 5, 'test: fal is down', now(), now(), now() + interval '1 hour')
            ON CONFLICT (provider) DO UPDATE SET state = 'down', down_since = now(), probe_at = now() + interval '1 hour'`
        : sql.unsafe`UPDATE provider_health SET state = 'up', consecutive_failures = 0, down_since = NULL, probe_at = NULL
            WHERE provider = 'fal'`,
    );
    // The API hears of it by NOTIFY: its quote says which route would serve now.
    await waitFor(async () => {
      const quote = await api.app.inject({
        method: 'POST',
        url: '/v1/generations/quote',
        headers: { ...bearer(account.key), 'content-type': 'application/json' },
        payload: JSON.stringify({ model: 'flux-schnell', prompt: 'quote' }),
      });
      return quote.json<{ provider: string }>().provider === (down ? 'replicate' : 'fal');
    }, 10_000);
  };

  for (const [name, refuse] of [
    ['503', () => fal.failCreate({ kind: 'status', status: 503 }, promptContains('refused 503'))],
    ['429', () => fal.failCreate({ kind: 'status', status: 429 }, promptContains('refused 429'))],
    ['connection refused', () => fal.goDown()],
  ] as const) {
    it(`fal refusing the create (${name}) → served by Replicate, one debit, provider "replicate"`, async () => {
      const prompt = `refused ${name}`;
      await refuse();
      const before = await balance();
      const generation = await accepted({ prompt });
      if (name === 'connection refused') await fal.goUp();
      const done = await settled(generation.id as string);
      expect(done).toMatchObject({ status: 'succeeded', provider: 'replicate', credits_refunded: false });
      expect(created(fal, prompt)).toBe(0);
      expect(created(replicate, prompt)).toBe(1);
      expect(await chargesOf(db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 0 });
      expect(await balance()).toBe(before - 1);
      expect(await attempts(generation.id as string)).toEqual([
        ['fal', 'not_accepted'],
        ['replicate', 'accepted'],
      ]);
      const get = await api.app.inject({
        method: 'GET',
        url: `/v1/generations/${generation.id}`,
        headers: bearer(account.key),
      });
      expect(get.headers['generation-provider']).toBe('replicate');
    });
  }

  it('fal’s breaker open → the first attempt goes to Replicate; provider.only fal → 503 before any debit', async () => {
    await setFalDown(true);
    try {
      const before = await balance();
      const generation = await accepted({ prompt: 'breaker open' });
      expect(await settled(generation.id as string)).toMatchObject({
        status: 'succeeded',
        provider: 'replicate',
      });
      expect(fal.requests.filter((r) => r.method === 'POST' && r.body.includes('breaker open'))).toEqual([]);
      expect(await attempts(generation.id as string)).toEqual([['replicate', 'accepted']]);

      const only = await post({ prompt: 'only fal', provider: { only: ['fal'] } });
      expect(only.statusCode, only.body).toBe(503);
      expect(only.json()).toMatchObject({ error: { code: 'service_unavailable' } });
      const noFallback = await post({ prompt: 'no fallback', provider: { allow_fallbacks: false } });
      expect(noFallback.statusCode).toBe(503);
      expect(await balance()).toBe(before - 1);
    } finally {
      await setFalDown(false);
    }
  });

  it('fal accepts and its answer is lost → no failover: review, one debit, nothing at Replicate', async () => {
    fal.failCreate({ kind: 'drop', accepted: true }, promptContains('answer lost'));
    const generation = await accepted({ prompt: 'answer lost' });
    const done = await pollGeneration(
      api,
      account.key,
      generation.id as string,
      (g) => g.status !== 'queued',
    );
    expect(done).toMatchObject({ status: 'failed', credits_refunded: false, provider: 'fal' });
    const review = await db.pool.oneFirst(sql.type(z.object({ needs_review: z.boolean() }))`
      SELECT needs_review FROM generations WHERE id = ${generation.id as string}`);
    expect(review).toBe(true);
    expect(created(fal, 'answer lost')).toBe(1);
    expect(created(replicate, 'answer lost')).toBe(0);
    expect(await chargesOf(db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('Replicate reports its job aborted before it started → the next route (fal) serves it, one debit', async () => {
    replicate.script({ pollsStarting: 1, pollsProcessing: 0, final: 'aborted' }, promptContains('aborted'));
    const generation = await accepted({ prompt: 'aborted first', provider: { order: ['replicate'] } });
    const done = await settled(generation.id as string);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'fal', credits_refunded: false });
    expect(created(replicate, 'aborted first')).toBe(1);
    expect(created(fal, 'aborted first')).toBe(1);
    expect(await chargesOf(db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 0 });
    const recorded = await routeAttemptsOf(db.pool, generation.id as string);
    expect(recorded.map((a) => [a.provider, a.outcome, a.reason])).toEqual([
      ['replicate', 'not_accepted', 'The prediction was aborted at the provider before it started.'],
      ['fal', 'accepted', null],
    ]);
  });

  it('a fal job that fails after running → failed and refunded, not moved to Replicate', async () => {
    fal.script(
      { pollsInQueue: 0, error: falRequestError('runner_disconnected', 503) },
      promptContains('ran and failed'),
    );
    const generation = await accepted({ prompt: 'ran and failed' });
    const done = await settled(generation.id as string);
    expect(done).toMatchObject({ status: 'failed', credits_refunded: true, provider: 'fal' });
    expect(created(replicate, 'ran and failed')).toBe(0);
    expect(await chargesOf(db.pool, generation.id as string)).toMatchObject({ debits: 1, refunds: 1 });
    expect(await attempts(generation.id as string)).toEqual([['fal', 'accepted']]);
  });

  it('a worker SIGKILLed after fal’s refusal is recorded and before the Replicate create → one job, one debit', async () => {
    // The next route's claim reads the catalog (models): held here, it waits once fal's end is recorded.
    let release: (() => void) | undefined;
    let locked: Promise<void> | undefined;
    fal.failCreate({ kind: 'status', status: 503 }, promptContains('killed between'));
    fal.beforeCreateAnswer = () => {
      fal.beforeCreateAnswer = undefined;
      return new Promise<void>((answer) => {
        locked = db.pool.transaction(async (tx: DatabaseTransactionConnection) => {
          await tx.query(sql.unsafe`LOCK TABLE models IN ACCESS EXCLUSIVE MODE`);
          answer();
          await new Promise<void>((resolve) => (release = resolve));
        });
      });
    };
    // The POST may answer 202 or, its worker gone mid-handover, 503: the generation is the same either way.
    const response = post({ prompt: 'killed between' });
    const id = await waitFor(async () => {
      const rows = await db.pool.any(sql.type(z.object({ generation_id: z.string() }))`
        SELECT generation_id FROM route_attempts WHERE outcome = 'not_accepted' AND reason LIKE '%HTTP 503%'
          AND generation_id IN (SELECT id FROM generations WHERE input->>'prompt' = 'killed between')`);
      return rows[0]?.generation_id ?? null;
    }, 20_000);
    // Route 1's claim waits on the lock: the worker dies before its create.
    const claiming = await waitFor(async () => {
      const waiting = await db.pool.anyFirst(sql.type(z.object({ pid: z.number() }))`
        SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%submit_claim%'`);
      return waiting[0] ?? null;
    }, 20_000);
    worker!.kill('SIGKILL');
    await new Promise((resolve) => worker!.once('exit', resolve));
    // Its statement dies with it (PostgreSQL would otherwise run it once the lock is free, and the
    // dead attempt's claim would hold the next one off for its window: the claim's own safety).
    await db.pool.query(sql.unsafe`SELECT pg_terminate_backend(${claiming})`);
    expect(created(replicate, 'killed between')).toBe(0);
    release!();
    await locked;
    worker = await workers.start();
    expect([202, 503]).toContain((await response).statusCode);
    const done = await settled(id);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'succeeded', provider: 'replicate' });
    expect(created(fal, 'killed between')).toBe(0);
    expect(created(replicate, 'killed between')).toBe(1);
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await attempts(id)).toEqual([
      ['fal', 'not_accepted'],
      ['replicate', 'accepted'],
    ]);
  }, 120_000);

  it('cheapest, end to end: the route that costs us least serves first (Replicate here), fal untouched', async () => {
    const [routed] = await exampleCatalog('routed');
    const definition = {
      ...routed!.definition,
      routing: { policy: 'cheapest' as const },
      routes: [
        { ...routed!.definition.routes![0]!, cost: { usd: 0.004 } },
        { ...routed!.definition.routes![1]!, cost: { usd: 0.002 } },
      ],
    };
    await importCatalog(db.pool, 'cheapest.json', [
      { label: 'cheapest', id: 'flux-schnell-cheapest', sort_order: 51, active: true, definition },
    ]);
    await waitFor(async () => {
      const models = await api.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(account.key) });
      return models
        .json<{ data: Array<{ id: string }> }>()
        .data.some((m) => m.id === 'flux-schnell-cheapest');
    });
    const response = await createGeneration(api, account.key, {
      model: 'flux-schnell-cheapest',
      prompt: 'cheapest first',
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json<{ id: string }>().id;
    expect(await settled(id)).toMatchObject({ status: 'succeeded', provider: 'replicate' });
    expect(created(fal, 'cheapest first')).toBe(0);
    expect(await attempts(id)).toEqual([['replicate', 'accepted']]);
  });

  it('refuses a provider field naming a provider the model is not served by (400, nothing charged)', async () => {
    const before = await balance();
    const response = await post({ prompt: 'openai only', provider: { only: ['openai'], order: ['nobody'] } });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error: { code: 'invalid_request' } });
    expect(response.json<{ issues: Array<{ field: string }> }>().issues.map((i) => i.field)).toEqual([
      'provider.order.0',
    ]);
    const unserved = await post({ prompt: 'openai only', provider: { only: ['openai'] } });
    expect(unserved.statusCode).toBe(400);
    expect(unserved.json()).toMatchObject({
      issues: [{ field: 'provider.only.0', code: 'invalid_value' }],
    });
    expect(await balance()).toBe(before);
  });

  it('provider is part of the Idempotency-Key’s body: another provider field is a conflict', async () => {
    const key = `routed-${randomBase62(8)}`;
    const first = await post({ prompt: 'keyed', provider: { order: ['replicate'] } }, key);
    expect(first.statusCode, first.body).toBe(202);
    const again = await post({ prompt: 'keyed', provider: { order: ['replicate'] } }, key);
    expect(again.json<{ id: string }>().id).toBe(first.json<{ id: string }>().id);
    const other = await post({ prompt: 'keyed' }, key);
    expect(other.statusCode).toBe(409);
    expect(await settled(first.json<{ id: string }>().id).then((g) => [g.status, g.provider])).toEqual([
      'succeeded',
      'replicate',
    ]);
  });
});
