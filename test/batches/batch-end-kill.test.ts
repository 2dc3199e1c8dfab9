import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi } from '../support/api.js';
import { batchLedger } from '../support/batch-lines.js';
import { balanceOf, batchLines, postBatch, waitForBatch } from '../support/batches.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { seededRandom } from '../support/seeded-random.js';
import { workerProcesses } from '../support/worker-process.js';
import { workerRotation } from '../support/worker-rotation.js';

/**
 * Issue 45 §3 under faults (`npm run test:faults`; skipped unless BATCH_END_KILL_RUNS is set: the
 * fast representative is batch-late-admission.test.ts, which makes admissions late on purpose).
 * Real worker processes, SIGKILLed every ~2 s, admit batch lines with a short ADMISSION_TIMEOUT_MS
 * (so answers often come after the slice gave up on them); each run has one batch canceled 1 s in
 * and one whose 30 s window ends with lines pending. Then: every results line that says it never
 * started (`batch_canceled`, `batch_expired`) has no generation under its Idempotency-Key, every
 * generation is on its line, and the account was charged exactly what the lines' generations show.
 */
const runs = Number(process.env.BATCH_END_KILL_RUNS ?? 0);
const lineCount = Number(process.env.BATCH_END_KILL_LINES ?? 200);
const windowSeconds = Number(process.env.BATCH_END_KILL_WINDOW_S ?? 30);
const initialCredits = 1_000_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(runs === 0)('batches canceled or expiring while their workers are SIGKILLed', () => {
  const taskQueue = `batch-end-kill-${randomBase62(8)}`;
  const storageDir = `/tmp/batch-end-kill-${taskQueue}`;
  const env = () => ({
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '250',
    PROVIDER_DOWN_AFTER_FAILURES: '100000',
    SIM_PROVIDER_DELAY_MS: '3000',
    BATCH_LINES_IN_FLIGHT: '20',
    BATCH_POLL_INTERVAL_MS: '100',
    BATCH_SLICE_MS: '1000',
    BATCH_HISTORY_EVENTS_PER_RUN: '20',
    // The worker's batch admission gives up on a line this soon: many answers come after it.
    ADMISSION_TIMEOUT_MS: '400',
    SUBMIT_CLAIM_WINDOW_MS: process.env.SUBMIT_CLAIM_WINDOW_MS ?? '25000',
  });
  const workers = workerProcesses(() => ({ ...env(), DATABASE_URL: db.url, LOG_LEVEL: 'warn' }));
  const rotation = workerRotation(workers);
  let db: TestDatabase;
  let api: ApiService;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, env());
    await Promise.all([rotation.start(), rotation.start()]);
  }, 120_000);
  afterAll(async () => {
    workers.killAll();
    await api?.close();
    await db?.drop();
    await rm(storageDir, { recursive: true, force: true });
  });

  it(
    `${runs} run(s) of ${lineCount} lines, a cancel 1 s in and a ${windowSeconds} s window, under kills`,
    async () => {
      const next = seededRandom(45_003);
      let uncharged = 0;
      let linked = 0;
      for (let run = 0; run < runs; run++) {
        const account = await createPaidAccount(db.pool, { oneTime: initialCredits });
        const requests = batchLines(lineCount, (i) => `run ${run} line ${i}`);
        const canceled = (await postBatch(api, account.key, { requests })).json();
        const windowed = (
          await postBatch(api, account.key, { requests, completion_window: `${windowSeconds}s` })
        ).json();
        let ended = false;
        const killing = (async () => {
          while (!ended) {
            await sleep(2_000 * (0.5 + next()));
            if (!ended) await rotation.replaceOldest();
          }
        })();
        await sleep(1_000);
        const cancel = await api.app.inject({
          method: 'POST',
          url: `/v1/batches/${canceled.id}/cancel`,
          headers: bearer(account.key),
        });
        expect(cancel.statusCode, cancel.body).toBe(200);
        const ends = await Promise.all(
          [canceled.id, windowed.id].map((id: string) =>
            waitForBatch(api, account.key, id, undefined, 240_000),
          ),
        ).finally(() => (ended = true));
        await killing;
        expect(ends[0]!.status).toBe('canceled');
        let charged = 0;
        for (const batch of [canceled, windowed]) {
          const ledger = await batchLedger(api, db.pool, account, batch.id);
          expect(ledger.neverStartedWithGeneration, batch.id).toEqual([]);
          expect(ledger.started.length + ledger.neverStarted.length, batch.id).toBe(lineCount);
          charged += ledger.linesCharged;
          uncharged += ledger.neverStarted.length;
          linked += ledger.started.length;
        }
        // Generations of the account that no line of either batch names.
        const named = await Promise.all(
          [canceled, windowed].map((b) => batchLedger(api, db.pool, account, b.id)),
        );
        const unlinked = named[0]!.unlinkedGenerations.filter((id) =>
          named[1]!.unlinkedGenerations.includes(id),
        );
        expect(unlinked).toEqual([]);
        expect(initialCredits - (await balanceOf(db.pool, account.accountId))).toBe(charged);
      }
      console.info(
        `batch ends under kills: ${runs} run(s), ${linked} lines with a generation, ${uncharged} ended without one`,
      );
    },
    Math.max(300_000, runs * (windowSeconds * 1_000 + 120_000)),
  );
});
