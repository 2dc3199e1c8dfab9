import type { Client } from '@temporalio/client';
import { pino } from 'pino';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/service-config.js';
import { getBatch } from '../../src/db/batches.js';
import { NotificationListener } from '../../src/db/notifications.js';
import { createBatch, type BatchCreationDeps } from '../../src/generations/batches/batch-creation.js';
import { wireAdmission, type AdmissionWiring } from '../../src/generations/admission/admission-wiring.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { batchLineAdmission } from '../../src/worker/batch-admission.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { batchLines } from '../support/batches.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startSilentNameServer, type TestNameServer } from '../support/silent-name-server.js';

/**
 * Issue 45 item 5, without HTTP: a batch's create whose workflow start failed (was its answer lost,
 * or was nothing started?), and a line whose webhook host cannot be resolved at its admission.
 * Admission wired from configuration as the API and the worker wire it; names asked of a name
 * server that never answers; workflows started on a task queue no worker polls (nothing runs).
 */
describe('batches at their edges: a lost start answer, DNS away at admission', () => {
  const log = pino({ level: 'silent' });
  let db: TestDatabase;
  let account: TestAccount;
  let silent: TestNameServer;
  let listener: NotificationListener;
  let admission: AdmissionWiring;
  const started: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 10_000 });
    silent = await startSilentNameServer();
    const config = loadConfig({
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `batch-edges-${randomBase62(8)}`,
      WEBHOOK_DNS_SERVERS: silent.address,
      WEBHOOK_DNS_TIMEOUT_MS: '300',
    });
    listener = new NotificationListener(config.DATABASE_URL, log);
    admission = wireAdmission(config, { pool: db.pool, listener, logger: log });
    await listener.start();
    await admission.start();
  });

  afterAll(async () => {
    for (const id of started)
      await admission.temporal.workflow
        .getHandle(id)
        .terminate('test over')
        .catch(() => undefined);
    await admission?.close();
    await listener?.close();
    await silent?.close();
    await db?.drop();
  });

  type Start = (...args: unknown[]) => Promise<unknown>;
  /** The admission's Temporal client, its workflow starts replaced by `start` (given the real one). */
  const withStart = (
    start: (real: Start, ...args: unknown[]) => Promise<unknown>,
    options: { describable?: boolean } = {},
  ): Client => {
    const real = admission.temporal;
    const workflow = new Proxy(real.workflow, {
      get: (target, property) =>
        property === 'start'
          ? (...args: unknown[]) => start(target.start.bind(target) as Start, ...args)
          : property === 'getHandle' && options.describable === false
            ? () => ({ describe: () => Promise.reject(new Error('Temporal cannot say')) })
            : (Reflect.get(target, property) as unknown),
    });
    return new Proxy(real, {
      get: (target, property) => (property === 'workflow' ? workflow : Reflect.get(target, property)),
    });
  };

  const create = (temporal: Client) => {
    const deps: BatchCreationDeps = {
      ...admission.deps,
      temporal,
      pool: db.pool,
      maxLines: 100,
      linesInFlight: 5,
    };
    return createBatch(deps, {
      principal: { accountId: account.accountId, keyId: account.keyId },
      idempotencyKey: undefined,
      envelope: () => ({}),
      lines: batchLines(3),
      lineField: (i) => `requests[${i}]`,
    });
  };

  it('a start whose answer was lost: Temporal has the workflow, so the batch is created (201), not refused (503)', async () => {
    const lossy = withStart(async (start, ...args) => {
      const handle = (await start(...args)) as { workflowId: string };
      started.push(handle.workflowId);
      throw new Error('the answer was lost on its way back');
    });
    const { batch, created } = await create(lossy);
    expect(created).toBe(true);
    expect(await getBatch(db.pool, account.accountId, batch.id)).toMatchObject({
      id: batch.id,
      line_count: 3,
    });
    expect(started.at(-1)).toBe(batch.workflow_id);
    const described = await admission.temporal.workflow.getHandle(batch.workflow_id).describe();
    expect(described.status.name).toBe('RUNNING');
  });

  it('a start whose answer was lost, Temporal unable to say: the batch its workflow moved on is not taken back, and created', async () => {
    const lossy = withStart(
      async (start, ...args) => {
        const handle = (await start(...args)) as { workflowId: string };
        started.push(handle.workflowId);
        // What the workflow's first step does, before the API looks.
        await db.pool.query(sql.unsafe`
          UPDATE batches SET status = 'in_progress', started_at = now() WHERE workflow_id = ${handle.workflowId}`);
        throw new Error('the answer was lost on its way back');
      },
      { describable: false },
    );
    const { batch, created } = await create(lossy);
    expect(created).toBe(true);
    expect(await getBatch(db.pool, account.accountId, batch.id)).toMatchObject({ status: 'in_progress' });
  });

  it('a start that did not happen: 503, and the batch without a key is taken back', async () => {
    const refusing = withStart(() => Promise.reject(new Error('Temporal is away')));
    const batches = () =>
      db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM batches WHERE account_id = ${account.accountId}`);
    const before = await batches();
    await expect(create(refusing)).rejects.toMatchObject({ code: 'service_unavailable', status: 503 });
    expect(await batches()).toBe(before);
  });

  it("a line whose webhook host's name servers do not answer at its admission is tried later, not refused for good", async () => {
    const lines = batchLineAdmission(admission.deps, log);
    const line = (url: string) => ({
      accountId: account.accountId,
      apiKeyId: account.keyId,
      batchId: 'batch_dnsaway',
      line: {
        line: 0,
        customId: 'hooked',
        request: { model: 'lumen-lite', prompt: 'a harbour', webhook: { url } },
      },
    });
    const asked = silent.asked.length;
    expect(await lines.admit(line('https://hooks.silent.example.com/batch'))).toEqual({ outcome: 'later' });
    expect(silent.asked.length).toBeGreaterThan(asked);
    // A host that is not at a public address is still refused for good: that is no passing failure.
    expect(await lines.admit(line('https://10.1.2.3/batch'))).toMatchObject({
      outcome: 'refused',
      error: { code: 'invalid_request' },
    });
  });
});
