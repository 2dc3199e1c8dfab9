import { describe, expect, it } from 'vitest';
import { thumbnailName } from '../../src/media/thumbnail.js';
import { thumbnailsWorkflow } from '../../src/workflows/thumbnails-workflow.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { galleryOf, workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { chainHistory, runsOf } from '../support/workflow-runs.js';

/**
 * A generation's workflow neither makes nor waits for the gallery's thumbnails (no activity, no
 * workflow task for them in any of its runs); the thumbnails schedule's workflow makes the pending
 * ones on the thumbnails' own task queue, through a real worker.
 */
describe('the gallery thumbnails, off the generation workflow', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });

  it('leaves the thumbnail pending at the success; the sweep makes it', async () => {
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
    const activities = (await chainHistory(stack.client, workflowId)).events!.flatMap((e) => {
      const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
      return name ? [name] : [];
    });
    expect(activities).toEqual(['waitForProvider', 'persistResults']);

    const [image] = await galleryOf(stack.db.pool, id);
    const storage = stack.worker.deps.storage;
    const key = storage.keyOf(image!.url)!;
    expect(await storage.read(key.prefix, thumbnailName(key.name))).toBeNull();

    const report = await stack.client.workflow.execute(thumbnailsWorkflow, {
      workflowId: `thumbnails-test-${id}`,
      taskQueue: stack.worker.taskQueue,
      args: [{ batchSize: 50, maxBatches: 20 }],
    });
    expect(report).toEqual({ made: 1, more: false });
    expect(await storage.read(key.prefix, thumbnailName(key.name))).not.toBeNull();
  });
});
