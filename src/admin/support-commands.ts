import { providerHealthReport } from '../db/provider-health.js';
import { providerSlotsInUse } from '../db/provider-slots.js';
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  findGenerationsForSupport,
  getGenerationForSupport,
  type SupportGenerationRow,
} from '../db/support-queries.js';
import { NotFound } from '../db/accounts-repository.js';
import { listReconciliations } from '../db/reconciliation-repository.js';
import { routeAttemptsOf } from '../db/route-attempts.js';
import type { GenerationStatus } from '../vocabulary/generation.js';
import { progressQuery, resolveUpdate } from '../workflows/generation-workflow.js';
import { cancelGeneration } from '../generations/cancel-generation.js';
import { askNewestRun } from '../generations/admission/newest-run.js';
import { webhookDeliveriesOf } from '../db/webhook-delivery-reads.js';
import { describeDeliveries } from './webhook-commands.js';
import { CommandRefused, optional, positiveInt, str, UsageError, type Command } from './command.js';

/**
 * Support's commands: find what is stuck or unresolved, look at one
 * generation, resolve an uncertain submission, and reset a workflow. They go
 * through the workflow (updates, reset), never around it: every activity is
 * idempotent on the generation, so a reset re-runs the story without a
 * second debit, submission or refund.
 */
export const supportCommands: Record<string, Command> = {
  generations: {
    summary:
      'List generations for support: --needs-review (uncertain submissions), --queued-over-minutes N (stuck).',
    usage: '[--account ACCOUNT] [--needs-review] [--queued-over-minutes N] [--status s1,s2] [--limit N]',
    options: {
      account: { type: 'string' },
      'needs-review': { type: 'boolean' },
      'queued-over-minutes': { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
    },
    async run({ db }, v) {
      const rows = await findGenerationsForSupport(db, {
        accountId: optional(v.account),
        needsReview: v['needs-review'] === true,
        queuedOverMinutes:
          v['queued-over-minutes'] === undefined ? undefined : Number(v['queued-over-minutes']),
        statuses: typeof v.status === 'string' ? (v.status.split(',') as GenerationStatus[]) : undefined,
        limit: v.limit === undefined ? 50 : positiveInt(v.limit, 'limit'),
      });
      return { json: rows, text: rows.length ? rows.map(describe) : ['No generations match.'] };
    },
  },
  generation: {
    summary:
      'Show one generation: the record, its route attempts (provider, job, outcome, why it moved on), where its workflow stands, and its webhook deliveries (each attempt).',
    usage: '--id GENERATION_ID',
    options: { id: { type: 'string', required: true } },
    async run({ db, temporal }, v) {
      const row = await find(db, str(v.id));
      const progress = row.workflow_id
        ? await (
            await temporal()
          ).workflow
            .getHandle(row.workflow_id)
            .query(progressQuery)
            .catch((e: Error) => ({ error: e.message }))
        : null;
      const routes = await routeAttemptsOf(db, row.id);
      const webhook = await webhookDeliveriesOf(db, row.id);
      return {
        json: { generation: row, route_attempts: routes, workflow: progress, webhook },
        text: [
          describe(row),
          ...routes.map(
            (a) =>
              `  route ${a.position}: ${a.provider} ${a.outcome}${a.provider_job_id ? ` job ${a.provider_job_id}` : ''}${a.reason ? ` (${a.reason})` : ''} at ${a.recorded_at}`,
          ),
          `  workflow: ${row.workflow_id ?? '(none)'} ${JSON.stringify(progress)}`,
          ...describeDeliveries(webhook),
        ],
      };
    },
  },
  'resolve-generation': {
    summary:
      'Resolve a generation that needs review: --refund (the provider did not run it) or --succeed PROVIDER_JOB_ID.',
    usage: '--id GENERATION_ID (--refund | --succeed PROVIDER_JOB_ID) [--note TEXT]',
    options: {
      id: { type: 'string', required: true },
      refund: { type: 'boolean' },
      succeed: { type: 'string' },
      note: { type: 'string' },
    },
    async run({ db, temporal }, v) {
      if ((v.refund === true) === (typeof v.succeed === 'string'))
        throw new UsageError('Give exactly one of --refund and --succeed PROVIDER_JOB_ID.');
      const row = await find(db, str(v.id));
      if (!row.workflow_id)
        throw new UsageError(`${row.id} has no workflow (it was rejected before admission).`);
      const note = optional(v.note);
      const decision =
        v.refund === true
          ? { action: 'refund' as const, note }
          : { action: 'succeed' as const, providerJobId: str(v.succeed), note };
      const client = await temporal();
      const workflowId = row.workflow_id;
      // A review run that continues as new as the resolve reaches it leaves it to the newest run.
      const progress = await askNewestRun(() =>
        client.workflow.getHandle(workflowId).executeUpdate(resolveUpdate, { args: [decision] }),
      ).catch(async (error: unknown) => {
        // Resolving ends the story, and its workflow with it: a second resolve finds none.
        if (!(error instanceof WorkflowNotFoundError)) throw error;
        throw alreadyResolved(await find(db, row.id));
      });
      return {
        json: progress,
        text: [`Resolved ${row.id} (${decision.action}); the workflow is now ${progress.step}.`],
      };
    },
  },
  'cancel-generation': {
    summary:
      "Cancel a generation under the client's rules: stopped and refunded (canceled) if the provider never ran it; stopped and still charged if the provider started it as the cancel arrived; otherwise nothing changes.",
    usage: '--id GENERATION_ID',
    options: { id: { type: 'string', required: true } },
    async run({ db, temporal }, v) {
      const id = str(v.id);
      const result = await cancelGeneration({ db, temporal: await temporal(), timeoutMs: 30_000 }, id, null);
      if (!result) throw new NotFound(`No generation ${id}.`);
      const { generation } = result;
      if (!result.canceled)
        throw new CommandRefused(
          'not_cancelable',
          `${id} is not cancelable (${generation.status}${generation.status === 'queued' ? ': the provider is running or has run it' : ''}); nothing changed.`,
        );
      return {
        json: generation,
        text: [`Canceled ${id}: failed (canceled), credits_refunded ${generation.credits_refunded}.`],
      };
    },
  },
  reconciliations: {
    summary:
      'What the reconciliation schedule did: generations it refunded or flagged for review because their workflow was gone, and those running past their horizon.',
    usage: '[--limit N]',
    options: { limit: { type: 'string' } },
    async run({ db }, v) {
      const rows = await listReconciliations(db, v.limit === undefined ? 50 : positiveInt(v.limit, 'limit'));
      return {
        json: rows,
        text: rows.length
          ? rows.map((r) =>
              [r.created_at, r.generation_id, r.action, r.reason, r.workflow_id ?? ''].join('  '),
            )
          : ['Reconciliation has not acted on any generation.'],
      };
    },
  },
  providers: {
    summary:
      'Whether each real provider is up or down (down: its models refuse new POSTs with 503 until a probe finds it up), its failures in a row, and the jobs it has in flight.',
    usage: '',
    options: {},
    async run({ db }) {
      const [health, inFlight] = await Promise.all([providerHealthReport(db), providerSlotsInUse(db)]);
      const names = [...new Set([...health.map((h) => h.provider), ...inFlight.keys()])].sort();
      const rows = names.map((provider) => {
        const h = health.find((row) => row.provider === provider);
        return {
          provider,
          state: h?.state ?? 'up',
          consecutive_failures: h?.consecutive_failures ?? 0,
          in_flight: inFlight.get(provider) ?? 0,
          down_since: h?.down_since ?? null,
          next_probe_at: h?.probe_at ?? null,
          last_error: h?.last_error ?? null,
          last_failure_at: h?.last_failure_at ?? null,
        };
      });
      return {
        json: rows,
        text: rows.length
          ? rows.map((r) =>
              [
                r.provider,
                r.state,
                `${r.consecutive_failures} failures in a row`,
                `${r.in_flight} in flight`,
                r.state === 'down' ? `down since ${r.down_since}, next probe ${r.next_probe_at}` : '',
                r.last_error ? `last error at ${r.last_failure_at}: ${r.last_error}` : '',
              ]
                .filter(Boolean)
                .join('  '),
            )
          : ['No provider has failed or has jobs in flight.'],
      };
    },
  },
  'reset-generation': {
    summary:
      "Reset a generation's workflow to its start, e.g. after a fix to stuck code; activities are idempotent, so nothing is charged, submitted or refunded twice.",
    usage: '--id GENERATION_ID [--reason TEXT]',
    options: { id: { type: 'string', required: true }, reason: { type: 'string' } },
    async run({ db, temporal }, v) {
      const row = await find(db, str(v.id));
      if (!row.workflow_id)
        throw new UsageError(`${row.id} has no workflow (it was rejected before admission).`);
      const runId = await resetToStart(
        await temporal(),
        row.workflow_id,
        optional(v.reason) ?? 'support reset',
      );
      return {
        json: { generation: row.id, workflowId: row.workflow_id, runId },
        text: [`Reset ${row.workflow_id}; new run ${runId}.`],
      };
    },
  },
};

async function find(db: Parameters<Command['run']>[0]['db'], id: string): Promise<SupportGenerationRow> {
  const row = await getGenerationForSupport(db, id);
  if (!row) throw new NotFound(`no generation ${id}`);
  return row;
}

/** Resets the current run to its first completed workflow task: the story runs again from admission. */
async function resetToStart(client: Client, workflowId: string, reason: string): Promise<string> {
  const { workflowService } = client.connection;
  const namespace = client.options.namespace;
  // The newest run (a generation's retention run once it succeeded) may have only just started:
  // its first workflow task, the point a reset goes back to, is waited for (a few seconds at most).
  const deadline = Date.now() + 10_000;
  let description = await client.workflow.getHandle(workflowId).describe();
  let firstTaskCompleted = await firstTaskCompletedOf(client, workflowId, description.runId);
  while (firstTaskCompleted === null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    description = await client.workflow.getHandle(workflowId).describe();
    firstTaskCompleted = await firstTaskCompletedOf(client, workflowId, description.runId);
  }
  if (firstTaskCompleted === null)
    throw new Error(`workflow ${workflowId} has not completed a workflow task yet`);
  const response: { runId?: string | null } = await workflowService.resetWorkflowExecution({
    namespace,
    workflowExecution: { workflowId, runId: description.runId },
    workflowTaskFinishEventId: firstTaskCompleted,
    requestId: randomUUID(),
    reason,
  });
  return response.runId ?? '';
}

function alreadyResolved(g: SupportGenerationRow): CommandRefused {
  const state = [
    `status ${g.status}`,
    g.credits_refunded ? 'credits refunded' : '',
    g.error ? `error ${g.error.code}` : '',
  ].filter(Boolean);
  return new CommandRefused(
    'already_resolved',
    `${g.id} is already resolved (${state.join(', ')}): its workflow has ended, so nothing was changed.`,
  );
}

function describe(g: SupportGenerationRow): string {
  return [
    g.id,
    g.account_id,
    g.status + (g.needs_review ? ' (needs review)' : ''),
    g.model,
    `${g.credits} credits${g.credits_refunded ? ' refunded' : ''}`,
    g.created_at,
    g.error ? g.error.code : '',
    g.provider_job_id ? `job ${g.provider_job_id}` : '',
  ]
    .filter(Boolean)
    .join('  ');
}

/** The event id of a run's first completed workflow task; null while it has none. */
async function firstTaskCompletedOf(client: Client, workflowId: string, runId: string): Promise<Long | null> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  return history.events?.find((event) => event.workflowTaskCompletedEventAttributes)?.eventId ?? null;
}
