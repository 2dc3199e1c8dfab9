import { WithStartWorkflowOperation } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { fingerprint } from '../../src/generations/admission/generation-request.js';
import { createActivities } from '../../src/activities/index.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import {
  admitUpdate,
  cancelUpdate,
  generationWorkflow,
  resolveUpdate,
} from '../../src/workflows/generation-workflow.js';
import { progressQuery } from '../../src/workflows/generation-messages.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { useGenerationStack } from '../support/stack.js';
import { createPaidAccount } from '../support/api.js';
import { runAdminCli } from '../support/admin.js';
import { createGeneration, generationStart, pollGeneration } from '../support/generations.js';
import { providerJobIdOf, workflowIdOf } from '../support/ledger.js';
import { testDeployment } from '../support/worker.js';
import { tellBatchStory } from './batch-stories.js';
import { tellProviderCancelStories, useProviderStandIns } from './provider-cancel-stories.js';
import { generationStories } from './stories.js';
import { tellPushStories } from './push-stories.js';
import { useHistoryRecorder } from './history-recorder.js';
import {
  faultyActivities,
  tellAdmissionBrokeStory,
  tellHorizonStories,
  tellWebhookDeliveryStories,
} from './own-worker-stories.js';
import { useWebhookReceiver } from '../webhooks/webhook-receiver.js';
import { webhookDeliveryWorkflowId } from '../../src/workflows/webhook-delivery-types.js';

/**
 * `npm run record:histories`: runs every generation story (test/workflows/stories.ts) once on the
 * dev server and saves the event history of each of its runs under test/fixtures/histories, where
 * test/workflows/replay.test.ts replays them against the current workflow code.
 *
 * Workflow code is versioned (docs/developing.md): a generation's active life is pinned to the
 * build it started on, so a change to it needs no patch, and these histories are recorded again
 * with the code of the day. The retention run (generation-retention.ts) moves to new builds: a
 * change to it must still replay its recorded histories (a patch, with its retirement date).
 */
describe('record generation histories', () => {
  const apiEnv: Record<string, string> = {
    RESULT_RETENTION_MS: '1000',
    IDEMPOTENCY_RETENTION_MS: '60000',
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    // A webhook URL on loopback passes admission (its deliveries, by a worker that refuses it, fail).
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
  };
  const standIns = useProviderStandIns(apiEnv);
  // The webhook stories' receiver (HTTPS on loopback, trusted by the worker's deliveries).
  const hooks = useWebhookReceiver();
  const stack = useGenerationStack({
    apiEnv,
    account: { oneTime: 1000 },
    worker: { overrides: { webhookDelivery: hooks.webhookDelivery } },
  });
  const { record, save } = useHistoryRecorder();

  const story = (name: string) => generationStories[name]!;
  const create = async (prompt: string, key?: string, extra: Record<string, unknown> = {}) =>
    (
      await createGeneration(
        stack.api,
        stack.account.key,
        { model: 'lumen-lite', prompt, ...extra },
        key ?? `record-${randomBase62(8)}`,
      )
    ).json().id as string;
  const idOf = (generationId: string) => workflowIdOf(stack.db.pool, generationId);

  it('records the stories told through the API', async () => {
    const { client } = stack;
    const succeeded = await create('recorded success', 'record-recorded-success');
    const failed = await create('recorded failure [sim:fail]');
    const rejected = await create('recorded rejection [sim:reject]');
    const refunded = await create('recorded review [sim:uncertain]');
    const resolved = await create('recorded review, found [sim:uncertain]');
    for (const id of [refunded, resolved])
      await pollGeneration(
        stack.api,
        stack.account.key,
        id,
        (g) => g.error?.code === 'submission_unresolved',
      );
    await client.workflow
      .getHandle(await idOf(refunded))
      .executeUpdate(resolveUpdate, { args: [{ action: 'refund' }] });
    await client.workflow.getHandle(await idOf(resolved)).executeUpdate(resolveUpdate, {
      args: [{ action: 'succeed', providerJobId: await providerJobIdOf(stack.db.pool, resolved) }],
    });
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 1 });
    const unaffordable = String(
      (await createGeneration(stack.api, poor.key, { model: 'lumen-pro', prompt: 'too dear' }, 'record-402'))
        .headers['x-request-id'],
    );
    const unaffordableHooked = String(
      (
        await createGeneration(
          stack.api,
          poor.key,
          { model: 'lumen-pro', prompt: 'too dear', webhook: { url: 'https://127.0.0.1:9/hook' } },
          'record-402-webhook',
        )
      ).headers['x-request-id'],
    );
    const queued = await create('recorded cancel, queued [sim:queued=60]');
    const running = await create('recorded cancel, running [sim:slow=2]');
    const requested = await create('recorded cancel request [sim:queued=60]');
    for (const id of [queued, running])
      await client.workflow.getHandle(await idOf(id)).executeUpdate(cancelUpdate, { args: [id] });
    await client.workflow.getHandle(await idOf(requested)).cancel();

    // A request that missed the key's record (the workflow ended as it looked) meets a new run,
    // which answers for the generation that holds the key.
    const ended = client.workflow.getHandle(await idOf(succeeded));
    await record(client, ended.workflowId, story('success'));
    const body = { model: 'lumen-lite', prompt: 'recorded success' };
    const late = {
      ...generationStart(stack.account, body.prompt),
      workflowId: ended.workflowId,
      fingerprint: fingerprint(body),
      idempotencyKey: 'record-recorded-success',
    };
    const answer = await client.workflow.executeUpdateWithStart(admitUpdate, {
      startWorkflowOperation: new WithStartWorkflowOperation(generationWorkflow, {
        workflowId: ended.workflowId,
        taskQueue: stack.worker.taskQueue,
        args: [late],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    });
    expect(answer.generationId).toBe(succeeded);
    const [lateRun] = story('a later request meets the Idempotency-Key record of an ended generation');
    await client.workflow.getHandle(ended.workflowId).result();
    await save(ended.workflowId, (await ended.describe()).runId, lateRun!);

    await record(client, await idOf(failed), story('provider failure, refunded'));
    await record(client, await idOf(rejected), story('rejected by the provider'));
    await record(client, await idOf(refunded), story('review, refunded by support'));
    await record(client, await idOf(resolved), story('review, resolved with the provider job'));
    await record(client, await idOf(unaffordable), story('rejected at admission (insufficient credits)'));
    await record(
      client,
      await idOf(unaffordableHooked),
      story('rejected at admission, with a webhook subscription: its delivery workflow started'),
    );
    await record(client, await idOf(queued), story('cancel while the job waits in the provider queue'));
    await record(client, await idOf(running), story('cancel while the provider runs the job'));
    await record(
      client,
      await idOf(requested),
      story('cancellation request (Temporal UI) while the job waits in the queue'),
    );

    // Support resets a generation in the provider wait: the story runs again from its start.
    const reset = await create('recorded reset [sim:slow=3]');
    await pollGeneration(stack.api, stack.account.key, reset, (g) => g.status === 'queued');
    const handle = client.workflow.getHandle(await idOf(reset));
    await expect.poll(async () => (await handle.query(progressQuery)).step).toBe('generating');
    const cli = await runAdminCli(['reset-generation', '--id', reset, '--reason', 'recorded'], stack.db.url, {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
    });
    expect(cli.code, cli.stderr).toBe(0);
    await record(
      client,
      handle.workflowId,
      story("support reset of a generation (the job's end, pushed later, reaches the run the reset started)"),
    );
  }, 120_000);

  it('records the stories of the provider push', async () => {
    await tellPushStories(stack, (workflowId, names) => record(stack.client, workflowId, names));
  }, 120_000);

  it('records the batch story', async () => {
    const name = 'a batch: its lines admitted in turn through admission, the batch completed';
    await tellBatchStory(stack, (workflowId) => record(stack.client, workflowId, story(name)));
    const hooked =
      "a batch with a webhook: it starts the delivery workflow, which delivers the batch's events";
    const [batchRun, deliveriesRun] = story(hooked);
    await tellBatchStory(stack, (workflowId) => record(stack.client, workflowId, [batchRun!]), {
      url: `${hooks.origin()}/batch-story`,
      recordDeliveries: (batchId) =>
        record(stack.client, webhookDeliveryWorkflowId(batchId), [deliveriesRun!]),
    });
  }, 120_000);

  it('records the cancel stories told against the provider stand-ins', async () => {
    await tellProviderCancelStories(stack, standIns, async (generationId, name) =>
      record(stack.client, await idOf(generationId), story(name)),
    );
  }, 120_000);

  it('records the stories that need a worker or a start of their own', async () => {
    const { client } = stack;
    // A worker whose first refund attempt and every content expiry fail, on a task queue of its own.
    const taskQueue = `record-${randomBase62(8)}`;
    let refunds = 0;
    /** The generations whose content expiry fails. */
    const expiryFails = new Set<string>();
    const activities = createActivities(stack.worker.deps);
    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await createWorker({
      connection,
      namespace: 'default',
      taskQueue,
      workflowBundlePath: inject('workflowBundlePath'),
      deployment: { name: testDeployment, currentVersion: 'when-none' },
      activities: {
        ...activities,
        refund: (...args: Parameters<typeof activities.refund>) => {
          if (refunds++ === 0) throw new Error('the database went away (recorded)');
          return activities.refund(...args);
        },
        expireContent: (generationId: string) =>
          expiryFails.has(generationId)
            ? Promise.reject(new Error('storage refuses deletes (recorded)'))
            : activities.expireContent(generationId),
        ...faultyActivities(activities),
      },
    });
    const start = (prompt: string, change: (s: GenerationStart) => GenerationStart = (s) => s) => {
      const started = change(generationStart(stack.account, prompt));
      return client.workflow.start(generationWorkflow, {
        workflowId: started.workflowId,
        taskQueue,
        args: [started],
      });
    };
    try {
      await worker.runUntil(async () => {
        await worker.currentVersion();
        const refundRetried = await start('recorded refund retry [sim:fail]');
        await record(client, refundRetried.workflowId, story('a refund retried until it commits'));
        const expiryFailing = await start('recorded expiry failure', (s) => ({
          ...s,
          generationId: [...expiryFails.add(s.generationId)][0]!,
          idempotencyKey: 'record-expiry-failure',
          timing: {
            ...s.timing,
            resultRetentionMs: 500,
            idempotencyRetentionMs: 8_000,
            horizons: { bookkeepingMs: 1_500 },
          },
        }));
        await record(
          client,
          expiryFailing.workflowId,
          story('content expiry that fails: the run holds the key until its horizon'),
        );
        const staged = await start('recorded staging', (s) => ({
          ...s,
          input: { ...s.input, reference: `${stack.worker.resultBaseUrl}/none.png` },
          timing: { ...s.timing, resultRetentionMs: 500 },
        }));
        await record(client, staged.workflowId, story('customer image URLs staged before the submit'));
        // Its deliveries are the child's, recorded apart: the receiver refuses the first attempt
        // (500), and the retry after its timer delivers.
        hooks.flaky.push(500);
        let subscribedId = '';
        const subscribed = await start('recorded webhook', (s) => ({
          ...s,
          webhook: {
            url: `${hooks.origin()}/flaky`,
            events: ['generation.succeeded'],
            retryDelaysMs: [200],
          },
          timing: { ...s.timing, resultRetentionMs: 500 },
          generationId: (subscribedId = s.generationId),
        }));
        await record(
          client,
          subscribed.workflowId,
          story('a webhook subscription: its delivery workflow started'),
        );
        await record(
          client,
          webhookDeliveryWorkflowId(subscribedId),
          story('webhook delivery: the first attempt refused (500), the retry delivers'),
        );
        await tellWebhookDeliveryStories(stack, hooks, taskQueue, start, (id, names) =>
          record(client, id, names),
        );
        await tellAdmissionBrokeStory(start, (id, names, ends) => record(client, id, names, ends));
        const handedOff = await start('recorded review hand-off [sim:uncertain]', (s) => ({
          ...s,
          timing: { ...s.timing, reviewHandOffMs: 500, resultRetentionMs: 500, pollIntervalMs: 50 },
        }));
        await expect
          .poll(async () => (await handedOff.describe()).type, { timeout: 15_000 })
          .toBe('generationRetentionWorkflow');
        const jobId = await providerJobIdOf(stack.db.pool, handedOff.workflowId.replace('generation-', ''));
        await handedOff.executeUpdate(resolveUpdate, {
          args: [{ action: 'succeed', providerJobId: jobId }],
        });
        await record(
          client,
          handedOff.workflowId,
          story('review handed off to the review run, then resolved'),
        );
        // Last: its provider refuses every connection, which that provider's health may count.
        await tellHorizonStories(stack, start, (id, names) => record(client, id, names));
      });
    } finally {
      await connection.close();
    }
  }, 240_000);
});
