import { ApplicationFailure, type WorkflowHandle } from '@temporalio/client';
import type { Activities } from '../../src/activities/index.js';
import { expect } from 'vitest';
import { redeliverWebhook } from '../../src/generations/redeliver-webhook.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import {
  webhookDeliveryWorkflowId,
  webhookNudgeSignalName,
} from '../../src/workflows/webhook-delivery-types.js';
import { resolveUpdate } from '../../src/workflows/generation-messages.js';
import { providerJobIdOf } from '../support/ledger.js';
import { deliveryAttemptsOf } from '../../src/db/webhook-delivery-reads.js';
import { getGeneration } from '../support/generations.js';
import type { GenerationStack } from '../support/stack.js';
import type { useWebhookReceiver } from '../webhooks/webhook-receiver.js';
import { generationStories } from './stories.js';

/** Starts a generation on the recorder's own worker (histories.record.ts), its start changed first. */
type Start = (prompt: string, change?: (s: GenerationStart) => GenerationStart) => Promise<WorkflowHandle>;
type StepHorizonsOfStart = NonNullable<GenerationStart['timing']['horizons']>;
/** Saves the last runs of a workflow id's chain under these names, once ended so (histories.record.ts). */
type Record = (workflowId: string, names: readonly string[], ends?: 'completed' | 'failed') => Promise<void>;

const story = (name: string) => generationStories[name]!;

/**
 * The generations whose admission meets a bug, those whose delivery workflow's first look fails,
 * and those whose first look finds its account's turns all taken (`busy`).
 */
const faults = {
  admissionBreaks: new Set<string>(),
  lookFails: new Set<string>(),
  turnTaken: new Set<string>(),
};

/** The recorder's worker's activities that fail for the generations named in `faults`. */
export function faultyActivities(activities: Activities): Pick<Activities, 'debit' | 'nextWebhookEvents'> {
  return {
    debit: (start, key) =>
      faults.admissionBreaks.has(start.generationId)
        ? Promise.reject(ApplicationFailure.nonRetryable('admission met a bug (recorded)', 'RecordedBug'))
        : activities.debit(start, key),
    nextWebhookEvents: async (look) => {
      if (faults.lookFails.delete(look.generationId)) throw new Error('the database went away (recorded)');
      if (!faults.turnTaken.has(look.generationId)) return activities.nextWebhookEvents(look);
      // As a look finds it when as many of the account's attempts are in flight as it may have.
      const found = await activities.nextWebhookEvents({ ...look, deliverFirst: false });
      const [first] = found.events;
      if (!first) return found;
      faults.turnTaken.delete(look.generationId);
      return { ...found, firstAttempts: [{ seq: first.seq, attempt: 0, outcome: 'busy' }] };
    },
  };
}

/** Admission that breaks (a bug, not bad data or a dependency down): refused, and the run ends failed for operators. */
export async function tellAdmissionBrokeStory(start: Start, record: Record) {
  const broken = await start('recorded admission bug', (s) => {
    faults.admissionBreaks.add(s.generationId);
    return s;
  });
  await record(broken.workflowId, story('admission breaks (a bug): refused, the run ends failed'), 'failed');
}

/**
 * The stories of a step reaching its horizon (docs/api/generations.md, "Step horizons"): each
 * horizon shortened in the start's timing, as the recorder shortens retention for other stories.
 * The submit story is told last: its provider refuses every connection, which the provider's
 * health may count against it.
 */
export async function tellHorizonStories(stack: GenerationStack, start: Start, record: Record) {
  /** A generation whose step, given this short horizon, reaches it: refunded, generation_timed_out. */
  const timesOut = async (prompt: string, horizons: StepHorizonsOfStart, name: string) => {
    let generationId = '';
    const handle = await start(prompt, (s) => ({
      ...s,
      timing: { ...s.timing, horizons },
      generationId: (generationId = s.generationId),
    }));
    await record(handle.workflowId, story(name));
    expect(await getGeneration(stack.api, stack.account.key, generationId)).toMatchObject({
      status: 'failed',
      credits_refunded: true,
      error: { code: 'generation_timed_out' },
    });
  };
  // The job runs longer than the provider wait horizon: refunded, and the job canceled at the provider.
  await timesOut(
    'recorded provider wait horizon [sim:slow=6]',
    { providerWaitMs: 1_500 },
    'the provider wait reaches its horizon: refunded, timed out, the job canceled',
  );
  // Every download of the result fails until the persist horizon: refunded.
  await timesOut(
    'recorded persist horizon [sim:persist-fail=1000]',
    { persistMs: 1_500 },
    'persisting reaches its horizon: refunded, timed out',
  );
  // The provider refuses every connection: the handover gives up, the background submission runs
  // to the submit horizon, and nothing reached the provider: refunded.
  await timesOut(
    'recorded submit horizon [sim:unreachable]',
    { submitMs: 2_000 },
    'the provider unreachable: submitted in the background until the submit horizon, refunded',
  );
  // Its Cancel-After deadline passes while the provider refuses every connection: the background
  // submit past it sends nothing, and the generation is refunded as canceled.
  let deadlineId = '';
  const pastDeadline = await start('recorded Cancel-After [sim:unreachable]', (s) => ({
    ...s,
    cancelAfter: new Date(Date.now() + 1_500).toISOString(),
    generationId: (deadlineId = s.generationId),
  }));
  await record(
    pastDeadline.workflowId,
    story('its Cancel-After deadline passes before a provider has it: canceled, refunded'),
  );
  expect(await getGeneration(stack.api, stack.account.key, deadlineId)).toMatchObject({
    status: 'failed',
    credits_refunded: true,
    error: { code: 'canceled', message: expect.stringContaining('Cancel-After') },
  });
}

/**
 * The delivery workflow's stories beyond a first delivery (webhook-delivery-workflow.ts): a 410
 * Gone (answering the look's first attempt, or a retry) ends it; a failed look is made again; a
 * redelivery runs beside it while it waits for the content's expiry, and one asked after it ended
 * starts a run of its own (redeliverWebhook's signalWithStart).
 */
export async function tellWebhookDeliveryStories(
  stack: GenerationStack,
  hooks: ReturnType<typeof useWebhookReceiver>,
  taskQueue: string,
  start: Start,
  record: Record,
) {
  const subscribed = async (
    prompt: string,
    path: string,
    events: string[],
    retryDelaysMs: number[],
    resultRetentionMs = 500,
  ) => {
    let generationId = '';
    const handle = await start(prompt, (s) => ({
      ...s,
      webhook: { url: `${hooks.origin()}${path}`, events, retryDelaysMs },
      timing: { ...s.timing, resultRetentionMs },
      generationId: (generationId = s.generationId),
    }));
    return { handle, generationId, webhooks: webhookDeliveryWorkflowId(generationId) };
  };
  const outcomesOf = async (generationId: string) =>
    (await deliveryAttemptsOf(stack.db.pool, generationId)).map((a) => a.outcome);

  const gone = await subscribed('recorded webhook gone', '/gone', ['generation.succeeded'], [200]);
  // Its generation's end (its retention's) shows the delivery workflow was started.
  await gone.handle.result();
  await record(gone.webhooks, story('webhook delivery: the receiver answers 410 Gone: deliveries stop'));
  expect(await outcomesOf(gone.generationId)).toEqual(['gone']);

  hooks.flaky.push(500, 410);
  const goneLater = await subscribed(
    'recorded webhook gone on retry',
    '/flaky',
    ['generation.succeeded'],
    [200],
  );
  await goneLater.handle.result();
  await record(goneLater.webhooks, story('webhook delivery: a retry answered 410 Gone: deliveries stop'));
  expect(await outcomesOf(goneLater.generationId)).toEqual(['failed', 'gone']);

  // The first look fails (the database went away): the run looks again 5 s later, and delivers.
  let looked = '';
  const retried = await start('recorded webhook look retried', (s) => {
    // Named before the start, so that its delivery workflow's first look fails.
    faults.lookFails.add((looked = s.generationId));
    return {
      ...s,
      webhook: { url: `${hooks.origin()}/ok`, events: ['generation.succeeded'], retryDelaysMs: [200] },
      timing: { ...s.timing, resultRetentionMs: 500 },
    };
  });
  await retried.result();
  await record(
    webhookDeliveryWorkflowId(looked),
    story('webhook delivery: a look for events that fails is made again'),
  );
  expect(await outcomesOf(looked)).toEqual(['delivered']);

  // Its look finds the account's turns taken: it waits (no activity) until a turn is given back
  // (the nudge the attempt giving it back sends), then delivers.
  let waited = '';
  const turnWaited = await start('recorded webhook turn waited', (s) => {
    faults.turnTaken.add((waited = s.generationId));
    return {
      ...s,
      webhook: { url: `${hooks.origin()}/ok`, events: ['generation.succeeded'], retryDelaysMs: [200] },
      timing: { ...s.timing, resultRetentionMs: 500 },
    };
  });
  await expect.poll(() => faults.turnTaken.has(waited), { timeout: 15_000 }).toBe(false);
  const waiting = stack.client.workflow.getHandle(webhookDeliveryWorkflowId(waited));
  await expect.poll(async () => (await waiting.describe()).raw.pendingActivities?.length ?? 0).toBe(0);
  expect(await outcomesOf(waited)).toEqual([]);
  await waiting.signal(webhookNudgeSignalName);
  await turnWaited.result();
  await record(
    waiting.workflowId,
    story("webhook delivery: not its account's turn: it waits, holding no activity, until one is given back"),
  );
  expect(await outcomesOf(waited)).toEqual(['delivered']);

  // Sent to review (generation.failed, in review), then resumed by support: delivered on.
  const reviewed = await subscribed(
    'recorded webhook review [sim:uncertain]',
    '/ok',
    ['generation.failed', 'generation.requeued', 'generation.succeeded'],
    [200],
  );
  await hooks.until(() => hooks.deliveriesOf(reviewed.generationId).length >= 1);
  await reviewed.handle.executeUpdate(resolveUpdate, {
    args: [{ action: 'succeed', providerJobId: await providerJobIdOf(stack.db.pool, reviewed.generationId) }],
  });
  await hooks.until(() => hooks.deliveriesOf(reviewed.generationId).length >= 3);
  await record(
    reviewed.webhooks,
    story('webhook delivery: a generation in review, resumed by support: its later events delivered'),
  );
  expect(hooks.deliveriesOf(reviewed.generationId).map((d) => JSON.parse(d.body).type)).toEqual([
    'generation.failed',
    'generation.requeued',
    'generation.succeeded',
  ]);

  // Redelivered while the run waits for the content's expiry (3 s on), then once after it ended.
  const redelivered = await subscribed(
    'recorded webhook redelivery',
    '/ok',
    ['generation.succeeded', 'generation.content_expired'],
    [200],
    3_000,
  );
  const deliveries = () => hooks.deliveriesOf(redelivered.generationId);
  await hooks.until(() => deliveries().length >= 1);
  const seq = (JSON.parse(deliveries()[0]!.body) as { id: number }).id;
  const deps = { db: stack.db.pool, temporal: stack.client, taskQueue };
  const handle = stack.client.workflow.getHandle(redelivered.webhooks);
  expect((await handle.describe()).status.name).toBe('RUNNING');
  expect(await redeliverWebhook(deps, redelivered.generationId, seq)).toMatchObject({ outcome: 'queued' });
  await hooks.until(() => deliveries().length >= 2);
  expect((await handle.describe()).status.name).toBe('RUNNING');
  const [running, ended] = story(
    'webhook delivery: a redelivery while it runs, and one after it ended (a run of its own)',
  );
  await record(redelivered.webhooks, [running!]);
  expect(deliveries().map((d) => JSON.parse(d.body).type)).toEqual([
    'generation.succeeded',
    'generation.succeeded',
    'generation.content_expired',
  ]);
  expect(await redeliverWebhook(deps, redelivered.generationId, seq)).toMatchObject({ outcome: 'queued' });
  await hooks.until(() => deliveries().length >= 4);
  await record(redelivered.webhooks, [ended!]);
  await redelivered.handle.result();
}
