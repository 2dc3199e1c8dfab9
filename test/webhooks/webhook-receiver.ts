import type http from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * An HTTPS webhook receiver on loopback for the webhook tests, and the worker's delivery policy that
 * reaches it (loopback allowed as WEBHOOK_ALLOW_CIDRS would, its certificate trusted): pass
 * `webhookDelivery` to the worker's overrides. Call it inside describe(), before useGenerationStack.
 * Paths: /hang is never answered (until the file ends), /gone answers 410, /fail always 500, /flaky
 * answers `flaky` in order then 200; a path in `routes` is answered by its handler; any other 204.
 */
export function useWebhookReceiver() {
  const received: Received[] = [];
  const hanging: http.ServerResponse[] = [];
  const flaky: number[] = [];
  /** Paths answered by the test itself (after the request is recorded in `received`). */
  const routes = new Map<string, (received: Received, response: http.ServerResponse) => void>();
  const webhookDelivery = { allowCidrs: ['127.0.0.1/32'], extraCa: [] as string[] };
  let server: TestServer | undefined;
  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    webhookDelivery.extraCa.push(certificate.cert);
    server = await startTestServer(
      (request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const path = new URL(request.url ?? '/', 'https://x').pathname;
          const delivery = {
            path,
            headers: request.headers as Record<string, string>,
            body: Buffer.concat(chunks).toString('utf8'),
          };
          received.push(delivery);
          const route = routes.get(path);
          if (route) route(delivery, response);
          else if (path === '/hang') hanging.push(response);
          else if (path === '/gone') response.writeHead(410).end();
          else if (path === '/fail') response.writeHead(500).end();
          else if (path === '/flaky') response.writeHead(flaky.shift() ?? 200).end();
          else response.writeHead(204).end();
        });
      },
      { tls: certificate },
    );
  });
  afterAll(async () => {
    for (const response of hanging) response.destroy();
    await server?.close();
  });
  return {
    received,
    hanging,
    flaky,
    routes,
    webhookDelivery,
    /** `https://127.0.0.1:PORT`. */
    origin: () => server!.origin,
    /** The deliveries of generation `id`, in the order they came. */
    deliveriesOf: (id: string) =>
      received.filter((r) => (JSON.parse(r.body) as { data: { id: string } }).data.id === id),
    until: async (check: () => boolean, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline) throw new Error('timed out');
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    /** Time for anything late (a duplicate, an unwanted retry) to arrive. */
    settle: () => new Promise((r) => setTimeout(r, 1500)),
  };
}
