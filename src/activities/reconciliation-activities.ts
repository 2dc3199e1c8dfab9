import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { refundGeneration } from '../db/credits-repository.js';
import { markNeedsReview } from '../db/provider-submissions.js';
import {
  claimStaleQueued,
  flagQueuedForReview,
  recordReconciliation,
  type StaleGeneration,
} from '../db/reconciliation-repository.js';
import { generationErrors } from '../workflows/generation-errors.js';
import { progressQuery } from '../workflows/generation-messages.js';
import type {
  ReconciliationActivities,
  ReconciliationOptions,
  ReconciliationReport,
} from '../workflows/contracts/reconciliation.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { ActivityDeps } from './activity-deps.js';

/**
 * The sweep behind the reconciliation schedule: a generation must not keep its debit silently
 * because its workflow was terminated or failed from outside. Each queued generation untouched
 * for the grace period is looked up in Temporal; one without a running workflow of its own is
 * refunded through the normal refund path when nothing reached the provider, or flagged for
 * review when the provider may have run the job. A generation whose workflow still runs past
 * every step's horizon is reported once and marked for support (its status stays queued); one whose
 * workflow waits for review while its record says queued is put back in review.
 */
export function createReconciliationActivities(
  deps: Pick<ActivityDeps, 'db' | 'temporal' | 'metrics'>,
): ReconciliationActivities {
  const metrics = deps.metrics ?? noGenerationMetrics;
  return {
    async reconcileGenerations(options: ReconciliationOptions): Promise<ReconciliationReport> {
      const { log } = Context.current();
      const client = await deps.temporal();
      const report: ReconciliationReport = {
        examined: 0,
        refunded: [],
        flaggedForReview: [],
        runningPastHorizon: [],
        undecided: [],
      };
      for (const row of await claimStaleQueued(deps.db, options.graceMs, options.limit)) {
        report.examined++;
        Context.current().heartbeat(row.id);
        const owner = await workflowOf(client, row);
        if (owner === 'unknown') {
          report.undecided.push(row.id);
          continue;
        }
        if (owner === 'waiting_for_review') {
          // Its workflow waits for support while the record says queued (a late answer to an
          // abandoned create once cleared the mark): the record is put back in support's sight.
          const model = await markNeedsReview(deps.db, row.id, generationErrors.submissionUnresolved);
          if (model !== null) metrics.sentToReview(model);
          await record(row, 'flagged_for_review', 'queued while its workflow waits for review');
          log.warn('queued generation whose workflow waits for review flagged', { generationId: row.id });
          report.flaggedForReview.push(row.id);
          continue;
        }
        if (owner === 'running') {
          const overdue = Date.now() - Date.parse(row.created_at) > options.overdueMs;
          const reason = 'queued past every step horizon while its workflow still runs';
          if (overdue && (await record(row, 'running_past_horizon', reason))) {
            const model = await flagQueuedForReview(deps.db, row.id);
            if (model !== null) metrics.sentToReview(model);
            log.warn('generation running past its horizon', {
              generationId: row.id,
              workflowId: row.workflow_id,
            });
            report.runningPastHorizon.push(row.id);
          }
          continue;
        }
        if (row.provider_job_id !== null || row.submitted) {
          const model = await markNeedsReview(deps.db, row.id, generationErrors.interruptedNeedsReview);
          if (model !== null) metrics.sentToReview(model);
          await record(row, 'flagged_for_review', 'no running workflow; the provider may have run the job');
          log.warn('generation without a workflow flagged for review', { generationId: row.id });
          report.flaggedForReview.push(row.id);
        } else {
          const refunded = await refundGeneration(deps.db, row.id, generationErrors.interrupted);
          if (refunded.changed)
            metrics.failed(refunded.model, generationErrors.interrupted.code, refunded.refundedCredits);
          await record(row, 'refunded', 'no running workflow; nothing reached the provider');
          log.warn('generation without a workflow refunded', { generationId: row.id });
          report.refunded.push(row.id);
        }
      }
      return report;
    },
  };

  function record(
    row: StaleGeneration,
    action: Parameters<typeof recordReconciliation>[1]['action'],
    reason: string,
  ) {
    return recordReconciliation(deps.db, {
      generationId: row.id,
      action,
      reason,
      workflowId: row.workflow_id,
    });
  }
}

/**
 * Whether the generation's own workflow runs (and whether it waits for support's review): its
 * workflow id may run another generation now (a retry with the same key after this one's run
 * ended), so the running workflow is asked which generation it is. `unknown` when Temporal does
 * not answer: the next sweep asks again.
 */
async function workflowOf(
  client: Client,
  row: StaleGeneration,
): Promise<'running' | 'waiting_for_review' | 'gone' | 'unknown'> {
  if (!row.workflow_id) return 'gone';
  const handle = client.workflow.getHandle(row.workflow_id);
  try {
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') return 'gone';
    const progress = await client.connection.withDeadline(Date.now() + 10_000, () =>
      handle.query(progressQuery),
    );
    if (progress.generationId !== row.id) return 'gone';
    return progress.step === 'needs_review' ? 'waiting_for_review' : 'running';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return 'gone';
    return 'unknown';
  }
}
