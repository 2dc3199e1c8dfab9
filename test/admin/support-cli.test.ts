import { sql } from 'slonik';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { runAdminCommand } from '../../src/admin/commands.js';
import type { AdminContext } from '../../src/admin/command.js';
import { progressQuery } from '../../src/workflows/generation-workflow.js';
import { bearer } from '../support/api.js';
import { runAdminCli } from '../support/admin.js';
import { useGenerationStack } from '../support/stack.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, galleryOf, providerJobIdOf, workflowIdOf } from '../support/ledger.js';

describe('support commands', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });
  let context: AdminContext;
  const admin = (...argv: string[]) => runAdminCommand(argv, context);
  const read = async (id: string) =>
    (
      await stack.api.app.inject({
        method: 'GET',
        url: `/v1/generations/${id}`,
        headers: bearer(stack.account.key),
      })
    ).json();
  beforeAll(() => {
    context = { db: stack.db.pool, temporal: () => Promise.resolve(stack.client) };
  });

  it('finds generations that need review and resolves them', async () => {
    const id = (
      await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'gone quiet [sim:uncertain]',
      })
    ).json().id as string;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.error?.code === 'submission_unresolved');
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
      await providerJobIdOf(stack.db.pool, id),
      '--note',
      'found it',
    );
    expect(resolved.text[0]).toMatch(/Resolved .* \(succeed\)/);
    expect(
      (await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded'))
        .credits_refunded,
    ).toBe(false);
    expect(
      ((await admin('generations', '--needs-review')).json as Array<{ id: string }>).map((g) => g.id),
    ).not.toContain(id);
  });

  it('lists generations queued for too long', async () => {
    const id = (
      await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'patience [sim:slow=2]',
      })
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
    await pollGeneration(stack.api, stack.account.key, id);
  });

  it('resets a workflow to its start without a second debit, submission or refund', async () => {
    const succeeded = (
      await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt: 'again and again' })
    ).json().id as string;
    const failed = (
      await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'broken [sim:fail]',
      })
    ).json().id as string;
    await pollGeneration(stack.api, stack.account.key, succeeded);
    await pollGeneration(stack.api, stack.account.key, failed);
    const before = {
      succeeded: await chargesOf(stack.db.pool, succeeded),
      failed: await chargesOf(stack.db.pool, failed),
      record: await read(succeeded),
      gallery: await galleryOf(stack.db.pool, succeeded),
    };
    const client = await context.temporal();
    for (const id of [succeeded, failed]) {
      const reset = await admin('reset-generation', '--id', id, '--reason', 'test');
      const runId = (reset.json as { runId: string }).runId;
      expect(runId).toBeTruthy();
      const handle = client.workflow.getHandle(await workflowIdOf(stack.db.pool, id), runId);
      await expect
        .poll(async () => (await handle.query(progressQuery)).step, { timeout: 20_000 })
        .toMatch(id === succeeded ? /succeeded/ : /failed/);
    }
    expect(await chargesOf(stack.db.pool, succeeded)).toEqual(before.succeeded);
    expect(await chargesOf(stack.db.pool, failed)).toEqual(before.failed);
    // The persist ran again: same output, same expires_at, no second gallery row.
    expect(await read(succeeded)).toEqual(before.record);
    expect(before.gallery).toHaveLength(1);
    expect(await galleryOf(stack.db.pool, succeeded)).toEqual(before.gallery);
    expect(before.succeeded).toEqual({ debits: 1, refunds: 0, net: -2, submissions: 1 });
    expect(before.failed).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });

  it('a reset never turns a refunded generation into a result, nor refunds it twice', async () => {
    const id = (
      await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'refunded then reset [sim:uncertain]',
      })
    ).json().id as string;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.error?.code === 'submission_unresolved');
    await admin('resolve-generation', '--id', id, '--refund');
    const refunded = await pollGeneration(stack.api, stack.account.key, id, (g) => g.credits_refunded);
    // Afterwards the provider turns out to have the job, and would now say so to a lookup.
    await stack.db.pool.query(sql.unsafe`
      UPDATE sim_provider_jobs SET directives = jsonb_set(directives, '{uncertain}', '"recoverable"')
      WHERE token = ${`tok_${id}`}`);
    const { runId } = (await admin('reset-generation', '--id', id)).json as { runId: string };
    const handle = (await context.temporal()).workflow.getHandle(
      await workflowIdOf(stack.db.pool, id),
      runId,
    );
    await expect
      .poll(async () => (await handle.query(progressQuery)).step, { timeout: 20_000 })
      .toBe('failed');
    expect(await read(id)).toEqual(refunded);
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 1, net: 0, submissions: 1 });
  });

  it('answers a second resolve-generation on a resolved generation in one line, through the CLI', async () => {
    const id = (
      await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'resolved twice [sim:uncertain]',
      })
    ).json().id as string;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.error?.code === 'submission_unresolved');
    const cli = (...args: string[]) =>
      runAdminCli(args, stack.db.url, { TEMPORAL_ADDRESS: inject('temporalAddress') });
    const first = await cli('resolve-generation', '--id', id, '--refund');
    expect(first).toMatchObject({ code: 0, stdout: expect.stringMatching(/^Resolved .* \(refund\)/) });
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.credits_refunded);
    // The refund ended the story; the workflow may take a moment more to close.
    await expect
      .poll(
        async () =>
          (
            await (
              await context.temporal()
            ).workflow
              .getHandle(await workflowIdOf(stack.db.pool, id))
              .describe()
          ).status.name,
        { timeout: 20_000 },
      )
      .toBe('COMPLETED');
    const again = await cli('resolve-generation', '--id', id, '--succeed', 'sim:anything');
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr.trim().split('\n')).toEqual([
      `${id} is already resolved (status failed, credits refunded, error generation_failed): its workflow has ended, so nothing was changed.`,
    ]);
    const asJson = await cli('resolve-generation', '--id', id, '--refund', '--json');
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ error: { code: 'already_resolved' } });
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1, refunds: 1 });
  }, 120_000); // three CLI processes: each starts TypeScript through tsx, seconds apiece on a busy machine

  it('npm run admin with no command prints every command with its options and exits 2', async () => {
    const { code, stdout, stderr } = await runAdminCli([], stack.db.url);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    for (const command of [
      'create-key',
      'providers',
      'resolve-generation',
      'import-catalog',
      'reconciliations',
    ])
      expect(stderr).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    expect(stderr).toContain('--succeed PROVIDER_JOB_ID');
    expect(stderr).toContain('--queued-over-minutes N');
  });
});
