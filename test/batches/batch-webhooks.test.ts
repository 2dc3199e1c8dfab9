import { sql } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { redeliverWebhook } from '../../src/generations/redeliver-webhook.js';
import { bearer, createPaidAccount } from '../support/api.js';
import {
  balanceOf,
  batchLines as lines,
  postBatch,
  useBatchStack,
  waitForBatch,
} from '../support/batches.js';
import { deliveriesEnded } from '../webhooks/deliveries-ended.js';
import { useWebhookReceiver } from '../webhooks/webhook-receiver.js';

/**
 * Issue 38: a batch's events "as a batch's own SSE and as webhooks with the same signing and rules
 * as generations'": GET /v1/batches/{id}/events (JSON, and a stream that ends with the batch), and
 * POST /v1/batches `webhook` delivered by the generations' delivery workflow, through a real
 * worker and a loopback receiver.
 */
describe("a batch's own events: its SSE stream and its webhook", () => {
  const apiEnv = { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_DELAYS_MS: '300,300' };
  const hooks = useWebhookReceiver();
  const { received } = hooks;
  const stack = useBatchStack({
    apiEnv,
    worker: { simDelayMs: 10, overrides: { webhookDelivery: hooks.webhookDelivery } },
    account: { oneTime: 100_000 },
  });
  let secret: string;
  beforeAll(async () => {
    const response = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/webhooks/secret',
      headers: bearer(stack.account.key),
    });
    secret = z.object({ secret: z.string() }).parse(response.json()).secret;
  });

  /** /retry answers 500 to its first delivery, then 204. */
  let retryAnswers = [500];
  hooks.routes.set('/retry', (_delivery, response) => response.writeHead(retryAnswers.shift() ?? 204).end());

  const events = (id: string, headers: Record<string, string> = {}, key = stack.account.key) =>
    stack.api.app.inject({
      method: 'GET',
      url: `/v1/batches/${id}/events`,
      headers: { ...bearer(key), ...headers },
    });
  const sse = (id: string, lastEventId?: string) =>
    events(id, { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) });
  /** A stream's messages: each `id`, `event` and parsed `data`. */
  const messages = (body: string) =>
    body
      .split('\n\n')
      .filter((block) => block.startsWith('id: '))
      .map((block) => {
        const fields = Object.fromEntries(block.split('\n').map((line) => line.split(/: (.*)/s).slice(0, 2)));
        return {
          id: fields.id!,
          event: fields.event!,
          data: JSON.parse(fields.data) as Record<string, any>,
        };
      });
  const deliveriesTo = (path: string, batchId: string) =>
    received.filter(
      (r) => r.path === path && (JSON.parse(r.body) as { data: { id: string } }).data.id === batchId,
    );
  const attemptRow = z.object({
    event_type: z.string(),
    attempt: z.number(),
    status: z.number().nullable(),
    outcome: z.string(),
  });
  const attemptsOf = async (batchId: string) =>
    (
      await stack.db.pool.any(sql.type(attemptRow)`
        SELECT event_type, attempt, status, outcome FROM webhook_delivery_attempts
        WHERE batch_id = ${batchId} ORDER BY id`)
    ).map((a) => [a.event_type, a.attempt, a.status, a.outcome]);

  it('its stream carries created, progress and completed, then ends; it resumes after Last-Event-ID', async () => {
    const created = await postBatch(stack.api, stack.account.key, { requests: lines(3) });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    // Opened at once: the stream stays open until the batch's end event, then ends by itself.
    const stream = await sse(batch.id);
    expect(stream.statusCode).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    const got = messages(stream.body);
    const types = got.map((m) => m.event);
    expect(types[0]).toBe('batch.created');
    expect(types).toContain('batch.progress');
    expect(types.at(-1)).toBe('batch.completed');
    expect(types.filter((t) => !['batch.created', 'batch.progress', 'batch.completed'].includes(t))).toEqual(
      [],
    );
    expect(got.map((m) => Number(m.id))).toEqual(got.map((_, i) => i + 1));
    for (const m of got) {
      expect(m.data).toMatchObject({ id: Number(m.id), type: m.event, data: { id: batch.id } });
      expect(m.data.data).not.toHaveProperty('account_id');
    }
    expect(got.at(-1)!.data.data).toMatchObject({ status: 'completed', request_counts: { succeeded: 3 } });

    // Resumed after the first event: the rest, then the end (the batch has ended).
    const resumed = await sse(batch.id, '1');
    expect(resumed.statusCode).toBe(200);
    expect(messages(resumed.body).map((m) => m.id)).toEqual(got.slice(1).map((m) => m.id));
    // Every event seen: 204, so that EventSource stops reconnecting.
    expect((await sse(batch.id, got.at(-1)!.id)).statusCode).toBe(204);
    // The JSON form: the same events, the same objects, after Last-Event-ID when sent.
    const json = await events(batch.id);
    expect(json.statusCode).toBe(200);
    expect(json.json().data).toEqual(got.map((m) => m.data));
    expect((await events(batch.id, { 'last-event-id': '2' })).json().data).toEqual(
      got.slice(2).map((m) => m.data),
    );
    // The account's own stream has the same objects.
    const account = (
      await stack.api.app.inject({
        method: 'GET',
        url: '/v1/events?after=0&limit=100',
        headers: bearer(stack.account.key),
      })
    ).json().data as { event: { type: string; data: { id: string } } }[];
    expect(account.filter((e) => e.event.data.id === batch.id).map((e) => e.event)).toEqual(
      got.map((m) => m.data),
    );

    // Another account's batch is not found, in either form; a bad Last-Event-ID is a 400.
    const other = await createPaidAccount(stack.db.pool, { oneTime: 10 });
    expect((await events(batch.id, {}, other.key)).statusCode).toBe(404);
    expect((await events(batch.id, { accept: 'text/event-stream' }, other.key)).statusCode).toBe(404);
    expect((await sse(batch.id, 'x')).statusCode).toBe(400);
  }, 60_000);

  it('its webhook: the events asked for, signed as a generation’s, once each, recorded', async () => {
    const url = `${hooks.origin()}/batch`;
    const created = await postBatch(stack.api, stack.account.key, {
      requests: lines(2),
      webhook: { url, events: ['batch.created', 'batch.completed'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    await waitForBatch(stack.api, stack.account.key, batch.id);
    await deliveriesEnded(stack.client, batch.id);
    const delivered = deliveriesTo('/batch', batch.id);
    const verifier = new Webhook(secret);
    const bodies = delivered.map((d) => {
      const event = verifier.verify(d.body, d.headers) as { id: number; type: string };
      expect(d.headers['webhook-id']).toBe(`msg_${batch.id}_${event.id}`);
      return event;
    });
    // Filtered: no batch.progress was sent, though the batch logged some.
    expect(bodies.map((e) => e.type)).toEqual(['batch.created', 'batch.completed']);
    // The body is the event exactly as the batch's own events give it.
    const log = (await events(batch.id)).json().data as { id: number }[];
    expect(bodies).toEqual(bodies.map((e) => log.find((l) => l.id === e.id)));
    expect(await attemptsOf(batch.id)).toEqual([
      ['batch.created', 1, 204, 'delivered'],
      ['batch.completed', 1, 204, 'delivered'],
    ]);

    // Redelivered on request (its delivery workflow ended): the same webhook-id and body, numbered after.
    const deps = { db: stack.db.pool, temporal: stack.client, taskQueue: stack.worker.taskQueue };
    const last = bodies.at(-1)!.id;
    expect(await redeliverWebhook(deps, batch.id, last)).toEqual({
      outcome: 'queued',
      webhookId: `msg_${batch.id}_${last}`,
      eventType: 'batch.completed',
    });
    await hooks.until(() => deliveriesTo('/batch', batch.id).length === 3);
    const again = deliveriesTo('/batch', batch.id)[2]!;
    expect(again.headers['webhook-id']).toBe(delivered[1]!.headers['webhook-id']);
    expect(again.body).toBe(delivered[1]!.body);
    await expect.poll(() => attemptsOf(batch.id)).toContainEqual(['batch.completed', 2, 204, 'delivered']);
    expect(await redeliverWebhook(deps, batch.id, last + 100)).toEqual({ outcome: 'no_event' });
  }, 60_000);

  it('a 500 is retried on the schedule; a 410 stops the batch’s deliveries', async () => {
    retryAnswers = [500];
    const retried = (
      await postBatch(stack.api, stack.account.key, {
        requests: lines(1),
        webhook: { url: `${hooks.origin()}/retry` },
      })
    ).json();
    const gone = (
      await postBatch(stack.api, stack.account.key, {
        requests: lines(1),
        webhook: {
          url: `${hooks.origin()}/gone`,
          events: ['batch.created', 'batch.progress', 'batch.completed'],
        },
      })
    ).json();
    await deliveriesEnded(stack.client, retried.id);
    await deliveriesEnded(stack.client, gone.id);
    // The default events: the end only; its first attempt failed, its retry delivered.
    expect(await attemptsOf(retried.id)).toEqual([
      ['batch.completed', 1, 500, 'failed'],
      ['batch.completed', 2, 204, 'delivered'],
    ]);
    expect(deliveriesTo('/retry', retried.id).map((d) => d.headers['webhook-id'])).toEqual([
      `msg_${retried.id}_${(await events(retried.id)).json().data.at(-1).id}`,
      `msg_${retried.id}_${(await events(retried.id)).json().data.at(-1).id}`,
    ]);
    // 410 to batch.created: nothing more was sent, though the batch went on to complete.
    expect((await waitForBatch(stack.api, stack.account.key, gone.id)).status).toBe('completed');
    expect(await attemptsOf(gone.id)).toEqual([['batch.created', 1, 410, 'gone']]);
    expect(deliveriesTo('/gone', gone.id)).toHaveLength(1);
  }, 60_000);

  it('a webhook at a private address, or naming events a batch has not, is a 400: nothing created or charged', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 1_000 });
    const before = await balanceOf(stack.db.pool, account.accountId);
    for (const [webhook, field] of [
      [{ url: 'https://10.1.2.3/hook' }, 'webhook.url'],
      [{ url: 'https://192.168.0.1/hook' }, 'webhook.url'],
      [{ url: `${hooks.origin()}/x`, events: ['generation.succeeded'] }, 'webhook.events'],
      [{ url: `${hooks.origin()}/x`, secret: 'no' }, 'webhook.secret'],
    ] as const) {
      const refused = await postBatch(stack.api, account.key, { requests: lines(2), webhook });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().issues.map((i: { field: string }) => i.field)).toContain(field);
    }
    const rows = z.object({ n: z.coerce.number() });
    expect(
      await stack.db.pool.oneFirst(
        sql.type(rows)`SELECT count(*) AS n FROM batches WHERE account_id = ${account.accountId}`,
      ),
    ).toBe(0);
    expect(await balanceOf(stack.db.pool, account.accountId)).toBe(before);
  }, 30_000);
});
