import { rm } from 'node:fs/promises';
import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { balanceOf, batchLines, postBatch, waitForBatch } from '../support/batches.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { creditsAndLedger } from '../support/fault-run.js';
import { seededRandom } from '../support/seeded-random.js';
import { workerProcesses } from '../support/worker-process.js';
import { workerRotation } from '../support/worker-rotation.js';

/**
 * Issue 38 §4: a batch survives its workers being SIGKILLed every few seconds. Real worker
 * processes run the batch's workflow, its slices (which admit the lines) and the lines'
 * generations; the oldest is killed every ~4 s (plus the time its replacement takes to start) until
 * the batch ends. Its workflow continues as new every couple of slices
 * (BATCH_HISTORY_EVENTS_PER_RUN), so kills also land around a run's hand-over. Then: the batch is
 * completed, every line has exactly one generation (the one its line names), each was submitted to
 * the simulated provider once, each has one debit and a refund only if it failed, the balance is
 * the start less what they spent, and the batch's counts are its generations'.
 *
 * `npm test` runs 40 lines (every tenth fails at the simulator, so refunds are in the ledger too),
 * 10 at a time and 2 s each at the simulator, a kill every ~2.5 s (three at most), so that the batch
 * lasts several kills however quiet the machine: about 30 s, or 30 s more when a kill lands in a
 * generation's persist step (its heartbeat timeout). `npm run test:faults` runs the 2,000
 * (BATCH_KILL_LINES), killing until the batch ends.
 */
const lineCount = Number(process.env.BATCH_KILL_LINES ?? 40);
const killEveryMs = Number(process.env.BATCH_KILL_EVERY_MS ?? (lineCount <= 100 ? 2_500 : 4_000));
/** Lines queued at once: a generation whose worker died while it stored its result waits out its step's heartbeat timeout (30 s), holding its place meanwhile. */
const linesInFlight = Math.min(100, Math.max(10, Math.round(lineCount / 20)));
/** How long the simulator takes per job: long enough in the small run for the batch to outlast kills. */
const simDelayMs = lineCount <= 100 ? 2_000 : 300;
/** The small run stops killing after three (each can hold the batch up for a heartbeat timeout). */
const maxKills = lineCount <= 100 ? 3 : Infinity;
const initialCredits = 1_000_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const perLineRow = z.object({
  custom_id: z.string(),
  generations: z.coerce.number(),
  statuses: z.array(z.string()),
  needs_review: z.boolean(),
  debits: z.coerce.number(),
  refunds: z.coerce.number(),
  net: z.coerce.number(),
  submissions: z.coerce.number(),
  line_state: z.string(),
  line_generation_matches: z.boolean(),
});

describe('a batch whose workers are SIGKILLed every few seconds', () => {
  const taskQueue = `batch-kill-${randomBase62(8)}`;
  const storageDir = `/tmp/batch-kill-${taskQueue}`;
  const env = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '250',
    PROVIDER_DOWN_AFTER_FAILURES: '100000',
    SIM_PROVIDER_DELAY_MS: String(simDelayMs),
    BATCH_LINES_IN_FLIGHT: String(linesInFlight),
    BATCH_POLL_INTERVAL_MS: '100',
    BATCH_SLICE_MS: '1000',
    BATCH_HISTORY_EVENTS_PER_RUN: '20',
    // The shortest claim window allowed, as the other kill tests (`npm run test:faults` sets production's).
    SUBMIT_CLAIM_WINDOW_MS: process.env.SUBMIT_CLAIM_WINDOW_MS ?? '25000',
  });
  const workers = workerProcesses(() => ({
    ...env(),
    DATABASE_URL: db.url,
    LOG_LEVEL: 'warn',
  }));
  const rotation = workerRotation(workers);
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let connection: Connection;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, env());
    account = await createPaidAccount(db.pool, { oneTime: initialCredits });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    await Promise.all([rotation.start(), rotation.start()]);
  }, 120_000);
  afterAll(async () => {
    workers.killAll();
    await connection?.close();
    await api?.close();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  it(
    `runs ${lineCount} lines to one generation each and an exact ledger`,
    async () => {
      const started = Date.now();
      const requests = batchLines(lineCount, (i) =>
        i % 10 === 9 ? `killed batch line ${i} [sim:fail]` : `killed batch line ${i}`,
      );
      const created = await postBatch(api, account.key, { requests }, `kill-${taskQueue}`);
      expect(created.statusCode, created.body).toBe(201);
      const batch = created.json();

      // The oldest worker SIGKILLed every ~killEveryMs and a new one started, until the batch ends.
      let ended = false;
      let kills = 0;
      const next = seededRandom(38_004);
      const killing = (async () => {
        for (;;) {
          await sleep(killEveryMs * (0.7 + 0.6 * next()));
          if (ended || kills >= maxKills) return;
          await rotation.replaceOldest();
          kills++;
        }
      })();
      const done = await waitForBatch(
        api,
        account.key,
        batch.id,
        undefined,
        Math.max(240_000, lineCount * 1_200),
      ).finally(() => (ended = true));
      await killing;
      const elapsedMs = Date.now() - started;

      expect(done.status).toBe('completed');
      const failing = requests.filter((r) => r.prompt.includes('[sim:fail]')).length;
      expect(done.request_counts).toMatchObject({
        total: lineCount,
        pending: 0,
        queued: 0,
        succeeded: lineCount - failing,
        failed: failing,
        rejected: 0,
        refused: 0,
        canceled: 0,
        expired: 0,
      });

      // Per line (custom_id): its generations, their ledger rows, the simulator's submissions.
      const rows = await db.pool.any(sql.type(perLineRow)`
        SELECT l.custom_id,
               count(g.id) AS generations,
               coalesce(array_agg(g.status) FILTER (WHERE g.id IS NOT NULL), '{}') AS statuses,
               coalesce(bool_or(g.needs_review), false) AS needs_review,
               coalesce(sum((SELECT count(*) FROM credit_ledger c WHERE c.generation_id = g.id AND c.kind = 'debit')), 0) AS debits,
               coalesce(sum((SELECT count(*) FROM credit_ledger c WHERE c.generation_id = g.id AND c.kind = 'refund')), 0) AS refunds,
               coalesce(sum((SELECT sum(c.subscription_delta + c.one_time_delta) FROM credit_ledger c
                             WHERE c.generation_id = g.id)), 0) AS net,
               coalesce(sum((SELECT sum(s.submissions) FROM sim_provider_jobs s WHERE s.token = 'tok_' || g.id)), 0)
                 AS submissions,
               l.state AS line_state,
               coalesce(bool_and(l.generation_id = g.id), false) AS line_generation_matches
        FROM batch_lines l
        LEFT JOIN generations g ON g.batch_id = l.batch_id AND g.custom_id = l.custom_id
        WHERE l.batch_id = ${batch.id}
        GROUP BY l.custom_id, l.line, l.state ORDER BY l.line`);
      expect(rows).toHaveLength(lineCount);
      const failed = new Set(requests.filter((r) => r.prompt.includes('[sim:fail]')).map((r) => r.custom_id));
      let spent = 0;
      for (const row of rows) {
        const outcome = failed.has(row.custom_id) ? 'failed' : 'succeeded';
        expect(row, row.custom_id).toMatchObject({
          generations: 1,
          statuses: [outcome],
          needs_review: false,
          debits: 1,
          refunds: outcome === 'failed' ? 1 : 0,
          submissions: 1,
          line_state: 'started',
          line_generation_matches: true,
        });
        spent -= row.net;
      }
      // No generation of this account outside the batch's lines.
      const strays = await db.pool.oneFirst(sql.type(z.object({ n: z.coerce.number() }))`
        SELECT count(*) AS n FROM generations WHERE account_id = ${account.accountId}
          AND (batch_id IS DISTINCT FROM ${batch.id} OR custom_id IS NULL)`);
      expect(strays).toBe(0);
      expect(spent).toBe(batch.credits_quoted - (batch.credits_quoted / lineCount) * failing);
      expect(done.credits_spent).toBe(spent);
      expect(await balanceOf(db.pool, account.accountId)).toBe(initialCredits - spent);
      expect(await creditsAndLedger(api, db, account)).toEqual({
        credits: initialCredits - spent,
        ledger: initialCredits - spent,
      });

      // The workflow continued as new (each run's hand-over also under kills): its runs, newest first.
      const workflowId = await db.pool.oneFirst(sql.type(z.object({ workflow_id: z.string() }))`
        SELECT workflow_id FROM batches WHERE id = ${batch.id}`);
      const client = new Client({ connection });
      let runs = 0;
      for (let runId: string | undefined; ; runs++) {
        const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
        const from = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
        if (!from) break;
        runId = from;
      }
      runs++;
      expect(runs).toBeGreaterThan(1);
      // The batch outlasted more than one kill: the property above held across them.
      expect(kills).toBeGreaterThanOrEqual(2);

      console.info(
        `batch worker kill: ${lineCount} lines in ${(elapsedMs / 1000).toFixed(1)} s, ${kills} workers killed, ` +
          `${runs} workflow runs`,
      );
    },
    Math.max(300_000, lineCount * 1_500),
  );
});
