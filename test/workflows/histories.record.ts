import { writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { temporalCliPath } from '../../src/dev/temporal-binaries.js';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { fingerprint } from '../../src/generations/generation-request.js';
import { admitUpdate, generationWorkflow, resolveUpdate } from '../../src/workflows/generation-workflow.js';
import { useGenerationStack } from '../support/stack.js';
import { createPaidAccount } from '../support/api.js';
import { createGeneration, generationStart, pollGeneration } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';

const run = promisify(execFile);

/**
 * `npm run record:histories`: runs each generation story once on the dev
 * server and saves its event history under test/fixtures/histories, where
 * test/workflows/replay.test.ts replays them against the current workflow
 * code. Record again only when a change to the workflow is meant to be
 * incompatible with running generations: before launch (nothing runs yet,
 * as when POST began handing the job over), or after it with the change
 * versioned (patched()) so the old histories still replay. The histories of earlier versions
 * stay beside the new ones under names of their own: `held-key-*` are runs from before key
 * records (issue 13), which hold their Idempotency-Key open until the horizon.
 */
describe('record generation histories', () => {
  const stack = useGenerationStack({
    apiEnv: { RESULT_RETENTION_MS: '1000', IDEMPOTENCY_RETENTION_MS: '60000' },
    account: { oneTime: 100 },
  });

  async function record(name: string, id: string, runId?: string) {
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id), runId);
    await handle.result();
    // The CLI writes the standard proto3 JSON of a history, which historyFromJSON reads back.
    const { stdout } = await run(
      await temporalCliPath(),
      [
        'workflow',
        'show',
        '--workflow-id',
        handle.workflowId,
        ...(runId ? ['--run-id', runId] : []),
        '--address',
        inject('temporalAddress'),
        '--output',
        'json',
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    await writeFile(`test/fixtures/histories/${name}.json`, stdout);
  }

  it('records', async () => {
    const create = async (prompt: string, extra: Record<string, unknown> = {}) =>
      (
        await createGeneration(
          stack.api,
          stack.account.key,
          { model: 'lumen-lite', prompt, ...extra },
          `record-${prompt.replace(/[^a-z]+/g, '-')}`,
        )
      ).json().id as string;
    const succeeded = await create('recorded success');
    const failed = await create('recorded failure [sim:fail]');
    const rejected = await create('recorded rejection [sim:reject]');
    const review = await create('recorded review [sim:uncertain]');
    await pollGeneration(
      stack.api,
      stack.account.key,
      review,
      (g) => g.error?.code === 'submission_unresolved',
    );
    await stack.client.workflow
      .getHandle(await workflowIdOf(stack.db.pool, review))
      .executeUpdate(resolveUpdate, { args: [{ action: 'refund' }] });
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const unaffordable = String(
      (await createGeneration(stack.api, poor.key, { model: 'lumen-pro', prompt: 'too dear' }, 'record-402'))
        .headers['x-request-id'],
    );
    // A request that missed the key's record (the workflow ended as it looked) meets a new run,
    // which answers for the generation that holds the key.
    const ended = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, succeeded));
    const { runId: endedRun } = await ended.describe();
    await ended.result();
    const body = { model: 'lumen-lite', prompt: 'recorded success' };
    const late = {
      ...generationStart(stack.account, body.prompt),
      workflowId: ended.workflowId,
      fingerprint: fingerprint(body),
      idempotencyKey: 'record-recorded-success',
    };
    const answer = await stack.client.workflow.executeUpdateWithStart(admitUpdate, {
      startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
        workflowId: ended.workflowId,
        taskQueue: stack.worker.taskQueue,
        args: [late],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
    expect(answer.generationId).toBe(succeeded);
    const { runId: lateRun } = await ended.describe();
    expect(lateRun).not.toBe(endedRun);
    await record('succeeded-expired', succeeded, endedRun);
    await record('key-held', succeeded, lateRun);
    await record('failed-refunded', failed);
    await record('provider-rejected', rejected);
    await record('needs-review-refunded', review);
    await record('insufficient-credits', unaffordable);
  }, 60_000);
});
