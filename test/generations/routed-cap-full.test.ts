import { Client, Connection } from '@temporalio/client';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { routeAttemptsOf } from '../../src/db/route-attempts.js';
import { bearer } from '../support/api.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { promptContains } from '../support/providers/fake-http.js';
import { useRoutedStack } from '../support/routed-stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 29 §2, "an in-flight cap full": `flux-schnell` of catalog/examples/routed.json (fal first,
 * Replicate second) on the real API and a real worker process whose fal account may hold one job
 * (FAL_MAX_IN_FLIGHT=1). With a next route, a submit that finds fal's cap full moves on to it
 * rather than wait in our queue; on the last route the same full cap waits for a place.
 */
describe('a routed model whose first provider’s in-flight cap is full', () => {
  const { stack, accepted, settled, created, balance } = useRoutedStack({
    workerEnv: () => ({ FAL_MAX_IN_FLIGHT: '1' }),
  });
  let client: Client;
  let connection: Connection;
  beforeAll(async () => {
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
  });
  afterAll(async () => {
    await connection?.close();
  });

  const slotsHeld = (provider: string) =>
    stack.db.pool.anyFirst(sql.type(z.object({ generation_id: z.string() }))`
      SELECT generation_id FROM provider_slots WHERE provider = ${provider}`);

  it('with a next route it is served by Replicate at once; on the last route it waits, not failed', async () => {
    // One fal job held running: fal's one in-flight place is taken until it is released.
    stack.fal.script({ hold: true }, promptContains('holds fal'));
    const holder = await accepted({ prompt: 'holds fal' });
    await waitFor(() => Promise.resolve(created(stack.fal, 'holds fal') === 1), 20_000);
    expect(await slotsHeld('fal')).toEqual([holder.id]);

    const before = await balance();
    const moved = await accepted({ prompt: 'cap full' });
    const done = await settled(moved.id as string);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'replicate', credits_refunded: false });
    expect(created(stack.fal, 'cap full')).toBe(0);
    expect(created(stack.replicate, 'cap full')).toBe(1);
    expect(await chargesOf(stack.db.pool, moved.id as string)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await balance()).toBe(before - 1);
    const recorded = await routeAttemptsOf(stack.db.pool, moved.id as string);
    expect(recorded.map((a) => [a.provider, a.outcome, a.reason])).toEqual([
      ['fal', 'not_accepted', 'its 1 in-flight places are taken'],
      ['replicate', 'accepted', null],
    ]);

    // fal as the only route (its last): the full cap keeps it in our queue, retried, never failed.
    const waiting = await accepted({ prompt: 'last route waits', provider: { only: ['fal'] } });
    const handle = client.workflow.getHandle(await workflowIdOf(stack.db.pool, waiting.id as string));
    // The submit has been refused a place at least twice (it is retried, not given up).
    await waitFor(async () => {
      const pending = (await handle.describe()).raw.pendingActivities ?? [];
      return pending.some(
        (activity) =>
          (activity.attempt ?? 0) >= 2 &&
          /fal has 1 jobs in flight, its cap; this one waits/.test(activity.lastFailure?.message ?? ''),
      );
    }, 20_000);
    const now = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations/${waiting.id}`,
      headers: bearer(stack.account.key),
    });
    expect(now.json()).toMatchObject({ status: 'queued' });
    expect(created(stack.fal, 'last route waits')).toBe(0);
    expect(created(stack.replicate, 'last route waits')).toBe(0);
    expect(await routeAttemptsOf(stack.db.pool, waiting.id as string)).toEqual([]);

    // The held job ends: its place goes to the waiting generation, which fal then serves.
    const held = stack.fal.accepted().find((job) => String(job.input.prompt).includes('holds fal'))!;
    stack.fal.release(held.id);
    expect(await settled(holder.id as string)).toMatchObject({ status: 'succeeded', provider: 'fal' });
    expect(await settled(waiting.id as string)).toMatchObject({ status: 'succeeded', provider: 'fal' });
    expect(created(stack.fal, 'last route waits')).toBe(1);
    expect(await chargesOf(stack.db.pool, waiting.id as string)).toMatchObject({ debits: 1, refunds: 0 });
    expect(await slotsHeld('fal')).toEqual([]);
  }, 120_000);
});
