import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runAdminCommand } from '../../src/admin/commands.js';
import { bearer, createPaidAccount, type TestAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { providerJobIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { useWebhookReceiver } from './webhook-receiver.js';

/**
 * The default subscription's events that come apart from a generation's run: its refusal
 * (generation.rejected, the POST's 402) and, after a success, its content expiring
 * (generation.content_expired, here 2 s after it: RESULT_RETENTION_MS). A request refused by
 * validation (400 with `issues`) never reaches the workflow that delivers: its log has the event,
 * no receiver is sent it (docs/api/using-the-api.md, "Subscribing"). A generation sent to review
 * (generation.failed, needs_review) is not over: what support then decides is delivered too.
 */
describe('webhooks of a refusal and of a content expiry', () => {
  const { received, webhookDelivery, origin, deliveriesOf } = useWebhookReceiver();
  const stack = useGenerationStack({
    apiEnv: {
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_RETRY_DELAYS_MS: '200',
      RESULT_RETENTION_MS: '2000',
    },
    worker: { overrides: { webhookDelivery } },
  });

  const typesOf = (id: string, account: TestAccount) => async () => {
    const { secret } = z.object({ secret: z.string() }).parse(
      (
        await stack.api.app.inject({
          method: 'GET',
          url: '/v1/webhooks/secret',
          headers: bearer(account.key),
        })
      ).json(),
    );
    return received
      .filter((r) => (JSON.parse(r.body) as { data: { id: string } }).data.id === id)
      .map((r) => (new Webhook(secret).verify(r.body, r.headers) as { type: string }).type);
  };

  it('delivers generation.content_expired when the content expires, not an hour later', async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a sandcastle',
      webhook: { url: `${origin()}/hook` },
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = z.object({ id: z.string() }).parse(response.json()).id;
    await expect
      .poll(typesOf(id, stack.account), { timeout: 30_000, interval: 200 })
      .toEqual(['generation.succeeded', 'generation.content_expired']);
  });

  it('delivers generation.rejected for a request refused at admission (402)', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const response = await createGeneration(stack.api, poor.key, {
      model: 'lumen-lite',
      prompt: 'too dear',
      webhook: { url: `${origin()}/hook` },
    });
    expect(response.statusCode, response.body).toBe(402);
    const id = String(response.headers['x-request-id']);
    await expect.poll(typesOf(id, poor), { timeout: 20_000, interval: 200 }).toEqual(['generation.rejected']);
  });

  it('delivers nothing for a request refused by validation (400), though its log has generation.rejected', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const invalid = await createGeneration(stack.api, poor.key, {
      model: 'lumen-lite',
      prompt: 'a lighthouse',
      quality: 'bogus',
      webhook: { url: `${origin()}/hook` },
    });
    expect(invalid.statusCode, invalid.body).toBe(400);
    const invalidId = String(invalid.headers['x-request-id']);
    const log = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations/${invalidId}/events`,
      headers: bearer(poor.key),
    });
    expect(log.statusCode, log.body).toBe(200);
    expect(log.json<{ data: { type: string }[] }>().data.map((e) => e.type)).toEqual(['generation.rejected']);
    // A 402 sent after it is delivered: by then a delivery of the 400 would have come too.
    const refused = await createGeneration(stack.api, poor.key, {
      model: 'lumen-lite',
      prompt: 'too dear',
      webhook: { url: `${origin()}/hook` },
    });
    expect(refused.statusCode, refused.body).toBe(402);
    const refusedId = String(refused.headers['x-request-id']);
    await expect
      .poll(typesOf(refusedId, poor), { timeout: 20_000, interval: 200 })
      .toEqual(['generation.rejected']);
    expect(deliveriesOf(invalidId)).toEqual([]);
  });

  describe('a generation sent to review', () => {
    const admin = (...argv: string[]) =>
      runAdminCommand(argv, { db: stack.db.pool, temporal: () => Promise.resolve(stack.client) });
    const events = [
      'generation.failed',
      'generation.requeued',
      'generation.succeeded',
      'generation.refunded',
    ];
    const inReview = async (prompt: string) => {
      const response = await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: `${prompt} [sim:uncertain]`,
        webhook: { url: `${origin()}/hook`, events },
      });
      expect(response.statusCode, response.body).toBe(202);
      const id = z.object({ id: z.string() }).parse(response.json()).id;
      await pollGeneration(
        stack.api,
        stack.account.key,
        id,
        (g) => g.error?.code === 'submission_unresolved',
      );
      await expect
        .poll(typesOf(id, stack.account), { timeout: 20_000, interval: 200 })
        .toEqual(['generation.failed']);
      return id;
    };

    it('delivers generation.requeued and generation.succeeded when support resumes it', async () => {
      const id = await inReview('resumed after review');
      await admin('resolve-generation', '--id', id, '--succeed', await providerJobIdOf(stack.db.pool, id));
      await expect
        .poll(typesOf(id, stack.account), { timeout: 20_000, interval: 200 })
        .toEqual(['generation.failed', 'generation.requeued', 'generation.succeeded']);
    });

    it('delivers generation.refunded when support refunds it', async () => {
      const id = await inReview('refunded after review');
      await admin('resolve-generation', '--id', id, '--refund');
      await expect
        .poll(typesOf(id, stack.account), { timeout: 20_000, interval: 200 })
        .toEqual(['generation.failed', 'generation.refunded']);
    });
  });
});
