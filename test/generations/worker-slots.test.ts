import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

/** Provider waits last as long as the provider works; they must never hold the slots other steps need. */
describe('worker slots', () => {
  const shortSlots = 2;
  const started = proto.temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;
  const stack = useGenerationStack({ worker: { maxConcurrentActivities: shortSlots } });

  it('more slow jobs at the provider than short-activity slots: every one waits, and a new generation still completes', async () => {
    const slow = await Promise.all(
      Array.from({ length: shortSlots + 1 }, async (_, i) => {
        const response = await createGeneration(stack.api, stack.account.key, {
          model: 'lumen-lite',
          prompt: `a long exposure ${i} [sim:slow=120]`,
        });
        expect(response.statusCode).toBe(202);
        return response.json().id as string;
      }),
    );
    // Each slow generation's provider wait is running (it holds a worker slot, on the waits' queue).
    for (const id of slow) {
      const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
      await expect
        .poll(
          async () =>
            (await handle.describe()).raw.pendingActivities?.map((a) => [a.activityType?.name, a.state]),
          { timeout: 15_000, interval: 100 },
        )
        .toEqual([['waitForProvider', started]]);
    }

    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a snapshot',
    });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    expect(await pollGeneration(stack.api, stack.account.key, id)).toMatchObject({ status: 'succeeded' });
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
  });
});
