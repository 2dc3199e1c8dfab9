import type { LookupAddress } from 'node:dns';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { deliveryAttemptsOf } from '../../src/db/webhook-delivery-reads.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/process/logger.js';
import type { Resolve } from '../../src/net/pinned-connection.js';
import type { Provider } from '../../src/providers/provider.js';
import { trackHealth } from '../../src/worker/provider-health-tracker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';
import { selfSignedCertificate, startTestServer, type TestServer } from '../support/test-servers.js';
import { waitFor } from '../support/wait.js';
import { deliveriesEnded as deliveriesEndedOf } from './deliveries-ended.js';
import { useWebhookReceiver } from './webhook-receiver.js';

/**
 * Two guarantees of issue 30 §3 through a real worker: the outbound rules are "checked at
 * admission and again at each delivery (DNS can change)", and "a receiver's failures never count
 * against a provider's health or affect the generation".
 */
describe('webhook deliveries under the outbound rules and apart from provider health', () => {
  // Loopback allowed to the API's admission check whichever way the system resolves `localhost`.
  const apiEnv = { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32,::1/128', WEBHOOK_RETRY_DELAYS_MS: '200,200' };
  const hooks = useWebhookReceiver();
  const { deliveriesOf } = hooks;
  /**
   * The worker's resolver for `localhost` (the name the test certificate is for): the answers
   * queued here, in turn, then 127.0.0.2, a loopback address the worker does not allow (only
   * 127.0.0.1/32 is: it stands for the receiver's public address).
   */
  const answers: string[][] = [];
  const asked: string[] = [];
  const resolve: Resolve = (hostname, _options, callback) => {
    asked.push(hostname);
    const addresses = hostname === 'localhost' ? (answers.shift() ?? ['127.0.0.2']) : [];
    setImmediate(() =>
      callback(
        null,
        addresses.map((address): LookupAddress => ({ address, family: 4 })),
      ),
    );
  };
  /** Where the rebound name points (the receiver's port, on 127.0.0.2): it must never see a connection. */
  let rebound: TestServer;
  let simulated: Provider;
  const stack = useGenerationStack({
    apiEnv,
    worker: {
      simDelayMs: 100,
      wrapProvider: (provider) => (simulated = provider),
      overrides: { webhookDelivery: { ...hooks.webhookDelivery, resolve } },
    },
  });
  beforeAll(async () => {
    rebound = await startTestServer((_request, response) => void response.writeHead(204).end(), {
      tls: await selfSignedCertificate(),
      host: '127.0.0.2',
      port: Number(new URL(hooks.origin()).port),
    });
    // As the worker does: the provider's calls counted in provider_health, down after 2 failures in a row.
    const tracked = trackHealth(
      'simulated',
      simulated,
      stack.db.pool,
      { downAfter: 2, probeIntervalMs: 60_000 },
      createLogger('provider-health-test', 'silent'),
    );
    stack.worker.deps.providerFor = () => tracked;
  });
  afterAll(async () => {
    await rebound?.close();
  });

  const create = async (prompt: string, webhook?: unknown) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt,
      ...(webhook ? { webhook } : {}),
    });
    expect(response.statusCode, response.body).toBe(202);
    return z.object({ id: z.string() }).parse(response.json()).id;
  };
  const deliveriesEnded = (id: string) => deliveriesEndedOf(stack.client, id);
  const attemptsOf = async (id: string) =>
    (await deliveryAttemptsOf(stack.db.pool, id)).map((a) => [a.event_type, a.attempt, a.status, a.outcome]);

  it('checks the address again at each delivery: a name that rebinds to one not allowed gets nothing', async () => {
    // Admission resolved the name itself (the system's resolver: loopback, allowed to the API), the
    // first delivery finds it on the allowed address too, the next ones on 127.0.0.2.
    answers.push(['127.0.0.1']);
    const url = `https://localhost:${new URL(hooks.origin()).port}/ok?rebinding`;
    const id = await create('a weathervane', {
      url,
      events: ['generation.created', 'generation.succeeded'],
    });
    await deliveriesEnded(id);
    expect(deliveriesOf(id).map((d) => JSON.parse(d.body).type)).toEqual(['generation.created']);
    // Refused before connecting, at each attempt of the schedule (1 + 2 retries), then given up.
    expect(rebound.connections).toBe(0);
    expect(asked.filter((name) => name === 'localhost')).toHaveLength(4);
    expect(await attemptsOf(id)).toEqual([
      ['generation.created', 1, 204, 'delivered'],
      ['generation.succeeded', 1, null, 'failed'],
      ['generation.succeeded', 2, null, 'failed'],
      ['generation.succeeded', 3, null, 'failed'],
    ]);
    const errors = (await deliveryAttemptsOf(stack.db.pool, id)).map((a) => a.error);
    expect(errors.slice(1)).toEqual(
      Array(3).fill(
        `https://localhost:${new URL(hooks.origin()).port} resolves to an address we never fetch (loopback)`,
      ),
    );
    // The generation itself is not affected.
    expect((await pollGeneration(stack.api, stack.account.key, id)).status).toBe('succeeded');
  });

  it("a receiver's failures (500s, refused connections, timeouts) leave provider health alone", async () => {
    const health = () =>
      stack.db.pool.any(
        sql.type(
          z.object({
            provider: z.string(),
            state: z.string(),
            consecutive_failures: z.number(),
            last_error: z.string().nullable(),
            last_failure_at: z.unknown(),
          }),
        )`SELECT provider, state, consecutive_failures, last_error, last_failure_at
            FROM provider_health ORDER BY provider`,
      );
    const before = await health();
    const closed = `https://127.0.0.1:${await freePort()}/hook`;
    // Only the success subscribed to: the delivery workflow ends with it (not 30 days on, at expiry).
    const events = ['generation.succeeded'];
    const failing = [
      await create('a kite', { url: `${hooks.origin()}/fail`, events }),
      await create('a sail', { url: `${hooks.origin()}/fail?again`, events }),
      await create('a flag', { url: closed, events }),
    ];
    const hung = await create('a buoy', { url: `${hooks.origin()}/hang` });
    for (const id of failing) await deliveriesEnded(id);
    // 6 answers of 500 and 3 refused connections, each 2 or more in a row: a provider's would take it down.
    for (const id of failing)
      expect((await deliveryAttemptsOf(stack.db.pool, id)).map((a) => a.outcome)).toEqual([
        'failed',
        'failed',
        'failed',
      ]);
    // The hung receiver's first attempt ends at its 15 s deadline.
    const [timedOut] = await waitFor(async () => {
      const attempts = await deliveryAttemptsOf(stack.db.pool, hung);
      return attempts.length > 0 && attempts;
    }, 25_000);
    expect(timedOut).toMatchObject({
      status: null,
      outcome: 'failed',
      error: expect.stringMatching(/in time/),
    });

    expect(await health()).toEqual(before);
    expect(stack.api.providers.retryAfterSeconds('simulated')).toBeNull();
    for (const id of [...failing, hung])
      expect((await pollGeneration(stack.api, stack.account.key, id)).status).toBe('succeeded');
    // A generation POSTed afterwards is admitted (no 503) and served.
    const after = await create('a compass');
    expect((await pollGeneration(stack.api, stack.account.key, after)).status).toBe('succeeded');
    expect(await health()).toEqual(before);
  }, 60_000);
});
