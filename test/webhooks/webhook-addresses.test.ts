import { readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CommonQueryMethods } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import { developmentDefaults } from '../../src/dev/start-banner.js';
import { createLogger } from '../../src/process/logger.js';
import { outboundPost } from '../../src/net/outbound-post.js';
import { activityDeps } from '../../src/worker/worker-deps.js';
import { bearer, startTestApi } from '../support/api.js';
import { createGeneration } from '../support/generations.js';
import { startSilentNameServer, type TestNameServer } from '../support/silent-name-server.js';
import { useGenerationStack } from '../support/stack.js';
import { keepingRequests, startTestServer, type TestServer } from '../support/test-servers.js';

/** The worker's webhook delivery settings as `npm run worker` builds them from `env`. */
const workerWebhookDelivery = (env: Record<string, string>) =>
  activityDeps(
    loadConfig({ DATABASE_URL: 'postgres://u:p@db:5432/app', TEMPORAL_ADDRESS: 'temporal:7233', ...env }),
    {} as CommonQueryMethods,
    createLogger('test', 'silent'),
    { temporal: () => Promise.reject(new Error('not used')) },
  ).deps.webhookDelivery!;

/**
 * Where a customer's webhook may go (issue 35 §4, §7): the public internet only, whatever the
 * operator opened for the service's own fetches (OUTBOUND_ALLOW_CIDRS); names resolved with a time
 * limit, off libuv's thread pool; and on a developer's machine (`npm start`'s settings), a plain
 * http receiver on loopback. One stack with npm start's settings (API and worker), and beside it an
 * API with production's, on the same database.
 */
describe("webhook receivers: the public internet, or a developer's loopback", () => {
  const development: Record<string, string> = {};
  developmentDefaults(development);
  /** A plain-http receiver on loopback, as a developer runs one (`http://localhost:3000/hook`). */
  let receiver: TestServer;
  const received: Array<{ headers: Record<string, string>; body: string }> = [];
  let silent: TestNameServer;
  /** Production's rules: loopback opened for the service's fetches only, names asked of `silent`. */
  let production: ApiService;
  const stack = useGenerationStack({
    apiEnv: development,
    worker: { overrides: { webhookDelivery: workerWebhookDelivery(development) } },
  });
  beforeAll(async () => {
    receiver = await startTestServer(keepingRequests(received));
    silent = await startSilentNameServer();
    production = await startTestApi(stack.db.url, {
      ...stack.worker.apiEnv,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32,::1/128',
      WEBHOOK_DNS_SERVERS: silent.address,
      WEBHOOK_DNS_TIMEOUT_MS: '2000',
    });
  });
  afterAll(async () => {
    await production?.close();
    await receiver?.close();
    await silent?.close();
  });

  const quote = (api: ApiService, webhook: unknown) =>
    api.app.inject({
      method: 'POST',
      url: '/v1/generations/quote',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
      payload: JSON.stringify({ model: 'lumen-lite', prompt: 'a pier', webhook }),
    });
  const issuesOf = (response: { json: () => unknown }) =>
    z.object({ issues: z.array(z.object({ field: z.string(), message: z.string() })) }).parse(response.json())
      .issues;

  it('OUTBOUND_ALLOW_CIDRS does not open webhooks: the API refuses a receiver there, the worker sends it nothing', async () => {
    const url = `https://127.0.0.1:${new URL(receiver.origin).port}/hook`;
    for (const response of [
      await quote(production, { url }),
      await createGeneration(production, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'a pier',
        webhook: { url },
      }),
    ]) {
      expect(response.statusCode, response.body).toBe(400);
      expect(issuesOf(response)).toEqual([
        { field: 'webhook.url', message: expect.stringMatching(/address we never fetch \(loopback\)/) },
      ]);
    }
    const env = { OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32' };
    const refused = await outboundPost(
      url,
      { body: Buffer.from('{}'), headers: {} },
      { timeoutMs: 5_000, ...workerWebhookDelivery(env) },
    ).then(
      (status) => expect.unreachable(`sent (${status})`),
      (error: unknown) => error as { code: string },
    );
    expect(refused.code).toBe('forbidden_address');
    expect(receiver.connections).toBe(0);
    // WEBHOOK_ALLOW_CIDRS is the one that does.
    expect(workerWebhookDelivery({ ...env, WEBHOOK_ALLOW_CIDRS: '10.20.0.0/16' }).allowCidrs).toEqual([
      '10.20.0.0/16',
    ]);
  });

  it('a name under a name server that drops queries: a 400 within the time limit, the thread pool free meanwhile', async () => {
    const started = Date.now();
    // More names than libuv has threads (4): were each held by getaddrinfo, a file write would wait.
    const names = Array.from({ length: 8 }, (_, i) => `hooks-${i}.silent.example.com`);
    const answers = names.map((name) => quote(production, { url: `https://${name}/hook` }));
    let settled = 0;
    for (const answer of answers) void answer.then(() => settled++);
    await expect.poll(() => new Set(silent.asked).size).toBeGreaterThanOrEqual(names.length);
    const file = path.join(os.tmpdir(), `pool-${process.pid}-${Date.now()}.txt`);
    await writeFile(file, 'the pool is free');
    expect(await readFile(file, 'utf8')).toBe('the pool is free');
    await rm(file);
    // The file was written and read while every name was still being asked.
    expect(settled).toBe(0);
    for (const response of await Promise.all(answers)) {
      expect(response.statusCode, response.body).toBe(400);
      expect(issuesOf(response)).toEqual([
        {
          field: 'webhook.url',
          message: 'Its host name did not resolve in time (its name servers did not answer).',
        },
      ]);
    }
    // Bounded by WEBHOOK_DNS_TIMEOUT_MS (2 s), not by the system resolver's retries.
    expect(Date.now() - started).toBeLessThan(8_000);
  });

  it("npm start's settings: a plain-http receiver on loopback gets a delivery that verifies; production's refuse it", async () => {
    const url = `http://localhost:${new URL(receiver.origin).port}/hook`;
    const secret = z.object({ secret: z.string() }).parse(
      (
        await stack.api.app.inject({
          method: 'GET',
          url: '/v1/webhooks/secret',
          headers: bearer(stack.account.key),
        })
      ).json(),
    ).secret;
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a pier at night',
      webhook: { url, events: ['generation.succeeded'] },
    });
    expect(created.statusCode, created.body).toBe(202);
    const { id } = z.object({ id: z.string() }).parse(created.json());
    await expect.poll(() => received.length, { timeout: 20_000 }).toBe(1);
    const event = new Webhook(secret).verify(received[0]!.body, received[0]!.headers);
    expect(event).toMatchObject({ type: 'generation.succeeded', data: { id } });
    // Without the development setting, the same URL is refused (http, and loopback).
    const refused = await quote(production, { url });
    expect(refused.statusCode).toBe(400);
    expect(issuesOf(refused)).toEqual([
      { field: 'webhook.url', message: expect.stringMatching(/^http URLs/) },
    ]);
    // With it, plain http is for loopback only.
    const elsewhere = await quote(stack.api, { url: 'http://93.184.215.14/hook' });
    expect(elsewhere.statusCode).toBe(400);
    expect(issuesOf(elsewhere)[0]!.message).toMatch(/loopback only/);
  });
});
