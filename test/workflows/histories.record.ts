import { writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { temporalCliPath } from '../../src/dev/temporal-binaries.js';
import { describe, it } from 'vitest';
import { inject } from 'vitest';
import { resolveUpdate } from '../../src/workflows/generation-workflow.js';
import { useGenerationStack } from '../support/stack.js';
import { createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';

const run = promisify(execFile);

/**
 * `npm run record:histories`: runs each generation story once on the dev
 * server and saves its event history under test/fixtures/histories, where
 * test/workflows/replay.test.ts replays them against the current workflow
 * code. Record again only when a change to the workflow is meant to be
 * incompatible with running generations: before launch (nothing runs yet,
 * as when POST began handing the job over), or after it with the change
 * versioned (patched()) so the old histories still replay.
 */
describe('record generation histories', () => {
  const stack = useGenerationStack({
    apiEnv: { RESULT_RETENTION_MS: '1000', IDEMPOTENCY_RETENTION_MS: '3000' },
    account: { oneTime: 100 },
  });

  async function record(name: string, id: string) {
    const handle = stack.client.workflow.getHandle(await workflowIdOf(stack.db.pool, id));
    await handle.result();
    // The CLI writes the standard proto3 JSON of a history, which historyFromJSON reads back.
    const { stdout } = await run(
      await temporalCliPath(),
      [
        'workflow',
        'show',
        '--workflow-id',
        handle.workflowId,
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
    await record('succeeded-expired-horizon', succeeded);
    await record('failed-refunded', failed);
    await record('provider-rejected', rejected);
    await record('needs-review-refunded', review);
    await record('insufficient-credits', unaffordable);
  }, 60_000);
});
