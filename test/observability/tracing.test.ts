import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { OtlpReceiver } from '../support/otlp-receiver.js';
import { waitFor } from '../support/wait.js';
import { workerProcesses, type WorkerProcesses } from '../support/worker-process.js';
import { activeRunHistory } from '../support/workflow-runs.js';

// Spans leave in batches; a short delay keeps the test short (read by the batch processor at start;
// put back after the file, whose test process runs other files after it).
vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '100');
afterAll(() => vi.unstubAllEnvs());

/**
 * With OTEL_EXPORTER_OTLP_ENDPOINT set on the API and the worker, one generation is one trace: the
 * POST's server span, the Temporal client's update-with-start, the workflow run and the activities
 * it schedules, exported by both processes to a collector (a loopback OTLP/HTTP receiver).
 */
describe('tracing', () => {
  let receiver: OtlpReceiver;
  let db: TestDatabase;
  let api: ApiService;
  let workers: WorkerProcesses;
  let account: TestAccount;
  let storageDir: string;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    db = await createTestDatabase();
    storageDir = await mkdtemp(path.join(os.tmpdir(), 'tracing-results-'));
    const env = {
      DATABASE_URL: db.url,
      TEMPORAL_TASK_QUEUE: `tracing-${randomBase62(8)}`,
      STORAGE_DIR: storageDir,
      RESULT_BASE_URL: 'http://127.0.0.1:9',
      PROVIDER_POLL_INTERVAL_MS: '50',
      SIM_PROVIDER_DELAY_MS: '100',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    };
    workers = workerProcesses(() => ({ ...env, OTEL_BSP_SCHEDULE_DELAY: '100', LOG_LEVEL: 'warn' }));
    await workers.start();
    api = await startTestApi(db.url, env);
    account = await createPaidAccount(db.pool, { oneTime: 100 });
  });
  afterAll(async () => {
    workers?.killAll();
    await api?.close();
    await db?.drop();
    await receiver?.close();
    if (storageDir) await rm(storageDir, { recursive: true, force: true });
  });

  it('follows a generation from the POST through its workflow to every activity, in one trace', async () => {
    const created = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'a lighthouse' });
    expect(created.statusCode).toBe(202);
    await pollGeneration(api, account.key, created.json().id, (g) => g.status === 'succeeded');

    const postSpan = () =>
      receiver.spans.find((s) => s.service === 'generation-api' && s.name === 'POST /v1/generations');
    const post = await waitFor(() => Promise.resolve(postSpan() ?? null));
    expect(post.attributes['http.route']).toBe('/v1/generations');
    expect(post.parentSpanId).toBeUndefined();
    const inTrace = (name: string) =>
      receiver.spans.find((s) => s.traceId === post.traceId && s.name === name);
    // The workflow's own span (RunWorkflow) ends with the workflow, which holds the key for months.
    const expected = [
      ['generation-api', 'UpdateWithStartWorkflow:admit'],
      ['generation-worker', 'HandleUpdate:admit'],
      ['generation-worker', 'RunActivity:debit'],
      ['generation-worker', 'StartActivity:submit'],
      ['generation-worker', 'RunActivity:submit'],
      ['generation-worker', 'RunActivity:readProviderJob'],
      ['generation-worker', 'RunActivity:persistResults'],
    ];
    await waitFor(() => Promise.resolve(expected.every(([, name]) => inTrace(name!))), 10_000).catch(
      () => undefined,
    );
    expect(expected.map(([service, name]) => [service, name, inTrace(name!)?.service])).toEqual(
      expected.map(([service, name]) => [service, name, service]),
    );
    // Spans made inside the workflow keep their parents: the activity runs under the workflow's
    // StartActivity span, which is itself a child within the trace.
    const startSubmit = inTrace('StartActivity:submit')!;
    expect(startSubmit.parentSpanId).toBeDefined();
    expect(inTrace('RunActivity:submit')!.parentSpanId).toBe(startSubmit.spanId);
    // A traced workflow's history replays: the tracing interceptors add no command of their own.
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const history = await activeRunHistory(new Client({ connection }), `generation-${created.json().id}`);
      await Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history);
    } finally {
      await connection.close();
    }
    // Health checks are not traced.
    await api.app.inject({ url: '/healthz' });
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.spans.filter((s) => String(s.attributes['url.path']).startsWith('/healthz'))).toEqual([]);
  });
});
