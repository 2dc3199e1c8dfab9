import { describe, expect, it } from 'vitest';
import { thumbnailName } from '../../src/media/thumbnail.js';
import { ensureThumbnailsSchedule, thumbnailsScheduleId } from '../../src/temporal/thumbnails-schedule.js';
import { thumbnailsWorkflow } from '../../src/workflows/thumbnails-workflow.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { galleryOf, workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { activitiesOf, chainHistory, runsOf } from '../support/workflow-runs.js';

/**
 * A generation's workflow neither makes nor waits for the gallery's thumbnails (no activity, no
 * workflow task for them in any of its runs); the thumbnails schedule's workflow makes the pending
 * ones on the thumbnails' own task queue, through a real worker.
 */
describe('the gallery thumbnails, off the generation workflow', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });

  it("leaves the thumbnail pending at the success; the schedule's sweep makes it", async () => {
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a lighthouse at dusk',
    });
    expect(created.statusCode).toBe(202);
    const { id } = created.json<{ id: string }>();
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    const workflowId = await workflowIdOf(stack.db.pool, id);
    // The active run has continued as the retention run by now (its last step is the success).
    await expect.poll(async () => (await runsOf(stack.client, workflowId)).length).toBe(2);
    const activities = activitiesOf(await chainHistory(stack.client, workflowId))
      .filter(({ name }) => name !== 'admit' && name !== 'submit')
      .map(({ name, summary }) => `${name}${summary?.includes('pushed') ? ' (pushed)' : ''}`);
    // The simulated provider pushed the job's end: one read of it, then the copy.
    expect(activities).toEqual(['readProviderJob (pushed)', 'persistResults']);

    const [image] = await galleryOf(stack.db.pool, id);
    const storage = stack.worker.deps.storage;
    const key = storage.keyOf(image!.url)!;
    expect(await storage.read(key.prefix, thumbnailName(key.name))).toBeNull();

    // The schedule the worker creates at start (here with an hour's interval, triggered once).
    const settings = {
      taskQueue: stack.worker.taskQueue,
      intervalMs: 3_600_000,
      options: { batchSize: 50, maxBatches: 20 },
    };
    const schedule = stack.client.schedule.getHandle(thumbnailsScheduleId(stack.worker.taskQueue));
    try {
      expect(await ensureThumbnailsSchedule(stack.client, settings)).toBe('created');
      expect(await ensureThumbnailsSchedule(stack.client, { ...settings, intervalMs: 30_000 })).toBe(
        'updated',
      );
      const described = await schedule.describe();
      expect(described.spec.intervals?.[0]?.every).toBe(30_000);
      expect(described.action).toMatchObject({
        workflowType: thumbnailsWorkflow.name,
        taskQueue: stack.worker.taskQueue,
        args: [settings.options],
      });
      await schedule.trigger();
      await expect.poll(async () => (await schedule.describe()).info.recentActions.length).toBeGreaterThan(0);
      const run = (await schedule.describe()).info.recentActions[0]!.action.workflow;
      const report = await stack.client.workflow.getHandle(run.workflowId, run.firstExecutionRunId).result();
      expect(report).toEqual({ made: 1, more: false });
    } finally {
      expect(await ensureThumbnailsSchedule(stack.client, { ...settings, intervalMs: 0 })).toBe('removed');
    }
    expect(await ensureThumbnailsSchedule(stack.client, { ...settings, intervalMs: 0 })).toBe('off');
    expect(await storage.read(key.prefix, thumbnailName(key.name))).not.toBeNull();
  });
});
