import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { toGeneration } from '../../src/api/generation-view.js';
import { eventsAfter } from '../../src/db/events-after.js';
import { generationEventRow, generationEventsAfter } from '../../src/db/generation-events.js';
import { expireGeneration } from '../../src/db/generation-results.js';
import { markNeedsReview, resumeWithProviderJob } from '../../src/db/provider-submissions.js';
import { pruneRejectedGenerations } from '../../src/db/pruning-repository.js';
import { bearer } from '../support/api.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

describe('the event log of a generation (migration 0016)', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 20 }, account: { oneTime: 1000 } });
  const typesOf = async (id: string) =>
    (await generationEventsAfter(stack.db.pool, id, 0)).map((e) => `${e.seq} ${e.type}`);
  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode).toBe(202);
    return String(response.headers['x-request-id']);
  };

  it('a success: created, processing (the provider has the job), succeeded; each with the resource as it was', async () => {
    const id = await create('a lighthouse');
    const done = await pollGeneration(stack.api, stack.account.key, id);
    expect(done.status).toBe('succeeded');
    expect(await typesOf(id)).toEqual([
      '1 generation.created',
      '2 generation.processing',
      '3 generation.succeeded',
    ]);
    const events = await generationEventsAfter(stack.db.pool, id, 0);
    expect(toGeneration(events[0]!.generation)).toMatchObject({
      status: 'queued',
      output: null,
      completed_at: null,
    });
    // The last event's resource is what GET shows now, field for field.
    expect(toGeneration(events[2]!.generation)).toEqual(
      await getGeneration(stack.api, stack.account.key, id),
    );
    expect(Date.parse(events[2]!.created_at)).toBeGreaterThanOrEqual(Date.parse(events[0]!.created_at));
    expect((await generationEventsAfter(stack.db.pool, id, 2)).map((e) => e.seq)).toEqual([3]);

    // The read every event log shares (a batch's too): after a number, at most `limit`, the newest as well.
    const seqs = async (after: number, options: { limit?: number; withNewest?: boolean }) =>
      (await eventsAfter(stack.db.pool, 'generation', id, after, generationEventRow, options)).map(
        (e) => e.seq,
      );
    expect(await seqs(0, { limit: 1 })).toEqual([1]);
    expect(await seqs(0, { limit: 1, withNewest: true })).toEqual([1, 3]);
    expect(await seqs(1, {})).toEqual([2, 3]);
    expect(await seqs(3, { withNewest: true })).toEqual([3]);
    expect(await seqs(3, {})).toEqual([]);
  });

  it('a failure: refunded and failed in one change', async () => {
    const id = await create('broken [sim:fail]');
    await pollGeneration(stack.api, stack.account.key, id);
    expect(await typesOf(id)).toEqual([
      '1 generation.created',
      '2 generation.processing',
      '3 generation.failed',
    ]);
    const events = await generationEventsAfter(stack.db.pool, id, 0);
    expect(toGeneration(events[2]!.generation)).toMatchObject({ status: 'failed', credits_refunded: true });
  });

  it('a request refused at once has one event, generation.rejected', async () => {
    const invalid = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt: '' });
    expect(invalid.statusCode).toBe(400);
    expect(await typesOf(String(invalid.headers['x-request-id']))).toEqual(['1 generation.rejected']);
  });

  it('review, support resuming, expiry: failed, requeued, content_expired (and the content leaves the log)', async () => {
    const id = await create('slow [sim:slow=60]');
    await waitFor(async () => (await typesOf(id)).length >= 2, 20_000);
    // What the reconciliation does to an uncertain submission, then support's resolution, then expiry.
    await markNeedsReview(stack.db.pool, id, { code: 'submission_unresolved', message: 'in review' });
    await markNeedsReview(stack.db.pool, id, { code: 'submission_unresolved', message: 'in review' });
    await stack.db.pool.query(sql.unsafe`UPDATE generations SET provider_job_id = NULL WHERE id = ${id}`);
    await resumeWithProviderJob(stack.db.pool, id, 'job-from-support');
    await expireGeneration(stack.db.pool, id);
    expect(await typesOf(id)).toEqual([
      '1 generation.created',
      '2 generation.processing',
      '3 generation.failed',
      '4 generation.requeued',
      '5 generation.content_expired',
    ]);
    // Expiry removed the content from the past events too.
    for (const event of await generationEventsAfter(stack.db.pool, id, 0)) {
      expect(event.generation.input).toBeNull();
      expect(event.generation.output).toBeNull();
    }
  });

  it('bookkeeping changes write nothing; a rolled-back change writes no event', async () => {
    const id = await create('slow [sim:slow=60]');
    await waitFor(async () => (await typesOf(id)).length >= 2, 20_000);
    await stack.db.pool.query(
      sql.unsafe`UPDATE generations SET reconcile_checked_at = now(), updated_at = now() WHERE id = ${id}`,
    );
    await expect(
      stack.db.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`UPDATE generations SET status = 'failed' WHERE id = ${id}`);
        expect((await generationEventsAfter(tx, id, 0)).map((e) => e.type)).toContain('generation.failed');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await typesOf(id)).toEqual(['1 generation.created', '2 generation.processing']);
    // And no change without its event: the log's last resource is the row.
    const last = (await generationEventsAfter(stack.db.pool, id, 0)).at(-1)!;
    expect(toGeneration(last.generation)).toEqual(
      (
        await stack.api.app.inject({ url: `/v1/generations/${id}`, headers: bearer(stack.account.key) })
      ).json(),
    );
  });

  it('pruning a rejected generation takes its events with it', async () => {
    const invalid = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt: '' });
    const id = String(invalid.headers['x-request-id']);
    await stack.db.pool.query(
      sql.unsafe`UPDATE generations SET created_at = now() - interval '400 days' WHERE id = ${id}`,
    );
    expect(await pruneRejectedGenerations(stack.db.pool, 86_400_000, 1000)).toBeGreaterThanOrEqual(1);
    const left = await stack.db.pool.oneFirst(
      sql.type(
        z.object({ n: z.number() }),
      )`SELECT count(*)::int AS n FROM generation_events WHERE generation_id = ${id}`,
    );
    expect(left).toBe(0);
  });
});
