import { sql } from 'slonik';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';

/**
 * A job at the provider runs as long as the provider works; its generation waits in the workflow
 * (for the push, or a timer), so it holds no worker slot, whatever the number of such jobs.
 */
describe('worker slots', () => {
  const shortSlots = 2;
  const stack = useGenerationStack({ worker: { maxConcurrentActivities: shortSlots } });

  it('more slow jobs at the provider than short-activity slots: none holds a slot while it waits, and a new generation still completes', async () => {
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
    // Each slow generation is at its provider, and nothing of it runs on any worker meanwhile.
    for (const id of slow) {
      await expect.poll(() => providerJobOf(id), { timeout: 15_000, interval: 100 }).toMatch(/^sim_/);
      await expect.poll(() => pendingActivitiesOf(id), { timeout: 5_000, interval: 100 }).toEqual([]);
    }

    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a snapshot',
    });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    expect(await pollGeneration(stack.api, stack.account.key, id)).toMatchObject({ status: 'succeeded' });
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    // The slow ones still wait, holding nothing.
    for (const id of slow) {
      await expect.poll(() => pendingActivitiesOf(id), { timeout: 5_000, interval: 100 }).toEqual([]);
      expect((await pollGeneration(stack.api, stack.account.key, id, () => true)).status).toBe('queued');
    }
  });

  async function pendingActivitiesOf(id: string): Promise<unknown[]> {
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    return (await handle.describe()).raw.pendingActivities ?? [];
  }

  async function providerJobOf(id: string): Promise<string | null> {
    return stack.db.pool.oneFirst(
      sql.type(z.object({ provider_job_id: z.string().nullable() }))`
        SELECT provider_job_id FROM generations WHERE id = ${id}`,
    );
  }
});
