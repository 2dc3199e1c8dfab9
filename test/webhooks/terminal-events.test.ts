import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bearer, createPaidAccount, type TestAccount } from '../support/api.js';
import { createGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';

interface Received {
  headers: Record<string, string>;
  body: string;
}

/**
 * The default subscription's events that come apart from a generation's run: its refusal
 * (generation.rejected, the POST's 402) and, after a success, its content expiring
 * (generation.content_expired, here 2 s after it: RESULT_RETENTION_MS).
 */
describe('webhooks of a refusal and of a content expiry', () => {
  const received: Received[] = [];
  const webhookDelivery = { allowCidrs: ['127.0.0.1/32'], extraCa: [] as string[] };
  let receiver: TestServer;
  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    webhookDelivery.extraCa.push(certificate.cert);
    receiver = await startTestServer(
      (request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          received.push({
            headers: request.headers as Record<string, string>,
            body: Buffer.concat(chunks).toString('utf8'),
          });
          response.writeHead(204).end();
        });
      },
      { tls: certificate },
    );
  });
  afterAll(async () => {
    await receiver?.close();
  });
  const stack = useGenerationStack({
    apiEnv: {
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
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
      webhook: { url: `${receiver.origin}/hook` },
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
      webhook: { url: `${receiver.origin}/hook` },
    });
    expect(response.statusCode, response.body).toBe(402);
    const id = String(response.headers['x-request-id']);
    await expect.poll(typesOf(id, poor), { timeout: 20_000, interval: 200 }).toEqual(['generation.rejected']);
  });
});
