import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { batchCounts, batchCountsOf, listBatches } from '../../src/db/batches.js';
import { pruneRejectedGenerations } from '../../src/db/pruning-repository.js';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { batchLines as lines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { offerExampleModels } from '../support/worker-providers.js';

const countRow = z.object({ n: z.number() });
const workflowRow = z.object({ workflow_id: z.string() });

/**
 * Issue 45: what one account's batches may take. Caps at creation on the open batches and the lines
 * they hold (409, nothing written); the account's lines in flight bounded across all its batches;
 * a line waiting on a down provider holding no other line back; and an ended batch keeping only
 * what its results need.
 */
describe('batch limits', () => {
  const stack = useBatchStack({
    // The account's batch lines in flight, all its batches together (BATCH_LINES_IN_FLIGHT_PER_ACCOUNT).
    worker: { simDelayMs: 10, overrides: { batchLinesPerAccount: 3 } },
    // fal is configured (never reached: it is down throughout), so that its models are offered.
    apiEnv: { FAL_KEY: 'test-key', FAL_QUEUE_URL: 'http://127.0.0.1:9' },
    account: { oneTime: 100_000 },
    // Short slices: a batch's workflow continues as new within seconds (see the last test).
    sliceMs: 1_000,
  });
  const cancel = (key: string, id: string) =>
    stack.api.app.inject({ method: 'POST', url: `/v1/batches/${id}/cancel`, headers: bearer(key) });

  it('refuses a batch past the open batches or the lines they may hold: 409, its own code, nothing written', async () => {
    const { db } = stack;
    const api = await startTestApi(db.url, {
      ...stack.worker.apiEnv,
      BATCH_OPEN_PER_ACCOUNT: '3',
      BATCH_QUEUED_LINES_PER_ACCOUNT: '5',
    });
    try {
      const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
      // Lines that wait in the provider's queue: a cancel stops them at once.
      const slow = (n: number) => ({ requests: lines(n, (i) => `held ${i} [sim:queued=600]`) });
      const a = await postBatch(api, account.key, slow(2));
      const b = await postBatch(api, account.key, slow(3));
      expect([a.statusCode, b.statusCode], b.body).toEqual([201, 201]);
      // 5 lines open: one more is past the lines' cap.
      const c = await postBatch(api, account.key, slow(1));
      expect(c.statusCode, c.body).toBe(409);
      expect(c.json().error).toMatchObject({
        code: 'batch_lines_limit_exceeded',
        message: expect.stringContaining('hold 5 lines and may hold 5'),
      });
      // A batch that ended no longer counts.
      await cancel(account.key, a.json().id as string);
      await waitForBatch(api, account.key, a.json().id as string, undefined, 60_000);
      const d = await postBatch(api, account.key, slow(1));
      const e = await postBatch(api, account.key, slow(1));
      expect([d.statusCode, e.statusCode], e.body).toEqual([201, 201]);
      // 3 open (4 lines): a fourth batch is past the open batches' cap, whatever its size.
      const f = await postBatch(api, account.key, slow(1));
      expect(f.statusCode, f.body).toBe(409);
      expect(f.json().error.code).toBe('open_batch_limit_exceeded');
      const written = await db.pool.oneFirst(sql.type(countRow)`
        SELECT count(*)::int AS n FROM batches WHERE account_id = ${account.accountId}`);
      expect(written).toBe(4);
      for (const open of [b, d, e]) await cancel(account.key, open.json().id as string);
    } finally {
      await api.close();
    }
  }, 120_000);

  it("keeps the account's lines in flight within its bound, across all its batches", async () => {
    const { api, db } = stack;
    const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    const ids = await Promise.all(
      [0, 1, 2, 3].map(async (b) => {
        const created = await postBatch(api, account.key, {
          requests: lines(3, (i) => `bounded ${b}-${i} [sim:slow=1]`),
        });
        expect(created.statusCode, created.body).toBe(201);
        return created.json().id as string;
      }),
    );
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const queued = await db.pool.oneFirst(sql.type(countRow)`
          SELECT count(*)::int AS n FROM generations
          WHERE account_id = ${account.accountId} AND status = 'queued' AND batch_id IS NOT NULL`);
        most = Math.max(most, queued);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const done = [];
    for (const id of ids) done.push(await waitForBatch(api, account.key, id, undefined, 90_000));
    sampling = false;
    await sampler;
    expect(done.map((b) => [b.status, b.request_counts.succeeded])).toEqual(ids.map(() => ['completed', 3]));
    // 4 batches of 3 would have 12 lines in flight at once; the account's bound is 3.
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(3);
  }, 120_000);

  it('passes over lines waiting on a down provider: the healthy lines behind them run', async () => {
    const { api, db } = stack;
    await offerExampleModels(stack, ['catalog/examples/fal.json'], ['fal-flux-schnell']);
    await db.pool.query(sql.unsafe`
      INSERT INTO provider_health (provider, state, consecutive_failures, down_since, probe_at)
      VALUES ('fal', 'down', 5, now(), now() + interval '1 hour')
      ON CONFLICT (provider) DO UPDATE SET state = 'down', probe_at = EXCLUDED.probe_at`);
    const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    // 20 lines on the down provider (BATCH_LINES_IN_FLIGHT's worth), then 5 that can run.
    const down = Array.from({ length: 20 }, (_, i) => ({
      custom_id: `down-${i}`,
      model: 'fal-flux-schnell',
      prompt: `down ${i}`,
    }));
    const healthy = lines(5, (i) => `healthy ${i}`).map((line, i) => ({ ...line, custom_id: `up-${i}` }));
    const created = await postBatch(api, account.key, { requests: [...down, ...healthy] });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const running = await waitForBatch(api, account.key, id, (b) => b.request_counts.succeeded === 5, 30_000);
    // The down provider's lines wait, untouched: pending, none charged.
    expect(running.request_counts).toMatchObject({ pending: 20, succeeded: 5 });
    await cancel(account.key, id);
    const done = await waitForBatch(api, account.key, id, undefined, 60_000);
    expect(done.request_counts).toMatchObject({ canceled: 20, succeeded: 5 });
    await db.pool.query(sql.unsafe`DELETE FROM provider_health WHERE provider = 'fal'`);
  }, 90_000);

  /** Two one-line batches of an account with credits for one line: one succeeds, one is rejected. */
  async function oneOfTwoRejected() {
    const { api, db } = stack;
    const one = (await postBatch(api, stack.account.key, { requests: lines(1) })).json();
    const account = await createPaidAccount(db.pool, { oneTime: one.credits_quoted as number });
    const ids: string[] = [];
    for (const batch of [1, 2]) {
      const created = await postBatch(api, account.key, { requests: lines(1, () => `batch ${batch}`) });
      expect(created.statusCode, created.body).toBe(201);
      ids.push(created.json().id as string);
    }
    for (const id of ids) await waitForBatch(api, account.key, id);
    return { account, ids };
  }

  it('drops the line requests of a batch that ended', async () => {
    const { ids } = await oneOfTwoRejected();
    const kept = await stack.db.pool.oneFirst(sql.type(countRow)`
      SELECT count(*)::int AS n FROM batch_lines
      WHERE batch_id = ANY(${sql.array(ids, 'text')}) AND request IS NOT NULL`);
    expect(kept).toBe(0);
  }, 60_000);

  it('keeps the error of a rejected line whose generation was pruned', async () => {
    const { api, db } = stack;
    const { account, ids } = await oneOfTwoRejected();
    // The rejected generation is pruned (its key long past, its retention 0).
    await db.pool.query(sql.unsafe`
      UPDATE idempotency_keys SET held_until = now() - interval '1 second'
      WHERE generation_id IN (SELECT id FROM generations WHERE batch_id = ANY(${sql.array(ids, 'text')}))`);
    expect(await pruneRejectedGenerations(db.pool, 0, 100)).toBe(1);
    const results = await Promise.all(
      ids.map(async (id) => {
        const response = await api.app.inject({
          method: 'GET',
          url: `/v1/batches/${id}/results`,
          headers: bearer(account.key),
        });
        return JSON.parse(response.body.trim()) as { generation: unknown; error: unknown };
      }),
    );
    // Not {generation: null, error: null}: the line says why it has no generation.
    const refused = results.find((line) => line.generation === null);
    expect(refused?.error).toMatchObject({ code: 'insufficient_credits' });
    expect(results.filter((line) => line.generation !== null)).toHaveLength(1);
  }, 60_000);

  it('counts a page of batches in one statement (GET /v1/batches)', async () => {
    const { db, account } = stack;
    const page = await listBatches(db.pool, { accountId: account.accountId, limit: 100, after: null });
    expect(page.length).toBeGreaterThan(1);
    let statements = 0;
    const counted = new Proxy(db.pool, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          statements++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const counts = await batchCountsOf(counted, page);
    expect(statements).toBe(1);
    for (const row of page) expect(counts.get(row.id)).toEqual(await batchCounts(db.pool, row));
  });

  it("runs a batch on the batches' queue at batch priority, its account the fairness key, across continue-as-new", async () => {
    const { db } = stack;
    const api = await startTestApi(db.url, {
      ...stack.worker.apiEnv,
      BATCH_HISTORY_EVENTS_PER_RUN: '20',
      BATCH_LINES_IN_FLIGHT: '1',
    });
    try {
      const account = await createPaidAccount(db.pool, { oneTime: 10_000 });
      const created = await postBatch(api, account.key, {
        requests: lines(6, (i) => `runs ${i} [sim:slow=1]`),
      });
      const id = created.json().id as string;
      await waitForBatch(api, account.key, id, undefined, 60_000);
      const workflowId = await db.pool.oneFirst(sql.type(workflowRow)`
        SELECT workflow_id FROM batches WHERE id = ${id}`);
      const runs: string[] = [];
      for await (const run of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
        runs.push(run.runId);
      expect(runs.length).toBeGreaterThan(1);
      const last = await stack.client.workflow.getHandle(workflowId).describe();
      expect(last.taskQueue).toBe(`${stack.worker.taskQueue}.batches`);
      expect(last.priority).toMatchObject({ priorityKey: 4, fairnessKey: account.accountId });
    } finally {
      await api.close();
    }
  }, 90_000);
});
