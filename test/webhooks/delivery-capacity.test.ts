import type http from 'node:http';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { webhookDeliveryWorkflowId } from '../../src/workflows/webhook-delivery-types.js';
import { createPaidAccount } from '../support/api.js';
import { createGeneration, getGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { useWebhookReceiver, type Received } from './webhook-receiver.js';

/**
 * Deliveries cost the service, and other accounts, no capacity for free (issue 35 §3): an
 * account's attempts in flight are capped (WEBHOOK_DELIVERIES_PER_ACCOUNT, 5 here), the rest
 * waiting their turn without a worker slot; a delivery workflow waiting for its generation's next
 * event holds no activity at all.
 */
describe('webhook delivery capacity', () => {
  const hooks = useWebhookReceiver();
  const { received, routes, origin } = hooks;
  const perAccount = 5;
  const stack = useGenerationStack({
    apiEnv: {
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      // The flood's retries come after the test.
      WEBHOOK_RETRY_DELAYS_MS: '60000',
      RATE_LIMIT_PER_MINUTE: '100000',
      // The flood posts 20 at once; on two loaded cores an admission can outlast the default 10 s.
      ADMISSION_TIMEOUT_MS: '30000',
    },
    worker: {
      overrides: { webhookDelivery: hooks.webhookDelivery, webhookDeliveriesPerAccount: perAccount },
    },
  });
  const idOf = (r: Received) => (JSON.parse(r.body) as { data: { id: string } }).data.id;

  it(
    "one account's 200 refused POSTs at a receiver that never answers leave another account's delivery on time",
    { timeout: 120_000 },
    async () => {
      // A receiver that never answers (until the test lets the held requests go).
      const held: http.ServerResponse[] = [];
      let answering = false;
      let open = 0;
      let mostOpen = 0;
      routes.set('/never', (_r, response) => {
        if (answering) return void response.writeHead(204).end();
        held.push(response);
        mostOpen = Math.max(mostOpen, ++open);
        // The attempt gave up (its 15 s), or the test let it go.
        response.on('close', () => open--);
      });
      try {
        const flooder = await createPaidAccount(stack.db.pool, { oneTime: 1 });
        const refused = async () => {
          const response = await createGeneration(stack.api, flooder.key, {
            model: 'lumen-lite',
            prompt: 'too dear',
            webhook: { url: `${origin()}/never` },
          });
          expect(response.statusCode, response.body).toBe(402);
        };
        for (let sent = 0; sent < 200; sent += 20) {
          await Promise.all(Array.from({ length: 20 }, refused));
        }
        // The flood's deliveries are under way (and hang).
        await expect.poll(() => held.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(perAccount);

        const other = await createPaidAccount(stack.db.pool, { oneTime: 1 });
        const response = await createGeneration(stack.api, other.key, {
          model: 'lumen-lite',
          prompt: 'too dear, elsewhere',
          webhook: { url: `${origin()}/hook` },
        });
        expect(response.statusCode, response.body).toBe(402);
        const answeredAt = Date.now();
        const id = String(response.headers['x-request-id']);
        let arrivedAt = 0;
        // A generous bound (the issue asks 2 s); the figure is printed for the record.
        await expect
          .poll(
            () => {
              if (!arrivedAt && received.some((r) => r.path === '/hook' && idOf(r) === id))
                arrivedAt = Date.now();
              return arrivedAt > 0;
            },
            { timeout: 5_000, interval: 20 },
          )
          .toBe(true);
        console.log(
          `another account's delivery under the flood (200 refused POSTs, receiver never answering): ` +
            `${arrivedAt - answeredAt} ms from its 402 to its arrival; the flood's attempts in flight at most: ${mostOpen}`,
        );
        // The flooder never had more attempts in flight than its cap.
        expect(mostOpen).toBeLessThanOrEqual(perAccount);
      } finally {
        // Let the flood drain: the held requests fail, and the next attempts are answered.
        answering = true;
        for (const response of held) response.destroy();
      }
    },
  );

  it('a delivery waiting for its generation’s next event holds no activity', async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a slow lighthouse [sim:slow=8]',
      webhook: { url: `${origin()}/hook`, events: ['generation.processing', 'generation.succeeded'] },
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = z.object({ id: z.string() }).parse(response.json()).id;
    await expect
      .poll(() => received.some((r) => r.path === '/hook' && idOf(r) === id), { timeout: 10_000 })
      .toBe(true);
    // The provider works on (no event comes meanwhile): the delivery waits for the next one.
    const handle = stack.client.workflow.getHandle(webhookDeliveryWorkflowId(id));
    const pending = async () => (await handle.describe()).raw.pendingActivities?.length ?? 0;
    // Its looks done (the one that delivered it, and the one after), it waits: on a timer.
    const lastEvent = async () => (await handle.fetchHistory()).events?.at(-1)?.eventType;
    await expect
      .poll(lastEvent, { timeout: 15_000 })
      .toBe(temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED);
    const samples: number[] = [];
    for (let i = 0; i < 10; i++) {
      samples.push(await pending());
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(samples).toEqual(samples.map(() => 0));
    expect((await getGeneration(stack.api, stack.account.key, id)).status).toBe('queued');
  });
});
