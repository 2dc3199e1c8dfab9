import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { sql } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { deliveryAttemptsOf } from '../../src/db/webhook-delivery-reads.js';
import { CatalogCache } from '../../src/catalog/catalog-cache.js';
import { admitGeneration } from '../../src/generations/admission/admit-generation.js';
import { redeliverWebhook } from '../../src/generations/redeliver-webhook.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { bearer } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { deliveryActivities } from './delivery-history.js';
import { useWebhookReceiver, type Received } from './webhook-receiver.js';

/**
 * Webhook deliveries (issue 30 §3, §4) through a real worker to an HTTPS receiver on loopback
 * (allowed as WEBHOOK_ALLOW_CIDRS would, its certificate trusted), on a shortened retry schedule.
 */
describe('webhook deliveries', () => {
  const apiEnv: Record<string, string> = {
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
    WEBHOOK_RETRY_DELAYS_MS: '200,200,200,200',
  };
  const hooks = useWebhookReceiver();
  const { hanging, webhookDelivery, deliveriesOf, until, settle } = hooks;
  /** Answers of /flaky, in order (then 200). */
  hooks.flaky.push(500, 500, 500);
  let secret: string;

  const stack = useGenerationStack({ apiEnv, worker: { overrides: { webhookDelivery } } });
  beforeAll(async () => {
    const response = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/webhooks/secret',
      headers: bearer(stack.account.key),
    });
    secret = z.object({ secret: z.string() }).parse(response.json()).secret;
  });

  const create = async (prompt: string, webhook: unknown) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt,
      webhook,
    });
    expect(response.statusCode, response.body).toBeLessThan(300);
    return z.object({ id: z.string() }).parse(response.json()).id;
  };
  const quote = (body: unknown) =>
    stack.api.app.inject({
      method: 'POST',
      url: '/v1/generations/quote',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  it('delivers each subscribed event once, in order, signed over the bytes sent (verified by the reference library)', async () => {
    const types = ['generation.created', 'generation.processing', 'generation.succeeded'];
    const id = await create('a lighthouse', { url: `${hooks.origin()}/ok?all`, events: types });
    const plain = await create('a harbour', { url: `${hooks.origin()}/ok` });
    const failed = await create('a storm [sim:fail]', { url: `${hooks.origin()}/ok` });
    await until(
      () =>
        deliveriesOf(id).length >= 3 && deliveriesOf(plain).length >= 1 && deliveriesOf(failed).length >= 1,
    );
    await settle();
    const verifier = new Webhook(secret);
    const check = (deliveries: Received[]) =>
      deliveries.map((delivery) => {
        const event = verifier.verify(delivery.body, delivery.headers) as { id: number; type: string };
        expect(delivery.headers['webhook-id']).toBe(`msg_${JSON.parse(delivery.body).data.id}_${event.id}`);
        expect(delivery.body).not.toContain(secret);
        expect(delivery.body).not.toContain(stack.account.key);
        return event.type;
      });
    expect(check(deliveriesOf(id))).toEqual(types);
    // The default subscription: the events that end a generation, not its progress.
    expect(check(deliveriesOf(plain))).toEqual(['generation.succeeded']);
    expect(check(deliveriesOf(failed))).toEqual(['generation.failed']);
    // The body is the event as GET /v1/generations/{id}/events shows it.
    const listed = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations/${id}/events`,
      headers: bearer(stack.account.key),
    });
    expect(deliveriesOf(id).map((d) => JSON.parse(d.body))).toEqual(
      listed.json<{ data: unknown[] }>().data.filter((e) => types.includes((e as { type: string }).type)),
    );
    const attempts = await deliveryAttemptsOf(stack.db.pool, id);
    expect(attempts.map((a) => [a.event_type, a.attempt, a.status, a.outcome])).toEqual(
      types.map((type) => [type, 1, 204, 'delivered']),
    );
    // Each first attempt was made by the look that found its event: no activity between the two.
    expect(await deliveryActivities(stack.client, plain)).not.toContain('deliverWebhook');
  });

  it('retries a receiver that answers 500 three times: delivered on the fourth attempt, same webhook-id', async () => {
    const id = await create('a mill', { url: `${hooks.origin()}/flaky` });
    await until(() => deliveriesOf(id).length >= 4);
    await settle();
    const ids = deliveriesOf(id).map((d) => d.headers['webhook-id']);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(1);
    const attempts = await deliveryAttemptsOf(stack.db.pool, id);
    expect(attempts.map((a) => [a.attempt, a.status, a.outcome])).toEqual([
      [1, 500, 'failed'],
      [2, 500, 'failed'],
      [3, 500, 'failed'],
      [4, 200, 'delivered'],
    ]);
    expect(attempts[0]!.error).toBe('the receiver answered 500');
    // The first by the look that found the event, the three retries each an activity of their own.
    expect((await deliveryActivities(stack.client, id)).filter((a) => a === 'deliverWebhook')).toHaveLength(
      3,
    );
  });

  it('an API that dies right after admission loses no deliveries: the generation starts them', async () => {
    // The POST's admission, with a Temporal client that fails every call after the generation's
    // update-with-start, as a process killed at that point would make none.
    const log = pino({ level: 'silent' });
    const catalog = new CatalogCache(stack.db.pool, log);
    await catalog.start(60_000);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'webhook-admission-'));
    const workflows = stack.client.workflow;
    const dying = new Proxy(stack.client, {
      get: (target, name) =>
        name === 'workflow'
          ? {
              executeUpdateWithStart: workflows.executeUpdateWithStart.bind(workflows),
              start: () => Promise.reject(new Error('the API process died after admission')),
              signalWithStart: () => Promise.reject(new Error('the API process died after admission')),
            }
          : (Reflect.get(target, name) as unknown),
    });
    try {
      const { generationId: id } = await admitGeneration(
        {
          db: stack.db.pool,
          catalog,
          temporal: dying,
          taskQueue: stack.worker.taskQueue,
          storage: new LocalStorage(dir, 'http://results.test'),
          admissionTimeoutMs: 10_000,
          timing: {
            submitTimeoutMs: 10_000,
            pollIntervalMs: 100,
            resultRetentionMs: 86_400_000,
            idempotencyRetentionMs: 86_400_000,
          },
          webhooks: { allowCidrs: ['127.0.0.1/32'], retryDelaysMs: [200] },
        },
        {
          principal: { accountId: stack.account.accountId, keyId: stack.account.keyId },
          idempotencyKey: undefined,
          recordInvalid: true,
          body: {
            model: 'lumen-lite',
            prompt: 'a lock keeper',
            webhook: { url: `${hooks.origin()}/ok`, events: ['generation.created', 'generation.succeeded'] },
          },
        },
        log,
      );
      await until(() => deliveriesOf(id).length >= 2);
      await settle();
      expect(deliveriesOf(id).map((d) => JSON.parse(d.body).type)).toEqual([
        'generation.created',
        'generation.succeeded',
      ]);
    } finally {
      await catalog.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a delivery workflow running on the generation's task queue (started so by an earlier build) still delivers", async () => {
    const id = await create('a lantern', undefined);
    await pollGeneration(stack.api, stack.account.key, id);
    // Before deliveries had a queue of their own, their workflows ran on the generation's queue,
    // whose worker does not poll for their activities: those go to its webhooks queue.
    await stack.client.workflow.start('webhookDeliveryWorkflow', {
      taskQueue: stack.worker.taskQueue,
      workflowId: `webhooks-${id}`,
      args: [
        {
          generationId: id,
          retryDelaysMs: [200],
          subscription: { url: `${hooks.origin()}/ok`, events: ['generation.succeeded'] },
        },
      ],
    });
    await until(() => deliveriesOf(id).length >= 1);
    expect(deliveriesOf(id).map((d) => JSON.parse(d.body).type)).toEqual(['generation.succeeded']);
  });

  it.each([
    ['ended', ['generation.succeeded']],
    ['still running (content_expired is still to come)', undefined],
  ])(
    'redelivers one event on request, its delivery workflow %s: same webhook-id, verified, numbered after',
    async (_, events) => {
      const id = await create('a pier', { url: `${hooks.origin()}/ok`, events });
      await until(() => deliveriesOf(id).length >= 1);
      const handle = stack.client.workflow.getHandle(`webhooks-${id}`);
      if (events) await handle.result();
      else expect((await handle.describe()).status.name).toBe('RUNNING');
      const [first] = deliveriesOf(id);
      const seq = (JSON.parse(first!.body) as { id: number }).id;
      const deps = { db: stack.db.pool, temporal: stack.client, taskQueue: stack.worker.taskQueue };
      expect(await redeliverWebhook(deps, id, seq)).toEqual({
        outcome: 'queued',
        webhookId: `msg_${id}_${seq}`,
        eventType: 'generation.succeeded',
      });
      await until(() => deliveriesOf(id).length >= 2);
      await settle();
      const again = deliveriesOf(id);
      expect(again).toHaveLength(2);
      expect(again[1]!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
      expect(again[1]!.body).toBe(first!.body);
      expect(new Webhook(secret).verify(again[1]!.body, again[1]!.headers)).toMatchObject({ id: seq });
      const attempts = await deliveryAttemptsOf(stack.db.pool, id);
      expect(attempts.map((a) => [a.event_seq, a.attempt, a.outcome])).toEqual([
        [seq, 1, 'delivered'],
        [seq, 2, 'delivered'],
      ]);
      expect(await redeliverWebhook(deps, id, seq + 100)).toEqual({ outcome: 'no_event' });
      expect(await redeliverWebhook(deps, 'gen_none', 1)).toEqual({ outcome: 'no_webhook' });
    },
  );

  it('410 Gone stops deliveries to that URL for the generation', async () => {
    const id = await create('a bridge', {
      url: `${hooks.origin()}/gone`,
      events: ['generation.created', 'generation.processing', 'generation.succeeded'],
    });
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    await until(() => deliveriesOf(id).length >= 1);
    await settle();
    expect(deliveriesOf(id).map((d) => JSON.parse(d.body).type)).toEqual(['generation.created']);
    const attempts = await deliveryAttemptsOf(stack.db.pool, id);
    expect(attempts.map((a) => [a.status, a.outcome])).toEqual([[410, 'gone']]);
  });

  it("a receiver that never answers leaves the generation's own timing alone", async () => {
    const timed = async (webhook: unknown) => {
      const started = Date.now();
      const id = await create('a tower', webhook);
      await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
      return { id, ms: Date.now() - started };
    };
    const all = ['generation.created', 'generation.processing', 'generation.succeeded'];
    const without = await timed(undefined);
    const answered = await timed({ url: `${hooks.origin()}/ok?timed`, events: all });
    const hung = await timed({ url: `${hooks.origin()}/hang`, events: all });
    console.log(
      `generation to succeeded: ${without.ms} ms without a webhook, ${answered.ms} ms with a receiver ` +
        `answering at once, ${hung.ms} ms with a receiver that never answers`,
    );
    // The generation succeeded while its first delivery (of three, in order) is still unanswered.
    await until(() => deliveriesOf(hung.id).length >= 1);
    expect(deliveriesOf(hung.id)).toHaveLength(1);
    expect(hanging.length).toBeGreaterThan(0);
    expect(await deliveryAttemptsOf(stack.db.pool, hung.id)).toEqual([]);
    // A sanity bound only: it did not wait out the receiver's 15 s.
    expect(hung.ms).toBeLessThan(15_000);
  });

  it('refuses a webhook the outbound rules would not deliver to: 400 with issues, nothing charged', async () => {
    const balance = () =>
      stack.db.pool.oneFirst(
        sql.type(z.object({ one_time_credits: z.number() }))`
          SELECT one_time_credits FROM credit_balances WHERE account_id = ${stack.account.accountId}`,
      );
    const before = await balance();
    for (const webhook of [
      { url: 'http://example.com/hook' },
      { url: 'https://10.1.2.3/hook' },
      { url: 'https://169.254.169.254/latest' },
      { url: 'https://user:pass@example.com/hook' },
      { url: 'not a url' },
      { url: `${hooks.origin()}/ok`, events: ['generation.exploded'] },
      { url: `${hooks.origin()}/ok`, events: [] },
      'https://example.com/hook',
    ]) {
      const response = await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'a gate',
        webhook,
      });
      expect(response.statusCode, JSON.stringify(webhook)).toBe(400);
      const { issues } = response.json<{ issues: { field: string }[] }>();
      expect(issues.map((i) => i.field.split('.')[0])).toEqual(['webhook']);
      // A quote of the same body is refused alike (it validates exactly as a create).
      const quoted = await quote({ model: 'lumen-lite', prompt: 'a gate', webhook });
      expect(quoted.statusCode, JSON.stringify(webhook)).toBe(400);
      expect(quoted.json<{ issues: unknown[] }>().issues).toEqual(issues);
    }
    expect(await balance()).toBe(before);
    // A create's body with its webhook quotes as the create would be priced.
    const quoted = await quote({
      model: 'lumen-lite',
      prompt: 'a gate',
      webhook: { url: `${hooks.origin()}/ok` },
    });
    expect(quoted.statusCode, quoted.body).toBe(200);
    expect(quoted.json()).toMatchObject({ model: 'lumen-lite', credits: 2 });
  });

  it('after a rotation, deliveries carry both signatures: each secret verifies them (reference library)', async () => {
    const rotated = await stack.api.app.inject({
      method: 'POST',
      url: '/v1/webhooks/secret/rotate',
      headers: bearer(stack.account.key),
    });
    const next = z.object({ secret: z.string() }).parse(rotated.json()).secret;
    expect(next).not.toBe(secret);
    const id = await create('a lantern', { url: `${hooks.origin()}/ok` });
    await until(() => deliveriesOf(id).length >= 1);
    const [delivery] = deliveriesOf(id);
    expect(delivery!.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    for (const key of [next, secret])
      expect(new Webhook(key).verify(delivery!.body, delivery!.headers)).toMatchObject({ data: { id } });
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(
        delivery!.body,
        delivery!.headers,
      ),
    ).toThrow();
  });

  it('the webhook is part of the request: the same key with another webhook is a conflict', async () => {
    const body = { model: 'lumen-lite', prompt: 'a quay', webhook: { url: `${hooks.origin()}/ok` } };
    const first = await createGeneration(stack.api, stack.account.key, body, 'hook-key-1');
    expect(first.statusCode).toBeLessThan(300);
    const again = await createGeneration(stack.api, stack.account.key, body, 'hook-key-1');
    expect(again.json().id).toBe(first.json().id);
    const other = await createGeneration(
      stack.api,
      stack.account.key,
      { ...body, webhook: { url: `${hooks.origin()}/ok?other` } },
      'hook-key-1',
    );
    expect(other.statusCode).toBe(409);
  });
});
