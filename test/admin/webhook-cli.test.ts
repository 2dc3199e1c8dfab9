import { describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { runAdminCommand } from '../../src/admin/commands.js';
import type { AdminContext } from '../../src/admin/command.js';
import { runAdminCli } from '../support/admin.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { useWebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Support's view of a generation's webhook deliveries (`generation --id`) and `redeliver-webhook`
 * (issue 30 §3), through a real worker to an HTTPS receiver on loopback.
 */
describe('support commands: webhook deliveries', () => {
  const receiver = useWebhookReceiver();
  const stack = useGenerationStack({
    account: { oneTime: 100 },
    apiEnv: receiver.env,
    worker: { overrides: { webhookDelivery: receiver.webhookDelivery } },
  });
  const context = (): AdminContext => ({
    db: stack.db.pool,
    temporal: () => Promise.resolve(stack.client),
    taskQueue: stack.worker.taskQueue,
  });
  const admin = (...argv: string[]) => runAdminCommand(argv, context());
  const create = async (webhook?: unknown) => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a mill',
      ...(webhook ? { webhook } : {}),
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = z.object({ id: z.string() }).parse(response.json()).id;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    return id;
  };

  it('`generation` lists the deliveries; `redeliver-webhook` sends an event again with its webhook-id, for nothing', async () => {
    receiver.answers.push(503);
    const url = `${receiver.origin}/support`;
    const id = await create({ url, events: ['generation.processing', 'generation.succeeded'] });
    await expect.poll(() => receiver.deliveriesOf(id).length, { timeout: 20_000 }).toBe(3);
    const shown = await admin('generation', '--id', id);
    const webhook = (shown.json as { webhook: { subscription: unknown; attempts: unknown[] } }).webhook;
    expect(webhook.subscription).toMatchObject({ url, gone_at: null });
    expect(webhook.attempts).toMatchObject([
      { event_type: 'generation.processing', attempt: 1, status: 503, outcome: 'failed' },
      { event_type: 'generation.processing', attempt: 2, status: 204, outcome: 'delivered' },
      { event_type: 'generation.succeeded', attempt: 1, status: 204, outcome: 'delivered' },
    ]);
    expect(shown.text.join('\n')).toMatch(
      /event \d+ generation\.processing {2}attempt 1 {2}failed 503 {2}\d+ ms {2}the receiver answered 503/,
    );

    const charges = await chargesOf(stack.db.pool, id);
    // Without --event: the newest event the webhook is sent (here generation.succeeded).
    const redelivered = await admin('redeliver-webhook', '--id', id);
    const succeeded = receiver.deliveriesOf(id).at(-1)!;
    expect(redelivered.json).toMatchObject({ outcome: 'queued', webhookId: succeeded.webhookId });
    await expect.poll(() => receiver.deliveriesOf(id).length, { timeout: 20_000 }).toBe(4);
    expect(receiver.deliveriesOf(id).at(-1)).toMatchObject({
      type: 'generation.succeeded',
      webhookId: succeeded.webhookId,
    });
    // --event names one: the processing event, again under its own id.
    const processing = receiver.deliveriesOf(id)[0]!;
    const seq = Number(processing.webhookId.split('_').at(-1));
    await admin('redeliver-webhook', '--id', id, '--event', String(seq));
    await expect.poll(() => receiver.deliveriesOf(id).length, { timeout: 20_000 }).toBe(5);
    expect(receiver.deliveriesOf(id).at(-1)).toMatchObject({
      type: 'generation.processing',
      webhookId: processing.webhookId,
    });
    await expect
      .poll(
        async () =>
          (
            (await admin('generation', '--id', id)).json as {
              webhook: { attempts: unknown[] };
            }
          ).webhook.attempts.length,
      )
      .toBe(5);
    expect(await chargesOf(stack.db.pool, id)).toEqual(charges);
  });

  it('refuses in words: no such generation, no webhook, no such event; the CLI process exits 1 or 2', async () => {
    const plain = await create();
    const hooked = await create({ url: `${receiver.origin}/support-refusals` });
    await expect.poll(() => receiver.deliveriesOf(hooked).length, { timeout: 20_000 }).toBe(1);
    const cli = (...args: string[]) =>
      runAdminCli(args, stack.db.url, {
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: stack.worker.taskQueue,
      });
    await expect(admin('redeliver-webhook', '--id', plain)).rejects.toMatchObject({
      code: 'no_webhook',
      message: `${plain} was created without a webhook: nothing to redeliver.`,
    });
    await expect(admin('redeliver-webhook', '--id', hooked, '--event', '999')).rejects.toMatchObject({
      code: 'no_event',
      message: expect.stringMatching(/has no event 999; its events: 1 generation\.created/),
    });
    await expect(admin('redeliver-webhook', '--id', hooked, '--event', 'x')).rejects.toThrow(
      /--event must be a positive whole number/,
    );
    // The process's exit codes: 1 refused (with the code under --json), 2 bad usage.
    const missing = await cli('redeliver-webhook', '--id', 'gen_doesnotexist', '--json');
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: { code: 'not_found' } });
    expect((await cli('redeliver-webhook')).code).toBe(2);
    expect(receiver.deliveriesOf(hooked)).toHaveLength(1);

    // The CLI process itself redelivers (its TEMPORAL_TASK_QUEUE is the generations' queue).
    const ok = await cli('redeliver-webhook', '--id', hooked);
    expect(ok).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^Redelivering event \d+ \(generation\.succeeded\)/),
    });
    await expect.poll(() => receiver.deliveriesOf(hooked).length, { timeout: 20_000 }).toBe(2);
    const shown = await admin('generation', '--id', hooked);
    expect(shown.text).toContain(
      `  webhook: ${receiver.origin}/support-refusals for generation.succeeded, generation.failed, generation.rejected, generation.content_expired`,
    );
  }, 90_000);
});
