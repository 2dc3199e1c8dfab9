import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { batchCounts, getBatch, type BatchCounts, type BatchRow } from '../db/batches.js';
import { NotFound } from '../db/accounts-repository.js';
import { cancelBatch } from '../generations/batches/batch-cancel.js';
import { str, type Command } from './command.js';

/**
 * Support's batch commands (issue 45 §4): look at one batch (its row, counts and workflow, with the
 * build it runs on), and cancel it as its owner would. A batch's workflow follows the deployment's
 * current build (Auto-Upgrade); one started Pinned (by a build from before that, or pinned by an
 * operator) stays on its build, and waits for good once that build's workers are gone: the cancel
 * moves it to the current build (a versioning override), which carries the cancel out.
 */
export const batchCommands: Record<string, Command> = {
  batch: {
    summary:
      'Show one batch: status, line counts, credits, times, and its workflow (running or not, its versioning behaviour and build).',
    usage: '--id BATCH_ID',
    options: { id: { type: 'string', required: true } },
    async run({ db, temporal }, v) {
      const row = await findBatch(db, str(v.id));
      const counts = await batchCounts(db, row);
      const workflow = await describeWorkflow(await temporal(), row);
      return {
        json: { batch: row, request_counts: counts, workflow },
        text: describeBatch(row, counts, workflow),
      };
    },
  },
  'cancel-batch': {
    summary:
      "Cancel a batch as its owner's POST /v1/batches/{id}/cancel does (lines not started end canceled, never charged; running lines are asked to stop); a workflow Pinned to a build moves to the current one to carry it out.",
    usage: '--id BATCH_ID',
    options: { id: { type: 'string', required: true } },
    async run(context, v) {
      const row = await findBatch(context.db, str(v.id));
      const client = await context.temporal();
      const canceled = await cancelBatch(
        { db: context.db, temporal: client, taskQueue: context.taskQueue ?? 'generations' },
        row,
      );
      let workflow = await describeWorkflow(client, canceled);
      const moved = workflow.running && workflow.pinned;
      if (moved) {
        await followCurrentBuild(client, canceled.workflow_id);
        workflow = await describeWorkflow(client, canceled);
      }
      const counts = await batchCounts(context.db, canceled);
      return {
        json: { batch: canceled, request_counts: counts, workflow, moved_to_current_build: moved },
        text: [
          canceled.status === 'canceling'
            ? `Canceling ${row.id}: its lines not started end canceled (never charged), its running lines are asked to stop.`
            : `${row.id} has ended (${canceled.status}): nothing changed.`,
          ...(moved ? [`Its workflow was Pinned to a build; it now follows the current build.`] : []),
          ...describeBatch(canceled, counts, workflow),
        ],
      };
    },
  },
};

async function findBatch(db: Parameters<typeof getBatch>[0], id: string): Promise<BatchRow> {
  const row = await getBatch(db, null, id);
  if (!row) throw new NotFound(`No batch ${id}.`);
  return row;
}

/** Where a batch's workflow stands in Temporal. */
interface BatchWorkflowView {
  workflowId: string;
  /** Never started (its create's start failed and no retry or cancel came), or found. */
  found: boolean;
  running: boolean;
  status: string | null;
  runId: string | null;
  historyLength: number | null;
  /** How its tasks are routed: `auto_upgrade` (the current build), `pinned` (its build), or unknown. */
  behavior: 'auto_upgrade' | 'pinned' | 'unspecified' | null;
  /** The build its last task ran on. */
  buildId: string | null;
  /** A versioning override an operator set, if any. */
  override: 'auto_upgrade' | 'pinned' | null;
  /** Whether it stays on its build (Pinned, or pinned by an override) rather than following the current one. */
  pinned: boolean;
}

async function describeWorkflow(client: Client, row: BatchRow): Promise<BatchWorkflowView> {
  const workflowId = row.workflow_id;
  try {
    const described = await client.workflow.getHandle(workflowId).describe();
    const info = described.raw.workflowExecutionInfo?.versioningInfo;
    const override = info?.versioningOverride;
    const overridden = !override
      ? null
      : override.autoUpgrade || override.behavior === AUTO_UPGRADE
        ? ('auto_upgrade' as const)
        : ('pinned' as const);
    const behavior = behaviorName(info?.behavior);
    return {
      workflowId,
      found: true,
      running: described.status.name === 'RUNNING',
      status: described.status.name,
      runId: described.runId,
      historyLength: described.historyLength,
      behavior,
      buildId: info?.deploymentVersion?.buildId ?? null,
      override: overridden,
      pinned: (overridden ?? behavior) === 'pinned',
    };
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    const none = { running: false, status: null, runId: null, historyLength: null, buildId: null };
    return { workflowId, found: false, ...none, behavior: null, override: null, pinned: false };
  }
}

const { VersioningBehavior } = proto.temporal.api.enums.v1;
const AUTO_UPGRADE = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE;

function behaviorName(behavior: number | null | undefined): BatchWorkflowView['behavior'] {
  if (behavior === AUTO_UPGRADE) return 'auto_upgrade';
  if (behavior === VersioningBehavior.VERSIONING_BEHAVIOR_PINNED) return 'pinned';
  return behavior === undefined || behavior === null ? null : 'unspecified';
}

/**
 * Moves a workflow to the deployment's current build for good: an Auto-Upgrade override, as
 * `temporal workflow update-options --versioning-override-behavior auto_upgrade` sets. Safe for a
 * batch: its state is in PostgreSQL, and the current build replays the histories of the build
 * before (test/workflows: the kept `-pinned` batch histories).
 */
async function followCurrentBuild(client: Client, workflowId: string): Promise<void> {
  await client.workflowService.updateWorkflowExecutionOptions({
    namespace: client.options.namespace,
    workflowExecution: { workflowId },
    workflowExecutionOptions: { versioningOverride: { autoUpgrade: true } },
    updateMask: { paths: ['versioning_override'] },
  });
}

function describeBatch(row: BatchRow, counts: BatchCounts, workflow: BatchWorkflowView): string[] {
  const { total, pending, queued, succeeded, failed, rejected, refused, canceled, expired } = counts;
  const build = workflow.buildId ? ` on build ${workflow.buildId}` : '';
  return [
    `${row.id}  ${row.status}  account ${row.account_id}  key ${row.api_key_id}`,
    `  lines: ${total} (pending ${pending}, queued ${queued}, succeeded ${succeeded}, failed ${failed}, rejected ${rejected}, refused ${refused}, canceled ${canceled}, expired ${expired})`,
    `  credits: quoted ${row.quoted_credits}, spent ${counts.creditsSpent}`,
    `  created ${row.created_at}, started ${row.started_at ?? '-'}, completed ${row.completed_at ?? '-'}, expires ${row.expires_at}`,
    workflow.found
      ? `  workflow ${workflow.workflowId}: ${workflow.status}, ${workflow.behavior ?? 'no versioning'}${build}${workflow.override ? ` (override: ${workflow.override})` : ''}, ${workflow.historyLength} events in its run`
      : `  workflow ${workflow.workflowId}: never started`,
  ];
}
