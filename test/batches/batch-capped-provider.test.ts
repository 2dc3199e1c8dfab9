import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { batchLines as lines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';

const standingRow = z.object({
  pending: z.number(),
  queued: z.number(),
  holding: z.number(),
  succeeded: z.number(),
});

/**
 * On a provider with a cap, a batch keeps no more lines in flight than it can use: the places its
 * lines hold and 2 besides, though BATCH_LINES_IN_FLIGHT allows more. A line admitted beyond them
 * would only wait for a place, retrying its submit every 2 s, beside the interactive generations.
 */
describe('a batch on a capped provider', () => {
  // 8 places, half for batch lines: the batch may hold 4; in flight it could have 20.
  const stack = useBatchStack({
    worker: { simDelayMs: 1_000, overrides: { inFlightCap: () => 8, batchProviderShare: 0.5 } },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '20' },
    account: { oneTime: 100_000 },
  });

  it('keeps its places and 2 more lines in flight once its first lines hold places', async () => {
    const { api, db, account } = stack;
    const created = await postBatch(api, account.key, { requests: lines(44) });
    expect(created.statusCode, created.body).toBe(201);
    const batchId = created.json().id as string;

    // Sampled while it runs: its first round (20 lines, before any held a place) waits its turn;
    // after it, while lines are left to admit, the batch has at most its 4 places and 2 more queued.
    const afterFirstRound: Array<z.infer<typeof standingRow>> = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const now = await db.pool.one(sql.type(standingRow)`
          SELECT (SELECT count(*)::int FROM batch_lines WHERE batch_id = ${batchId} AND state = 'pending') AS pending,
                 (SELECT count(*)::int FROM generations WHERE batch_id = ${batchId} AND status = 'queued') AS queued,
                 (SELECT count(*)::int FROM generations WHERE batch_id = ${batchId} AND status = 'succeeded') AS succeeded,
                 (SELECT count(*)::int FROM provider_slots s JOIN generations g ON g.id = s.generation_id
                   WHERE s.batch_id = ${batchId} AND g.status = 'queued') AS holding`);
        if (now.succeeded >= 20 && now.pending > 0) afterFirstRound.push(now);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const done = await waitForBatch(api, account.key, batchId, undefined, 120_000);
    sampling = false;
    await sampler;

    expect(done.status).toBe('completed');
    expect(done.request_counts.succeeded).toBe(44);
    // Lines were still being admitted after the first round: the batch was held back, not flooded.
    expect(afterFirstRound.length).toBeGreaterThan(3);
    const seen = JSON.stringify(afterFirstRound);
    expect(Math.max(...afterFirstRound.map((s) => s.holding)), seen).toBeLessThanOrEqual(4);
    expect(Math.max(...afterFirstRound.map((s) => s.queued)), seen).toBeLessThanOrEqual(6);
  }, 150_000);
});
