import { rm, writeFile } from 'node:fs/promises';
import type http from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { deliveryAttemptsOf } from '../../src/db/webhook-delivery-reads.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration } from '../support/generations.js';
import {
  keepingRequests,
  selfSignedCertificate,
  startTestServer,
  type TestServer,
} from '../support/test-servers.js';
import { crash, workerProcesses } from '../support/worker-process.js';

interface Received {
  headers: Record<string, string>;
  body: string;
}

/**
 * The real worker process (`npm run worker`) SIGKILLed while a webhook delivery is in flight (the
 * receiver holds the request), then started again: the delivery is still made, the receiver sees
 * it at most twice, with the same webhook-id each time.
 */
describe('a worker killed mid-delivery', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let receiver: TestServer;
  const taskQueue = `hookkill-${randomBase62(8)}`;
  const caFile = `/tmp/hookkill-ca-${taskQueue}.pem`;
  const received: Received[] = [];
  const held: http.ServerResponse[] = [];
  const storageDir = `/tmp/hookkill-results-${taskQueue}`;
  const workers = workerProcesses(() => ({
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    SIM_PROVIDER_DELAY_MS: '200',
    LOG_LEVEL: 'warn',
    // The receiver is on loopback, its certificate trusted the way an operator's own CA would be.
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
    NODE_EXTRA_CA_CERTS: caFile,
  }));

  beforeAll(async () => {
    const certificate = await selfSignedCertificate();
    await writeFile(caFile, certificate.cert);
    receiver = await startTestServer(
      keepingRequests(received, (response) => {
        // The first delivery is held unanswered: the worker making it is killed meanwhile.
        if (received.length === 1) held.push(response);
        else response.writeHead(200).end();
      }),
      { tls: certificate },
    );
    db = await createTestDatabase();
    api = await startTestApi(db.url, {
      TEMPORAL_TASK_QUEUE: taskQueue,
      PROVIDER_POLL_INTERVAL_MS: '100',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_RETRY_DELAYS_MS: '200,200,200',
    });
    account = await createPaidAccount(db.pool, { oneTime: 20 });
  });
  afterAll(async () => {
    workers.killAll();
    for (const response of held) response.destroy();
    await receiver?.close();
    await rm(storageDir, { recursive: true, force: true });
    await rm(caFile, { force: true });
    await api?.close();
    await db?.drop();
  });

  it('delivers after the restart: at most one duplicate, the same webhook-id, verified', async () => {
    const first = await workers.start();
    const response = await createGeneration(api, account.key, {
      model: 'lumen-lite',
      prompt: 'a delivery through a crash',
      webhook: { url: `${receiver.origin}/hook`, events: ['generation.succeeded'] },
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = z.object({ id: z.string() }).parse(response.json()).id;
    await expect.poll(() => received.length, { timeout: 30_000 }).toBe(1);
    await crash(first);

    await workers.start();
    // The lost attempt is known when its 30 s run ends; the retry follows 200 ms later.
    await expect.poll(() => received.length, { timeout: 90_000, interval: 200 }).toBeGreaterThanOrEqual(2);
    await new Promise((r) => setTimeout(r, 1500));
    expect(received).toHaveLength(2);
    const ids = received.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(1);
    const { secret } = z
      .object({ secret: z.string() })
      .parse(
        (
          await api.app.inject({ method: 'GET', url: '/v1/webhooks/secret', headers: bearer(account.key) })
        ).json(),
      );
    for (const delivery of received)
      expect(new Webhook(secret).verify(delivery.body, delivery.headers)).toMatchObject({
        type: 'generation.succeeded',
        data: { id },
      });
    // The attempt the killed worker made left no record (it never finished); the one after did.
    const attempts = await deliveryAttemptsOf(db.pool, id);
    expect(attempts.map((a) => [a.status, a.outcome])).toEqual([[200, 'delivered']]);
  }, 150_000);
});
