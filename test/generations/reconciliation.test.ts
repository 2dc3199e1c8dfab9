import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAdminCommand } from '../../src/admin/commands.js';
import { listReconciliations } from '../../src/db/reconciliation-repository.js';
import { ScheduleNotFoundError } from '@temporalio/client';
import {
  ensureReconciliationSchedule,
  LEGACY_RECONCILIATION_SCHEDULE_ID,
  reconciliationScheduleId,
  removeLegacyReconciliationSchedule,
} from '../../src/temporal/reconciliation-schedule.js';
import { reconciliationWorkflow } from '../../src/workflows/reconciliation-workflow.js';
import type { ReconciliationOptions } from '../../src/workflows/contracts/reconciliation.js';
import { bearer } from '../support/api.js';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

/**
 * A generation whose workflow was terminated or failed from outside (the Temporal UI can do this)
 * must not keep its debit silently: the reconciliation sweep finishes it or flags it.
 */
describe('reconciliation of generations left without a workflow', () => {
  const stack = useGenerationStack({ account: { oneTime: 1000 } });
  let sweeps = 0;
  const sweep = (options: Partial<ReconciliationOptions> = {}) =>
    stack.client.workflow.execute(reconciliationWorkflow, {
      taskQueue: stack.worker.taskQueue,
      workflowId: `reconcile-test-${++sweeps}`,
      args: [{ graceMs: 0, overdueMs: 3_600_000, limit: 100, ...options }],
    });
  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;
  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode).toBe(202);
    return response.json().id as string;
  };
  const terminate = async (id: string) =>
    stack.client.workflow
      .getHandle(await workflowIdOf(stack.db.pool, id))
      .terminate('operator terminated it');

  it('terminated before the provider had the job: refunded through the refund path', async () => {
    const before = await balance();
    // The provider refuses connections: the generation waits in its background submission, nothing sent.
    const id = await create('never sent [sim:unreachable]');
    expect(await balance()).toBe(before - 2);
    await terminate(id);
    const report = await sweep();
    expect(report.refunded).toContain(id);
    expect(await getGeneration(stack.api, stack.account.key, id)).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      error: { code: 'generation_interrupted' },
    });
    expect(await balance()).toBe(before);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 0 });
    // Operators see what it did.
    expect(await listReconciliations(stack.db.pool, 50)).toContainEqual(
      expect.objectContaining({ generation_id: id, action: 'refunded' }),
    );
    const shown = await runAdminCommand(['reconciliations'], {
      db: stack.db.pool,
      temporal: () => Promise.resolve(stack.client),
    });
    expect(shown.text.join('\n')).toMatch(new RegExp(`${id}\\s+refunded`));
    // A second sweep changes nothing.
    expect((await sweep()).refunded).not.toContain(id);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ refunds: 1 });
  });

  it('terminated while the provider runs the job: flagged for review, nothing refunded', async () => {
    const id = await create('at the provider [sim:slow=60]');
    await pollGeneration(stack.api, stack.account.key, id, () => true);
    await terminate(id);
    const report = await sweep();
    expect(report.flaggedForReview).toContain(id);
    expect(await getGeneration(stack.api, stack.account.key, id)).toMatchObject({
      status: 'failed',
      credits_refunded: false,
      error: { code: 'submission_unresolved' },
    });
    const needsReview = await stack.db.pool.oneFirst(
      sql.type(
        z.object({ needs_review: z.boolean() }),
      )`SELECT needs_review FROM generations WHERE id = ${id}`,
    );
    expect(needsReview).toBe(true);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 0 });
  });

  it('leaves a generation whose workflow runs alone, and reports it once when it runs past every horizon', async () => {
    const id = await create('slow but alive [sim:slow=60]');
    const calm = await sweep();
    expect([...calm.refunded, ...calm.flaggedForReview, ...calm.runningPastHorizon]).not.toContain(id);
    const overdue = await sweep({ overdueMs: 0 });
    expect(overdue.runningPastHorizon).toContain(id);
    expect((await sweep({ overdueMs: 0 })).runningPastHorizon).not.toContain(id);
    expect(await getGeneration(stack.api, stack.account.key, id)).toMatchObject({ status: 'queued' });
    const listed = await runAdminCommand(['generations', '--needs-review'], {
      db: stack.db.pool,
      temporal: () => Promise.resolve(stack.client),
    });
    expect((listed.json as Array<{ id: string }>).map((g) => g.id)).toContain(id);
    await terminate(id);
  });

  it('is a Temporal Schedule that the worker creates or brings up to date', async () => {
    const settings = {
      taskQueue: stack.worker.taskQueue,
      intervalMs: 3_600_000,
      options: { graceMs: 60_000, overdueMs: 3_600_000, limit: 10 },
    };
    const handle = stack.client.schedule.getHandle(reconciliationScheduleId(stack.worker.taskQueue));
    // 'created', or 'updated' when a create retried under load found its own first attempt.
    expect(await ensureReconciliationSchedule(stack.client, settings)).toMatch(/created|updated/);
    try {
      expect((await handle.describe()).spec.intervals?.[0]?.every).toBe(3_600_000);
      expect(await ensureReconciliationSchedule(stack.client, { ...settings, intervalMs: 600_000 })).toBe(
        'updated',
      );
      const described = await handle.describe();
      expect(described.spec.intervals?.[0]?.every).toBe(600_000);
      expect(described.action).toMatchObject({ taskQueue: stack.worker.taskQueue, args: [settings.options] });
      await handle.trigger();
      await expect
        .poll(async () => (await handle.describe()).info.recentActions.length, { timeout: 10_000 })
        .toBeGreaterThan(0);
      const run = (await handle.describe()).info.recentActions[0]!.action.workflow;
      const result = await stack.client.workflow.getHandle(run.workflowId, run.firstExecutionRunId).result();
      expect(result).toMatchObject({ examined: expect.any(Number), refunded: [] });
    } finally {
      await handle.delete();
    }
  });

  it("removes the earlier versions' namespace-wide schedule when it sweeps this task queue, and only then", async () => {
    const legacy = stack.client.schedule.getHandle(LEGACY_RECONCILIATION_SCHEDULE_ID);
    const action = (taskQueue: string) => ({
      type: 'startWorkflow' as const,
      workflowType: reconciliationWorkflow,
      workflowId: LEGACY_RECONCILIATION_SCHEDULE_ID,
      taskQueue,
      args: [{ graceMs: 60_000, overdueMs: 3_600_000, limit: 10 }] as [ReconciliationOptions],
    });
    await stack.client.schedule.create({
      scheduleId: LEGACY_RECONCILIATION_SCHEDULE_ID,
      spec: { intervals: [{ every: 3_600_000 }] },
      action: action('another-deployment'),
      state: { paused: true },
    });
    try {
      expect(await removeLegacyReconciliationSchedule(stack.client, stack.worker.taskQueue)).toBe(false);
      expect((await legacy.describe()).action).toMatchObject({ taskQueue: 'another-deployment' });

      await legacy.update((previous) => ({ ...previous, action: action(stack.worker.taskQueue) }));
      expect(await removeLegacyReconciliationSchedule(stack.client, stack.worker.taskQueue)).toBe(true);
      await expect(legacy.describe()).rejects.toBeInstanceOf(ScheduleNotFoundError);
      expect(await removeLegacyReconciliationSchedule(stack.client, stack.worker.taskQueue)).toBe(false);
    } finally {
      await legacy.delete().catch(() => undefined);
    }
  });
});
