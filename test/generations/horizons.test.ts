import { WithStartWorkflowOperation } from '@temporalio/client';
import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { startTcpRelay } from '../support/tcp-relay.js';
import { z } from 'zod';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { admitUpdate, generationWorkflow } from '../../src/workflows/generation-workflow.js';
import { createDatabasePool } from '../../src/db/pool.js';
import { startTestApi } from '../support/api.js';
import { useGenerationStack } from '../support/stack.js';
import { startTestWorker } from '../support/worker.js';
import { createGeneration, generationStart, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';

/**
 * No step retries forever: each gives up at its horizon (set to seconds here), and what giving up
 * means depends on where the generation stands — refused before the debit, refunded after it.
 */
describe('step horizons and failures no retry can fix', () => {
  const stack = useGenerationStack({
    apiEnv: {
      ADMISSION_HORIZON_MS: '1500',
      SUBMIT_HORIZON_MS: '2500',
      PROVIDER_WAIT_HORIZON_MS: '2000',
      PERSIST_HORIZON_MS: '2500',
    },
    account: { oneTime: 1000 },
  });
  const horizons = {
    admissionMs: 1500,
    submitMs: 2500,
    providerWaitMs: 2000,
    persistMs: 2500,
    bookkeepingMs: 60_000,
  };
  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode).toBe(202);
    return response.json().id as string;
  };
  const finish = (id: string) => pollGeneration(stack.api, stack.account.key, id, undefined, 30_000);

  it('a provider that never accepts the job: refunded at the submit horizon, generation_timed_out', async () => {
    const id = await create('nobody home [sim:unreachable]');
    expect(await finish(id)).toMatchObject({
      status: 'failed',
      credits: 2,
      credits_refunded: true,
      error: { code: 'generation_timed_out' },
    });
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 0 });
  });

  it('a job that never ends: refunded at the provider-wait horizon', async () => {
    const started = Date.now();
    const id = await create('forever [sim:slow=600]');
    expect(await finish(id)).toMatchObject({
      status: 'failed',
      credits_refunded: true,
      error: { code: 'generation_timed_out', message: expect.stringContaining('did not finish') },
    });
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });

  it('a result that can never be fetched: refunded at the persistence horizon; a passing fault still succeeds', async () => {
    const lost = await create('unreachable result [sim:persist-fail=1000]');
    const flaky = await create('flaky result [sim:persist-fail=1]');
    expect(await finish(lost)).toMatchObject({
      status: 'failed',
      credits_refunded: true,
      output: null,
      error: { code: 'generation_timed_out', message: expect.stringContaining('could not be copied') },
    });
    expect(await finish(flaky)).toMatchObject({ status: 'succeeded', credits_refunded: false });
    expect(await chargesOf(stack.db.pool, lost)).toMatchObject({ debits: 1, refunds: 1, net: 0 });
  });

  /** Update-with-start as the API does it, with a start the API would never send (an older API, a bug). */
  async function admitDirectly(start: GenerationStart) {
    const started = Date.now();
    const result = await stack.client.workflow.executeUpdateWithStart(admitUpdate, {
      updateId: `admit-${start.workflowId}`,
      startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
        workflowId: start.workflowId,
        taskQueue: stack.worker.taskQueue,
        args: [start],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
    const handle = stack.client.workflow.getHandle(start.workflowId);
    await handle.result().catch(() => undefined);
    return { result, ms: Date.now() - started, closed: (await handle.describe()).status.name };
  }
  const rowCount = (id: string) =>
    stack.db.pool.oneFirst(
      sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM generations WHERE id = ${id}`,
    );

  it('admission with data PostgreSQL cannot store: refused as invalid at once, nothing charged, no workflow left', async () => {
    const start = {
      ...generationStart(stack.account, 'nul \u0000 inside'),
      timing: { ...generationStart(stack.account, '').timing, horizons },
    };
    const { result, ms, closed } = await admitDirectly(start);
    expect(result.admission).toMatchObject({
      outcome: 'rejected',
      error: { code: 'invalid_request' },
      claimsKey: false,
    });
    expect(ms).toBeLessThan(1500);
    expect(closed).toBe('COMPLETED');
    expect(await rowCount(start.generationId)).toBe(0);
    expect(await chargesOf(stack.db.pool, start.generationId)).toMatchObject({ debits: 0 });
  });

  it('admission that hits a bug: refused as an internal error at once, the run ends failed for operators', async () => {
    // A price the catalog does not have (the API would have refused the option): no retry can quote it.
    const start = {
      ...generationStart(stack.account, 'an unpriceable option'),
      model: 'lumen-pro',
      input: { prompt: 'an unpriceable option', resolution: '16K' },
    };
    start.timing = { ...start.timing, horizons };
    const { result, ms, closed } = await admitDirectly(start);
    expect(result.admission).toMatchObject({
      outcome: 'rejected',
      error: { code: 'internal_error' },
      claimsKey: false,
    });
    expect(ms).toBeLessThan(1500);
    expect(closed).toBe('FAILED');
    expect(await rowCount(start.generationId)).toBe(0);
  });

  it('a POST whose admission cannot reach PostgreSQL: 503 within seconds, nothing charged, no workflow left', async () => {
    // A worker that reaches PostgreSQL through a relay, which then goes away, and an API that sends it its generations.
    const target = new URL(stack.db.url);
    const relay = await startTcpRelay({ host: target.hostname, port: Number(target.port) });
    const url = new URL(stack.db.url);
    url.port = String(relay.port);
    const deadPool = await createDatabasePool(url.href, { maximumPoolSize: 1 });
    const worker = await startTestWorker(deadPool);
    await relay.close();
    const api = await startTestApi(stack.db.url, {
      ...worker.apiEnv,
      ADMISSION_HORIZON_MS: '1500',
      ADMISSION_TIMEOUT_MS: '10000',
    });
    try {
      const started = Date.now();
      const response = await createGeneration(
        api,
        stack.account.key,
        { model: 'lumen-lite', prompt: 'while the database is away' },
        'db-away',
      );
      expect(response.statusCode).toBe(503);
      expect(response.json().error.code).toBe('service_unavailable');
      expect(Date.now() - started).toBeLessThan(6_000);
      const id = String(response.headers['x-request-id']);
      expect(await rowCount(id)).toBe(0);
      const runs = stack.client.workflow.list({
        query: `WorkflowType = 'generationWorkflow' AND TaskQueue = '${worker.taskQueue}'`,
      });
      const statuses: string[] = [];
      for await (const run of runs) statuses.push(run.status.name);
      expect(statuses.length).toBeGreaterThan(0);
      expect(statuses).not.toContain('RUNNING');
    } finally {
      await api.close();
      await worker.close();
      await deadPool.end();
    }
  });
});
