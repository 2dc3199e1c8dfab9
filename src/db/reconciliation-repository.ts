import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { mayHaveSent } from './provider-submissions.js';

/** What the reconciliation sweep needs of a queued generation. */
const staleRow = z.object({
  id: z.string(),
  workflow_id: z.string().nullable(),
  provider_job_id: z.string().nullable(),
  submitted: z.boolean(),
  created_at: z.string(),
});
export type StaleGeneration = z.infer<typeof staleRow>;

/**
 * Queued generations nothing has touched for `graceMs` and the sweep has not looked at within it,
 * oldest first; marked as looked at now.
 */
export async function claimStaleQueued(
  db: CommonQueryMethods,
  graceMs: number,
  limit: number,
): Promise<readonly StaleGeneration[]> {
  const grace = sql.interval({ seconds: graceMs / 1000 });
  return db.any(sql.type(staleRow)`
    WITH stale AS (
      SELECT id FROM generations
      WHERE status = 'queued' AND updated_at < now() - ${grace}
        AND (reconcile_checked_at IS NULL OR reconcile_checked_at < now() - ${grace})
      ORDER BY coalesce(reconcile_checked_at, updated_at) LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE generations g SET reconcile_checked_at = now() FROM stale WHERE g.id = stale.id
    RETURNING g.id, g.workflow_id, g.provider_job_id, ${mayHaveSent} AS submitted, g.created_at`);
}

type ReconciliationAction = 'refunded' | 'flagged_for_review' | 'running_past_horizon';

const recordReconciliationRow = z.object({ id: z.number() });

/** Records what the sweep did; false when that action was recorded for the generation before. */
export async function recordReconciliation(
  db: CommonQueryMethods,
  entry: { generationId: string; action: ReconciliationAction; reason: string; workflowId: string | null },
): Promise<boolean> {
  const row = await db.maybeOne(sql.type(recordReconciliationRow)`
    INSERT INTO generation_reconciliations (generation_id, action, reason, workflow_id)
    VALUES (${entry.generationId}, ${entry.action}, ${entry.reason}, ${entry.workflowId})
    ON CONFLICT (generation_id, action) DO NOTHING RETURNING id`);
  return row !== null;
}

const reconciliationRow = z.object({
  generation_id: z.string(),
  action: z.string(),
  reason: z.string(),
  workflow_id: z.string().nullable(),
  created_at: z.string(),
});

/** The sweep's actions, newest first, for operators. */
export async function listReconciliations(db: CommonQueryMethods, limit: number) {
  return db.any(sql.type(reconciliationRow)`
    SELECT generation_id, action, reason, workflow_id, created_at FROM generation_reconciliations
    ORDER BY created_at DESC, id DESC LIMIT ${limit}`);
}

const flagQueuedForReviewRow = z.object({ model: z.string() });

/**
 * Marks a queued generation for support without changing what the client sees (its status stays
 * queued): `npm run admin -- generations --needs-review` lists it. Its workflow clears the mark
 * when it ends the generation.
 */
export async function flagQueuedForReview(
  db: CommonQueryMethods,
  generationId: string,
): Promise<string | null> {
  // The model when this call set the mark (null: set before, or the generation is no longer queued).
  return db.maybeOneFirst(sql.type(flagQueuedForReviewRow)`
    UPDATE generations SET needs_review = true WHERE id = ${generationId} AND status = 'queued' AND NOT needs_review
    RETURNING model`);
}
