import { afterAll, beforeAll } from 'vitest';
import { selfSignedCertificate, startTestServer, type TestServer } from './test-servers.js';

/** One delivery as the receiver got it. */
export interface ReceivedDelivery {
  /** The generation it is about (the body's data.id). */
  generationId: string;
  type: string;
  webhookId: string;
  path: string;
}

export interface WebhookReceiver {
  /** `https://127.0.0.1:PORT`, set once the file's beforeAll ran. */
  origin: string;
  received: ReceivedDelivery[];
  /** Statuses to answer next, in order (then 204). */
  answers: number[];
  /** The worker's delivery policy: loopback allowed, the receiver's certificate trusted. */
  webhookDelivery: { allowCidrs: string[]; extraCa: string[] };
  /** The API's (and console's) settings: loopback allowed, retries 200 ms apart. */
  env: Record<string, string>;
  deliveriesOf(generationId: string): ReceivedDelivery[];
}

/**
 * An HTTPS webhook receiver on loopback for one test file (as WEBHOOK_ALLOW_CIDRS would allow a
 * private receiver): it records each delivery and answers the statuses queued in `answers`.
 * Call inside describe() before useGenerationStack, passing `webhookDelivery` to the worker.
 */
export function useWebhookReceiver(): WebhookReceiver {
  let server: TestServer | undefined;
  const receiver: WebhookReceiver = {
    origin: '',
    received: [],
    answers: [],
    webhookDelivery: { allowCidrs: ['127.0.0.1/32'], extraCa: [] },
    env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_DELAYS_MS: '200,200' },
    deliveriesOf: (id) => receiver.received.filter((r) => r.generationId === id),
  };
  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    receiver.webhookDelivery.extraCa.push(certificate.cert);
    server = await startTestServer(
      (request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            type: string;
            data: { id: string };
          };
          receiver.received.push({
            generationId: body.data.id,
            type: body.type,
            webhookId: String(request.headers['webhook-id']),
            path: request.url ?? '',
          });
          response.writeHead(receiver.answers.shift() ?? 204).end();
        });
      },
      { tls: certificate },
    );
    receiver.origin = server.origin;
  });
  afterAll(() => server?.close());
  return receiver;
}
