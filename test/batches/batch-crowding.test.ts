import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { batchLines, postBatch, useBatchStack } from '../support/batches.js';
import { createGeneration } from '../support/generations.js';

/**
 * Issue 45, item 2: one account's batches do not crowd out another account's generations. Many
 * open batches of slow lines (each batch's slice holds a worker slot while it waits for its line),
 * then an interactive generation of another account: its time from creation to
 * `generation.processing` stays close to the same with no batch open. `BATCH_CROWDING_BATCHES`
 * sets how many batches (150 here; more in a longer run).
 */
const batches = Number(process.env.BATCH_CROWDING_BATCHES ?? 150);
/** Interactive generations measured each time: their median is compared. */
const samples = 5;

const startRow = z.object({ ms: z.number().nullable() });
const standingRow = z.object({ open: z.number(), queued: z.number() });

describe('batches crowding', () => {
  const stack = useBatchStack({
    // The worker's default slots, and its batch lines slow: they stay in flight throughout.
    worker: { simDelayMs: 200 },
    apiEnv: {
      BATCH_OPEN_PER_ACCOUNT: String(batches),
      // The provider waits poll at a production-like pace (the lines' waits are not what is measured).
      PROVIDER_POLL_INTERVAL_MS: '2000',
    },
    pollIntervalMs: 1_000,
    account: { oneTime: 1_000_000 },
  });

  it(`${batches} open batches of one account leave another account's generation its pace`, async () => {
    const { api, db, account } = stack;
    const other = await createPaidAccount(db.pool, { oneTime: 1000 });
    await timeToProcessing(other, 'warm-up', 2);
    const idle = await timeToProcessing(other, 'idle', samples);

    // One-line batches of slow lines, a few created at once.
    const slow = batchLines(1, () => 'crowding [sim:slow=600]');
    for (let i = 0; i < batches; i += 10) {
      const created = await Promise.all(
        Array.from({ length: Math.min(10, batches - i) }, () => postBatch(api, account.key, { requests: slow })),
      );
      for (const response of created) expect(response.statusCode, response.body).toBe(201);
    }
    // Every batch running, and its lines in flight as far as the account's bound lets them.
    await expect
      .poll(
        async () => {
          const now = await db.pool.one(sql.type(standingRow)`
            SELECT (SELECT count(*)::int FROM batches WHERE account_id = ${account.accountId}
                      AND status = 'in_progress') AS open,
                   (SELECT count(*)::int FROM generations WHERE account_id = ${account.accountId}
                      AND status = 'queued') AS queued`);
          return now.open === batches && now.queued === batches;
        },
        { timeout: 60_000, interval: 500 },
      )
      .toBe(true);
    const busy = await timeToProcessing(other, 'busy', samples);

    const [idleMs, busyMs] = [median(idle), median(busy)];
    console.log(
      `created → generation.processing, median of ${samples}: ${idleMs.toFixed(0)} ms with no batch open, ` +
        `${busyMs.toFixed(0)} ms beside ${batches} open batches of another account ` +
        `(${(busyMs / idleMs).toFixed(2)}×; idle ${idle.map((ms) => ms.toFixed(0)).join(', ')}; ` +
        `busy ${busy.map((ms) => ms.toFixed(0)).join(', ')})`,
    );
    // Within 1.5× (and a few milliseconds: an idle figure near nothing is not a bar).
    expect(busyMs).toBeLessThanOrEqual(Math.max(1.5 * idleMs, idleMs + 50));
  }, 180_000);

  /** `n` generations of `owner`, one after another: each one's created → processing, ms. */
  async function timeToProcessing(owner: TestAccount, label: string, n: number): Promise<number[]> {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const response = await createGeneration(stack.api, owner.key, {
        model: 'lumen-pro',
        prompt: `${label} ${i}`,
        aspect_ratio: '1:1',
      });
      expect(response.statusCode, response.body).toBe(202);
      const id = response.json().id as string;
      let ms: number | null = null;
      await expect
        .poll(
          async () => {
            ms = await stack.db.pool.oneFirst(sql.type(startRow)`
              SELECT (extract(epoch FROM min(e.created_at) - g.created_at) * 1000)::float8 AS ms
              FROM generations g
              LEFT JOIN generation_events e ON e.generation_id = g.id AND e.type = 'generation.processing'
              WHERE g.id = ${id} GROUP BY g.id`);
            return ms;
          },
          { timeout: 60_000, interval: 50 },
        )
        .not.toBeNull();
      times.push(ms!);
    }
    return times;
  }
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
