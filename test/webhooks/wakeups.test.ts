import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { GenerationEventWakeups } from '../../src/db/generation-event-wakeups.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { createGeneration } from '../support/generations.js';
import { useGenerationStack, type GenerationStack } from '../support/stack.js';
import { useWebhookReceiver } from './webhook-receiver.js';

/**
 * A waiting delivery is woken by its generation's `generation_event` notification (issue 30's
 * bench: 120 waiting deliveries polling the log every 200 ms kept the worker busy), and a
 * notification that never arrives only delays it until the safety re-read.
 */

/** The pool, counting the queries that read the event log. */
function countingEventReads(pool: DatabasePool, counter: { reads: number }): DatabasePool {
  return new Proxy(pool, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const query = args[0] as { sql?: unknown } | undefined;
        if (typeof query?.sql === 'string' && /from generation_events/i.test(query.sql)) counter.reads += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

async function createWithWebhook(stack: GenerationStack, url: string): Promise<string> {
  const response = await createGeneration(stack.api, stack.account.key, {
    model: 'lumen-lite',
    prompt: 'a lighthouse',
    webhook: { url },
  });
  expect(response.statusCode, response.body).toBeLessThan(300);
  return z.object({ id: z.string() }).parse(response.json()).id;
}

describe('a waiting webhook delivery, woken by notifications', () => {
  const hooks = useWebhookReceiver();
  const counter = { reads: 0 };
  // The provider takes 3 s: a delivery polling every 200 ms would read the log 15 times meanwhile.
  const stack = useGenerationStack({
    apiEnv: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    workerPool: (pool) => countingEventReads(pool, counter),
    // The safety re-read is set past the look's one-minute bound: only a notification wakes it in time.
    worker: {
      simDelayMs: 3000,
      overrides: { webhookDelivery: hooks.webhookDelivery, webhookRecheckMs: 120_000 },
    },
  });

  it('reads the event log a few times per delivery, not every 200 ms, and delivers at once', async () => {
    const id = await createWithWebhook(stack, `${hooks.origin()}/ok`);
    await hooks.until(() => hooks.deliveriesOf(id).length >= 1, 30_000);
    const delivered = Date.now();
    const [event] = (await stack.db.pool.any(
      sql.unsafe`SELECT created_at FROM generation_events
        WHERE generation_id = ${id} AND type = 'generation.succeeded'`,
    )) as Array<{ created_at: number }>;
    const latencyMs = delivered - new Date(event!.created_at).getTime();
    console.log(`event-log reads for one delivery: ${counter.reads}; succeeded → delivered ${latencyMs} ms`);
    // The first look, one per notification it wakes on (created, processing, succeeded), the attempt’s
    // own read: 3 to 6. Polling every 200 ms through 3 s of provider time read it 15 times or more.
    expect(counter.reads).toBeLessThanOrEqual(10);
    // Sanity bound, not a speed target: a missed wake would wait for the look's one-minute bound.
    expect(latencyMs).toBeLessThan(10_000);
  });
});

describe('a waiting webhook delivery whose notification is missed', () => {
  const hooks = useWebhookReceiver();
  // Wakeups no notification ever reaches (as if each were lost): only the safety re-read finds the events.
  const deaf = new GenerationEventWakeups({ listening: () => true });
  const stack = useGenerationStack({
    apiEnv: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    worker: {
      overrides: { webhookDelivery: hooks.webhookDelivery, eventWakeups: deaf, webhookRecheckMs: 1000 },
    },
  });

  it('is still delivered, by the safety re-read', async () => {
    const id = await createWithWebhook(stack, `${hooks.origin()}/ok`);
    // Well before the look's one-minute bound: the re-read every second found the event.
    await hooks.until(() => hooks.deliveriesOf(id).length >= 1, 30_000);
    await hooks.settle();
    expect(hooks.deliveriesOf(id).map((d) => JSON.parse(d.body).type)).toEqual(['generation.succeeded']);
  });
});
