import type http from 'node:http';
import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { deliveryAttemptsOf, webhookDeliveriesOf } from '../../src/db/webhook-delivery-reads.js';
import { redeliverWebhook } from '../../src/generations/redeliver-webhook.js';
import { createGeneration, getGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { deliveriesEnded as deliveriesEndedOf } from './deliveries-ended.js';
import { useWebhookReceiver } from './webhook-receiver.js';

/**
 * Issue 30 §3: "`410 Gone` stops deliveries to that URL", through a real worker and a loopback
 * receiver. A 410 to one generation's delivery stops every subscription of the account to that URL
 * made before it (a retry pending, events still to come); one made after it is delivered.
 */
describe('410 Gone stops deliveries to that URL', () => {
  const apiEnv = { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_DELAYS_MS: '300,300' };
  const hooks = useWebhookReceiver();
  const { received, deliveriesOf, until, settle } = hooks;
  const stack = useGenerationStack({
    apiEnv,
    worker: { overrides: { webhookDelivery: hooks.webhookDelivery } },
  });

  /**
   * How /u answers its next deliveries, in turn: 'hold' keeps the request unanswered (in `held`),
   * 410 is Gone; once the list is spent, 204.
   */
  const next: Array<'hold' | 410> = [];
  const held: http.ServerResponse[] = [];
  /** The delivery answered 410 (its index in `received`). */
  let goneIndex = -1;
  hooks.routes.set('/u', (delivery, response) => {
    const answer = next.shift() ?? 204;
    if (answer === 'hold') held.push(response);
    else {
      if (answer === 410) goneIndex = received.indexOf(delivery);
      response.writeHead(answer).end();
    }
  });

  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt,
      webhook: { url: `${hooks.origin()}/u`, events: ['generation.created', 'generation.succeeded'] },
    });
    expect(response.statusCode, response.body).toBe(202);
    return z.object({ id: z.string() }).parse(response.json()).id;
  };
  const typesOf = (id: string) => deliveriesOf(id).map((d) => (JSON.parse(d.body) as { type: string }).type);
  const attemptsOf = async (id: string) =>
    (await deliveryAttemptsOf(stack.db.pool, id)).map((a) => [a.event_type, a.attempt, a.status, a.outcome]);
  const deliveriesEnded = (id: string) => deliveriesEndedOf(stack.client, id);
  const goneAtOf = async (id: string) => (await webhookDeliveriesOf(stack.db.pool, id)).subscription?.gone_at;

  it("stops the account's earlier subscriptions to the URL (pending retries, later events); a later one is delivered", async () => {
    // B: its first delivery is in flight (held) when the 410 comes, then fails: a retry is pending.
    next.push('hold');
    const b = await create('a ferry');
    await until(() => held.length === 1);
    // D: its `created` delivered before the 410, its `succeeded` (8 s on) still to come.
    const d = await create('a tugboat [sim:slow=8]');
    await until(() => typesOf(d).length === 1);
    await until(() => received.filter((r) => r.path === '/u').length === 2);
    // A: the URL answers 410 to its first delivery.
    next.push(410);
    const a = await create('a barge');
    await deliveriesEnded(a);
    expect(await attemptsOf(a)).toEqual([['generation.created', 1, 410, 'gone']]);
    expect(deliveriesOf(a)).toEqual([received[goneIndex]]);
    // D's success is still to come: its event is one found after the 410.
    expect((await getGeneration(stack.api, stack.account.key, d)).status).not.toBe('succeeded');
    // B's held delivery now fails: its retry (300 ms on) finds the URL gone.
    held.shift()!.writeHead(500).end();
    await deliveriesEnded(b);
    await deliveriesEnded(d);

    // Nothing reached the receiver for B or D after the 410 ...
    const after = received.slice(goneIndex + 1).map((r) => {
      const event = JSON.parse(r.body) as { type: string; data: { id: string } };
      return `${event.type} of ${event.data.id === b ? 'B' : event.data.id === d ? 'D' : event.data.id}`;
    });
    expect(after).toEqual([]);
    expect(typesOf(b)).toEqual(['generation.created']);
    expect(typesOf(d)).toEqual(['generation.created']);
    // ... B's retry ended as gone, recorded (not sent: no status), and both subscriptions are stopped.
    expect(await attemptsOf(b)).toEqual([
      ['generation.created', 1, 500, 'failed'],
      ['generation.created', 2, null, 'gone'],
    ]);
    expect((await deliveryAttemptsOf(stack.db.pool, b))[1]!.error).toMatch(
      /^not sent: the URL answered 410 Gone/,
    );
    expect(await attemptsOf(d)).toEqual([['generation.created', 1, 204, 'delivered']]);
    const urlGoneAt = await stack.db.pool.oneFirst(
      sql.type(z.object({ gone_at: z.string() }))`
        SELECT gone_at FROM webhook_gone_urls
        WHERE account_id = ${stack.account.accountId} AND url = ${`${hooks.origin()}/u`}`,
    );
    expect(await goneAtOf(a)).toBe(urlGoneAt);
    expect(await goneAtOf(b)).toBe(urlGoneAt);
    expect(await goneAtOf(d)).toBe(urlGoneAt);

    // C, subscribed after the 410: the receiver is back, every event delivered.
    const c = await create('a ketch');
    await deliveriesEnded(c);
    expect(typesOf(c)).toEqual(['generation.created', 'generation.succeeded']);
    expect(await attemptsOf(c)).toEqual([
      ['generation.created', 1, 204, 'delivered'],
      ['generation.succeeded', 1, 204, 'delivered'],
    ]);
    expect(await goneAtOf(c)).toBeNull();

    // A redelivery asked for (console, support) is an explicit act: B's event is sent all the same.
    const seq = (JSON.parse(deliveriesOf(b)[0]!.body) as { id: number }).id;
    const deps = { db: stack.db.pool, temporal: stack.client, taskQueue: stack.worker.taskQueue };
    expect(await redeliverWebhook(deps, b, seq)).toMatchObject({ outcome: 'queued' });
    await until(() => typesOf(b).length === 2);
    await settle();
    expect(typesOf(b)).toEqual(['generation.created', 'generation.created']);
    expect((await attemptsOf(b)).at(-1)).toEqual(['generation.created', 3, 204, 'delivered']);
  }, 60_000);
});
