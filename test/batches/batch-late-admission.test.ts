import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { setApiAccess } from '../../src/db/accounts-repository.js';
import { revokeApiKey } from '../../src/db/api-keys-repository.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { bearer, createPaidAccount, type TestAccount } from '../support/api.js';
import { balanceOf, batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { createGeneration } from '../support/generations.js';
import { batchLedger, readBatchFromDb, type LedgerOfLines } from '../support/batch-lines.js';

/** Prompts that mark how late their line's admission decides (see lateAdmissions). */
const late = { soon: '[admit:600]', later: '[admit:2500]' };

/**
 * The worker's pool, with each admit_generation() call of a line marked `[admit:MS]` in its prompt
 * held that long before it reaches PostgreSQL: the line's admission decides after the batch's slice
 * gave up waiting for it (ADMISSION_TIMEOUT_MS, 300 ms here), as a busy task queue or a slow
 * database makes it do, so the line is still `pending` when its generation is admitted and debited.
 */
function lateAdmissions(pool: DatabasePool): DatabasePool {
  return new Proxy(pool, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (name !== 'oneFirst' || typeof value !== 'function') return value;
      return async (query: { sql: string; values: readonly unknown[] }) => {
        const ms = query.sql.includes('admit_generation(')
          ? /\[admit:(\d+)\]/.exec(JSON.stringify(query.values))?.[1]
          : undefined;
        if (ms) await delay(Number(ms));
        return (value as (q: unknown) => Promise<unknown>).call(target, query);
      };
    },
  });
}

/**
 * Issue 45 §3: a line charged is never reported as "never started, nothing charged". Its
 * admission may answer the slice too late (the line stays pending while its generation is debited),
 * and the batch may end meanwhile: the database links that generation to the line as it ends the
 * pending ones, and refuses every admission after the end. And §5: revoking the batch's key, or
 * disabling its account's API access, cancels it.
 */
describe('batch lines whose admission outlasts the slice, and batches that lose their access', () => {
  const stack = useBatchStack({
    worker: { simDelayMs: 10 },
    workerPool: lateAdmissions,
    apiEnv: { BATCH_LINES_IN_FLIGHT: '8', ADMISSION_TIMEOUT_MS: '300' },
  });

  /** Four lines admitted 0.6 s late (running 3 s at the provider), four 2.5 s late. */
  const requests = () => [
    ...batchLines(4, (i) => `line ${i} ${late.soon} [sim:slow=3]`),
    ...batchLines(8, (i) => `line ${i} ${late.later}`).slice(4),
  ];

  /** The batch's lines' generations admitted while their lines are pending (the late answers). */
  const admittedWhilePending = (batchId: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ n: z.coerce.number() }))`
      SELECT count(*) AS n FROM generations g JOIN batch_lines l
        ON l.batch_id = g.batch_id AND l.custom_id = g.custom_id
      WHERE g.batch_id = ${batchId} AND l.state = 'pending'`);

  /**
   * What a client reads and what was charged: every results line that says it never started has no
   * generation under its key, every generation of the batch is on its line, and the account was
   * charged what the lines' generations show.
   */
  async function expectLinesAsCharged(account: TestAccount, batchId: string, start: number) {
    const ledger: LedgerOfLines = await batchLedger(stack.api, stack.db.pool, account, batchId);
    expect(ledger.unlinkedGenerations).toEqual([]);
    expect(ledger.neverStartedWithGeneration).toEqual([]);
    expect(start - (await balanceOf(stack.db.pool, account.accountId))).toBe(ledger.linesCharged);
    return ledger;
  }

  it('a cancel while admissions answer late: those decided first are linked and charged, later ones refused, none reported uncharged', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000 });
    const created = await postBatch(stack.api, account.key, { requests: requests() });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    // The first four are admitted (debited) while their lines are still pending; then the cancel,
    // before the last four's admissions reach the database.
    await expect.poll(() => admittedWhilePending(batch.id), { timeout: 10_000, interval: 50 }).toBe(4);
    const canceled = await stack.api.app.inject({
      method: 'POST',
      url: `/v1/batches/${batch.id}/cancel`,
      headers: bearer(account.key),
    });
    expect(canceled.json().status).toBe('canceling');
    const done = await waitForBatch(stack.api, account.key, batch.id, undefined, 30_000);
    expect(done.status).toBe('canceled');
    const ledger = await expectLinesAsCharged(account, batch.id, 1_000);
    // The four admitted before the cancel are theirs (running at the provider, so charged); the
    // four admitted after it were refused by the database and never charged.
    expect(ledger.started).toEqual(['line-0', 'line-1', 'line-2', 'line-3']);
    expect(ledger.neverStarted).toEqual(['line-4', 'line-5', 'line-6', 'line-7']);
    expect(done.request_counts).toMatchObject({ total: 8, pending: 0, queued: 0, canceled: 4 });
    expect(ledger.linesCharged).toBeGreaterThan(0);
  }, 60_000);

  it('the completion window passes while admissions answer late: none reported expired and charged', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000 });
    const created = await postBatch(stack.api, account.key, {
      requests: requests(),
      completion_window: '2s',
    });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    const done = await waitForBatch(stack.api, account.key, batch.id, undefined, 30_000);
    expect(done.status).toBe('expired');
    const ledger = await expectLinesAsCharged(account, batch.id, 1_000);
    expect(ledger.started).toEqual(['line-0', 'line-1', 'line-2', 'line-3']);
    expect(ledger.neverStarted).toEqual(['line-4', 'line-5', 'line-6', 'line-7']);
    expect(done.request_counts).toMatchObject({ total: 8, pending: 0, queued: 0, expired: 4 });
  }, 60_000);

  /** A batch of slow lines, two at a time, once its first two are running. */
  async function runningBatch(account: TestAccount) {
    const created = await postBatch(stack.api, account.key, {
      requests: batchLines(10, (i) => `kept line ${i} [sim:slow=2]`),
    });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    await expect
      .poll(async () => (await readBatchFromDb(stack.db.pool, batch.id)).counts.queued, { timeout: 10_000 })
      .toBeGreaterThan(0);
    return batch.id as string;
  }

  for (const [lost, take] of [
    ['revoking the key that created it', (a: TestAccount) => revokeApiKey(stack.db.pool, a.keyId)],
    [
      'disabling its account’s API access',
      (a: TestAccount) => setApiAccess(stack.db.pool, a.accountId, false),
    ],
  ] as const)
    it(`${lost} cancels the batch: its lines not started end canceled, never charged`, async () => {
      const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000 });
      const batchId = await runningBatch(account);
      await take(account);
      let read = await readBatchFromDb(stack.db.pool, batchId);
      expect(read.row.status).toBe('canceling');
      await expect
        .poll(async () => (read = await readBatchFromDb(stack.db.pool, batchId)).row.status, {
          timeout: 30_000,
          interval: 200,
        })
        .toBe('canceled');
      expect(read.counts.canceled).toBeGreaterThan(0);
      expect(read.counts.pending + read.counts.queued).toBe(0);
      const ledger = await batchLedger(null, stack.db.pool, account, batchId);
      expect(ledger.unlinkedGenerations).toEqual([]);
      expect(ledger.neverStartedWithGeneration).toEqual([]);
      expect(ledger.neverStarted.length).toBe(read.counts.canceled);
      expect(1_000 - (await balanceOf(stack.db.pool, account.accountId))).toBe(ledger.linesCharged);
    }, 60_000);
  it("a client's own Idempotency-Key batch_…:N is refused (400): the lines' keys are reserved", async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000 });
    const created = await postBatch(stack.api, account.key, {
      requests: batchLines(3, (i) => `own line ${i}`),
    });
    const batch = created.json();
    // Sent before the batch reaches line 2, it would have been line 2's generation (or its conflict).
    const taken = await createGeneration(
      stack.api,
      account.key,
      { model: 'lumen-pro', prompt: 'not a line', aspect_ratio: '1:1' },
      `${batch.id as string}:2`,
    );
    expect(taken.statusCode, taken.body).toBe(400);
    expect(taken.json().issues).toEqual([
      expect.objectContaining({ field: 'Idempotency-Key', code: 'reserved' }),
    ]);
    const done = await waitForBatch(stack.api, account.key, batch.id, undefined, 30_000);
    expect(done.request_counts).toMatchObject({ total: 3, succeeded: 3 });
    // Each line has its own generation; the refused request is recorded apart (rejected, no line's).
    const ledger = await batchLedger(stack.api, stack.db.pool, account, batch.id);
    expect(ledger.started).toEqual(['line-0', 'line-1', 'line-2']);
    expect(ledger.unlinkedGenerations).toEqual([taken.headers['x-request-id']]);
    expect(1_000 - (await balanceOf(stack.db.pool, account.accountId))).toBe(ledger.linesCharged);
  }, 60_000);
});
