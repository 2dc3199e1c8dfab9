import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { pino } from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { afterAll, beforeAll, inject } from 'vitest';
import { createApiService, type ApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config.js';
import { freePort } from '../../src/dev/free-port.js';
import { createLogger } from '../../src/logger.js';
import { activityDeps } from '../../src/worker/worker-deps.js';
import { bearer, createPaidAccount, type TestAccount } from './api.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { importExampleCatalog } from './example-catalog.js';
import { workflowIdOf } from './ledger.js';
import { scrape } from './prometheus.js';
import { waitFor } from './wait.js';
import { chainHistory } from './workflow-runs.js';
import { startTestWorker, type TestWorker } from './worker.js';

/**
 * A generation stack whose provider pushes: the real API listening on a loopback port (the
 * provider stand-in's webhooks reach it there), a worker whose submits send that origin as
 * PROVIDER_WEBHOOK_BASE_URL, the API's metrics on a port of their own, and its log lines kept.
 */
export interface PushStack {
  db: TestDatabase;
  worker: TestWorker;
  api: ApiService;
  /** The API's origin: PROVIDER_WEBHOOK_BASE_URL. */
  origin: string;
  account: TestAccount;
  client: Client;
  /** The API's log lines (info and above), parsed. */
  logs: Array<Record<string, unknown>>;
}

export interface PushStackOptions {
  /** The stand-in's variables (its `env()`), asked once it has started. */
  providerEnv: () => Record<string, string>;
  /** The example catalog to import, and a model of it to wait for (the API offers it once it hears). */
  catalog: 'fal' | 'replicate';
  model: string;
  /** Added to the API's and the worker's configuration. */
  env?: Record<string, string>;
}

export function usePushStack(options: PushStackOptions): PushStack & {
  /** The providerJobEnded signals in the generation's workflow history, decoded. */
  signals(generationId: string): Promise<unknown[]>;
  /** provider_webhooks_total for the provider and outcome, as the API's metrics port says now. */
  webhooks(provider: string, outcome: string): Promise<number>;
  /** The job the generation recorded (`replicate:…`, `fal:…`), or null. */
  recordedJob(generationId: string): Promise<string | null>;
  /** POSTs a delivery to the API's provider-webhook route as a provider would. */
  deliver(
    path: string,
    headers: Record<string, string>,
    body: string,
  ): Promise<{ status: number; body: any }>;
} {
  const stack = {} as PushStack;
  let metricsOrigin = '';
  let connection: Connection | undefined;
  beforeAll(async () => {
    stack.db = await createTestDatabase();
    stack.worker = await startTestWorker(stack.db.pool);
    const metricsPort = await freePort();
    metricsOrigin = `http://127.0.0.1:${metricsPort}`;
    const env = {
      DATABASE_URL: stack.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      DATABASE_POOL_SIZE: '5',
      RATE_LIMIT_PER_MINUTE: '1000000',
      ...stack.worker.apiEnv,
      ...options.providerEnv(),
      // The stand-ins serve their output files on 127.0.0.1.
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      ...options.env,
    };
    stack.logs = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void stack.logs.push(JSON.parse(line) as Record<string, unknown>) },
    );
    stack.api = await createApiService(loadConfig({ ...env, METRICS_PORT: String(metricsPort) }), logger);
    await stack.api.app.listen({ host: '127.0.0.1', port: 0 });
    stack.origin = `http://127.0.0.1:${(stack.api.app.server.address() as AddressInfo).port}`;
    // The worker's providers and webhook URL, as worker-deps builds them from configuration.
    connection = await Connection.connect({ address: inject('temporalAddress') });
    stack.client = new Client({ connection });
    const { deps } = activityDeps(
      loadConfig({ ...env, PROVIDER_WEBHOOK_BASE_URL: stack.origin }),
      stack.db.pool,
      createLogger('worker-test', 'silent'),
      { temporal: () => Promise.resolve(stack.client) },
    );
    Object.assign(stack.worker.deps, {
      providerFor: deps.providerFor,
      inFlightCap: deps.inFlightCap,
      providerWebhookBaseUrl: deps.providerWebhookBaseUrl,
    });
    stack.account = await createPaidAccount(stack.db.pool, { oneTime: 1000 });
    await importExampleCatalog(stack.db.pool, options.catalog);
    await waitFor(async () => {
      const models = await stack.api.app.inject({ url: '/v1/models', headers: bearer(stack.account.key) });
      return (models.json().data as Array<{ id: string }>).some((m) => m.id === options.model);
    }, 10_000);
  });
  afterAll(async () => {
    await connection?.close();
    await stack.api?.close();
    await stack.worker?.close();
    await stack.db?.drop();
  });
  return Object.assign(stack, {
    async signals(generationId: string) {
      const history = await chainHistory(stack.client, await workflowIdOf(stack.db.pool, generationId));
      return (history.events ?? [])
        .map((event) => event.workflowExecutionSignaledEventAttributes)
        .filter((signaled) => signaled?.signalName === 'providerJobEnded')
        .map((signaled) => defaultPayloadConverter.fromPayload(signaled!.input!.payloads![0]!));
    },
    async recordedJob(generationId: string) {
      return stack.db.pool.maybeOneFirst(
        sql.type(z.object({ provider_job_id: z.string().nullable() }))`
          SELECT provider_job_id FROM generations WHERE id = ${generationId}`,
      );
    },
    async webhooks(provider: string, outcome: string) {
      return (await scrape(metricsOrigin)).value('provider_webhooks_total', { provider, outcome });
    },
    async deliver(path: string, headers: Record<string, string>, body: string) {
      const response = await fetch(`${stack.origin}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON
      }
      return { status: response.status, body: parsed };
    },
  });
}
