import { beforeAll, describe, expect, it } from 'vitest';
import type { AdminContext } from '../../src/admin/command.js';
import { runAdminCommand } from '../../src/admin/commands.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

describe('npm run admin -- cancel-generation --id', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });
  let context: AdminContext;
  const admin = (...argv: string[]) => runAdminCommand(argv, context);
  const create = async (prompt: string) =>
    String(
      (await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt })).headers[
        'x-request-id'
      ],
    );
  beforeAll(() => {
    context = { db: stack.db.pool, temporal: () => Promise.resolve(stack.client) };
  });

  it('cancels under the same rules as the endpoint', async () => {
    const queued = await create('support stops it [sim:queued=60]');
    const done = await admin('cancel-generation', '--id', queued);
    expect(done.text[0]).toMatch(/^Canceled gen_\w+: failed \(canceled\), credits_refunded true\.$/);
    expect(await getGeneration(stack.api, stack.account.key, queued)).toMatchObject({
      status: 'failed',
      error: { code: 'canceled' },
      credits_refunded: true,
    });
    // Again: still canceled, refunded once.
    await admin('cancel-generation', '--id', queued);
    expect((await chargesOf(stack.db.pool, queued)).refunds).toBe(1);

    const running = await create('support cannot [sim:slow=2]');
    await expect(admin('cancel-generation', '--id', running)).rejects.toThrow(/not cancelable/);
    expect(await pollGeneration(stack.api, stack.account.key, running)).toMatchObject({
      status: 'succeeded',
      credits_refunded: false,
    });
    await expect(admin('cancel-generation', '--id', 'gen_nope000000')).rejects.toThrow(/No generation/);
  });
});
