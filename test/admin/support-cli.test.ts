import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { runAdminCommand } from '../../src/admin/commands.js';
import type { AdminContext } from '../../src/admin/command.js';
import type { ApiService } from '../../src/api/service.js';
import { progressQuery } from '../../src/workflows/generation-workflow.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, providerJobIdOf, workflowIdOf } from '../support/ledger.js';

describe('support commands', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiService;
  let account: TestAccount;
  let connection: Connection;
  let context: AdminContext;
  const admin = (...argv: string[]) => runAdminCommand(argv, context);

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool);
    api = await startTestApi(db.url, worker.apiEnv);
    account = await createPaidAccount(db.pool, { oneTime: 100 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    const client = new Client({ connection });
    context = { db: db.pool, temporal: () => Promise.resolve(client) };
  });
  afterAll(async () => {
    await connection?.close();
    await api?.close();
    await worker?.close();
    await db?.drop();
  });

  it('finds generations that need review and resolves them', async () => {
    const id = (
      await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'gone quiet [sim:uncertain]' })
    ).json().id as string;
    await pollGeneration(api, account.key, id, (g) => g.error?.code === 'submission_unresolved');
    await expect
      .poll(async () =>
        ((await admin('generations', '--needs-review')).json as Array<{ id: string }>).map((g) => g.id),
      )
      .toContain(id);
    const shown = await admin('generation', '--id', id);
    expect(shown.json).toMatchObject({
      generation: { id, needs_review: true },
      workflow: { step: 'needs_review' },
    });
    await expect(admin('resolve-generation', '--id', id)).rejects.toThrow(/exactly one of/);
    const resolved = await admin(
      'resolve-generation',
      '--id',
      id,
      '--succeed',
      await providerJobIdOf(db.pool, id),
      '--note',
      'found it',
    );
    expect(resolved.text[0]).toMatch(/Resolved .* \(succeed\)/);
    expect(
      (await pollGeneration(api, account.key, id, (g) => g.status === 'succeeded')).credits_refunded,
    ).toBe(false);
    expect(
      ((await admin('generations', '--needs-review')).json as Array<{ id: string }>).map((g) => g.id),
    ).not.toContain(id);
  });

  it('lists generations queued for too long', async () => {
    const id = (
      await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'patience [sim:slow=2]' })
    ).json().id as string;
    expect(
      ((await admin('generations', '--queued-over-minutes', '0')).json as Array<{ id: string }>).map(
        (g) => g.id,
      ),
    ).toContain(id);
    expect(
      ((await admin('generations', '--queued-over-minutes', '60')).json as Array<{ id: string }>).map(
        (g) => g.id,
      ),
    ).not.toContain(id);
    await pollGeneration(api, account.key, id);
  });

  it('resets a workflow to its start without a second debit, submission or refund', async () => {
    const succeeded = (
      await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'again and again' })
    ).json().id as string;
    const failed = (
      await createGeneration(api, account.key, { model: 'lumen-lite', prompt: 'broken [sim:fail]' })
    ).json().id as string;
    await pollGeneration(api, account.key, succeeded);
    await pollGeneration(api, account.key, failed);
    const before = {
      succeeded: await chargesOf(db.pool, succeeded),
      failed: await chargesOf(db.pool, failed),
    };
    const client = await context.temporal();
    for (const id of [succeeded, failed]) {
      const reset = await admin('reset-generation', '--id', id, '--reason', 'test');
      const runId = (reset.json as { runId: string }).runId;
      expect(runId).toBeTruthy();
      const handle = client.workflow.getHandle(await workflowIdOf(db.pool, id), runId);
      await expect
        .poll(async () => (await handle.query(progressQuery)).step, { timeout: 20_000 })
        .toMatch(id === succeeded ? /succeeded/ : /failed/);
    }
    expect(await chargesOf(db.pool, succeeded)).toEqual(before.succeeded);
    expect(await chargesOf(db.pool, failed)).toEqual(before.failed);
    expect(before.succeeded).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    expect(before.failed).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });
});
