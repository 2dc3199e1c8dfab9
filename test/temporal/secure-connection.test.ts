import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { runAdminCli } from '../support/admin.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { createTestCertificates, type TestCertificates } from '../support/test-certificates.js';
import { startTemporalTlsFront, type TemporalTlsFront } from '../support/temporal-tls-front.js';
import { workerProcesses } from '../support/worker-process.js';

/**
 * Every connection to Temporal (the API's, the worker's two, the admin CLI's) over mTLS with an
 * API key, against a front that refuses anything less, as Temporal Cloud or a secured cluster does.
 */
describe('Temporal over mTLS with an API key', () => {
  const serverName = 'temporal.test';
  const apiKey = `temporal-key-${randomBase62(16)}`;
  const taskQueue = `tls-${randomBase62(8)}`;
  let certificates: TestCertificates;
  let front: TemporalTlsFront;
  let scratch: string;
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;
  let fileSettings: Record<string, string>;
  const workers = workerProcesses(() => ({
    DATABASE_URL: db.url,
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: path.join(scratch, 'results'),
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    SIM_PROVIDER_DELAY_MS: '200',
    PROVIDER_POLL_INTERVAL_MS: '100',
    LOG_LEVEL: 'warn',
    ...fileSettings,
  }));

  beforeAll(async () => {
    certificates = await createTestCertificates(serverName);
    front = await startTemporalTlsFront({ upstream: inject('temporalAddress'), certificates, apiKey });
    scratch = await mkdtemp(path.join(os.tmpdir(), 'temporal-tls-'));
    // The worker and the admin CLI are given files, as a mounted secret would be; the API the PEM text itself.
    const worker = await certificates.client('worker');
    const files = { ca: certificates.ca.cert, cert: worker.cert, key: worker.key };
    for (const [name, pem] of Object.entries(files)) await writeFile(path.join(scratch, `${name}.pem`), pem);
    fileSettings = {
      TEMPORAL_ADDRESS: front.address,
      TEMPORAL_TLS_CA: path.join(scratch, 'ca.pem'),
      TEMPORAL_TLS_CERT: path.join(scratch, 'cert.pem'),
      TEMPORAL_TLS_KEY: path.join(scratch, 'key.pem'),
      TEMPORAL_TLS_SERVER_NAME: serverName,
      TEMPORAL_API_KEY: apiKey,
    };
    db = await createTestDatabase();
    const apiCert = await certificates.client('api');
    api = await startTestApi(db.url, {
      TEMPORAL_ADDRESS: front.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      TEMPORAL_TLS_CA: certificates.ca.cert,
      TEMPORAL_TLS_CERT: apiCert.cert,
      TEMPORAL_TLS_KEY: apiCert.key,
      TEMPORAL_TLS_SERVER_NAME: serverName,
      TEMPORAL_API_KEY: apiKey,
    });
    account = await createPaidAccount(db.pool, { oneTime: 20 });
  });
  afterAll(async () => {
    workers.killAll();
    await api?.close();
    await db?.drop();
    await front?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it('runs a generation end to end, each process presenting its certificate and the key', async () => {
    await workers.start();
    const response = await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'over TLS' });
    expect(response.statusCode).toBe(202);
    const id = response.json().id as string;
    expect((await pollGeneration(api, account.key, id)).status).toBe('succeeded');
    expect(await chargesOf(db.pool, id)).toMatchObject({ debits: 1, refunds: 0, submissions: 1 });

    const shown = await runAdminCli(['generation', '--id', id, '--json'], db.url, fileSettings);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout).workflow).toMatchObject({ step: expect.any(String) });

    const callsBy = (client: string, method: string) =>
      front.calls.filter((call) => call.client === client && call.method.endsWith(`/${method}`));
    // The API started the workflow, the worker polled and completed it, the CLI's query went through.
    expect(callsBy('api', 'ExecuteMultiOperation').length).toBeGreaterThan(0);
    expect(callsBy('worker', 'PollWorkflowTaskQueue').length).toBeGreaterThan(0);
    expect(callsBy('worker', 'QueryWorkflow').length).toBeGreaterThan(0);
    expect(front.calls.every((call) => call.keyAccepted)).toBe(true);
  }, 60_000);

  it('without the API key the API cannot start a generation: 503, nothing charged', async () => {
    const apiCert = await certificates.client('api-without-key');
    const keyless = await startTestApi(db.url, {
      TEMPORAL_ADDRESS: front.address,
      TEMPORAL_TASK_QUEUE: taskQueue,
      TEMPORAL_TLS_CA: certificates.ca.cert,
      TEMPORAL_TLS_CERT: apiCert.cert,
      TEMPORAL_TLS_KEY: apiCert.key,
      TEMPORAL_TLS_SERVER_NAME: serverName,
    });
    try {
      const before = await balanceOf(keyless);
      const response = await createGeneration(keyless, account.key, {
        model: 'lumen-lite',
        prompt: 'no key',
      });
      expect(response.statusCode).toBe(503);
      expect(response.json().error.code).toBe('service_unavailable');
      expect(await balanceOf(keyless)).toBe(before);
      expect(front.calls.some((call) => call.client === 'api-without-key' && !call.keyAccepted)).toBe(true);
    } finally {
      await keyless.close();
    }
  });

  async function balanceOf(service: ApiService): Promise<number> {
    const response = await service.app.inject({
      method: 'GET',
      url: '/v1/credits',
      headers: { authorization: `Bearer ${account.key}` },
    });
    return response.json().credits as number;
  }
});
