import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActivityDeps } from '../../src/activities/activity-deps.js';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { createWebhookActivities } from '../../src/activities/webhook-activities.js';
import { saveGenerationWebhook } from '../../src/db/generation-webhooks.js';
import { deliveryAttemptsOf } from '../../src/db/webhook-delivery-reads.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { inProcessRenderer } from '../../src/providers/simulated/renderer.js';
import { LocalStorage } from '../../src/storage/storage.js';
import type { WebhookEvents, WebhookLook } from '../../src/workflows/contracts/webhook-delivery.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { useWebhookReceiver } from './webhook-receiver.js';

/**
 * The look that finds a new event makes its first attempt (issue 30: a change reaches its receiver
 * without a round trip through Temporal). Run again, as after its worker was lost, it sends
 * nothing twice: an event delivered is reported delivered, one that failed is handed to the
 * workflow's retries from its last attempt.
 */
describe('nextWebhookEvents with deliverFirst', () => {
  const hooks = useWebhookReceiver();
  let db: TestDatabase;
  let folder: string;
  let deps: ActivityDeps;
  beforeAll(async () => {
    db = await createTestDatabase();
    folder = await mkdtemp(path.join(os.tmpdir(), 'first-attempts-'));
    deps = {
      db: db.pool,
      providerFor: () => new SimulatedProvider(db.pool, { delayMs: 0, renderer: inProcessRenderer }),
      storage: new LocalStorage(folder, 'http://results.test'),
      concurrencyLimit: 10,
      temporal: () => Promise.reject(new Error('no Temporal here')),
      webhookDelivery: hooks.webhookDelivery,
    };
  });
  afterAll(async () => {
    await db?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  /** An admitted generation (its generation.created event) subscribed to that event at `url`. */
  const admitted = async (url: string) => {
    const start = generationStart(await createPaidAccount(db.pool, { oneTime: 100 }), 'a lighthouse');
    await createGenerationActivities(deps).debit(start);
    await saveGenerationWebhook(db.pool, start.generationId, { url, events: ['generation.created'] });
    return start.generationId;
  };
  const look = (input: WebhookLook): Promise<WebhookEvents> => {
    const activities = createWebhookActivities(deps);
    return new MockActivityEnvironment().run(() => activities.nextWebhookEvents(input));
  };

  it('delivers the event it found, and run again reports it delivered without sending it twice', async () => {
    const id = await admitted(`${hooks.origin()}/ok`);
    const first = await look({ generationId: id, afterSeq: 0, deliverFirst: true });
    const seq = first.events[0]!.seq;
    expect(first.firstAttempts).toEqual([{ seq, attempt: 1, outcome: 'delivered' }]);
    expect(hooks.deliveriesOf(id)).toHaveLength(1);
    const again = await look({ generationId: id, afterSeq: 0, deliverFirst: true });
    expect(again.firstAttempts).toEqual([{ seq, attempt: 1, outcome: 'delivered' }]);
    expect(hooks.deliveriesOf(id)).toHaveLength(1);
    expect((await deliveryAttemptsOf(db.pool, id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'delivered'],
    ]);
  });

  it('a retry of an event already delivered (the attempt timed out after delivering) sends nothing again', async () => {
    const id = await admitted(`${hooks.origin()}/ok`);
    const first = await look({ generationId: id, afterSeq: 0, deliverFirst: true });
    const seq = first.events[0]!.seq;
    expect(hooks.deliveriesOf(id)).toHaveLength(1);
    // The workflow never heard the answer, counted the attempt failed, and retries it.
    const activities = createWebhookActivities(deps);
    const retried = await new MockActivityEnvironment().run(() =>
      activities.deliverWebhook({ generationId: id, seq, attempt: 2 }),
    );
    expect(retried).toEqual({ outcome: 'delivered' });
    expect(hooks.deliveriesOf(id)).toHaveLength(1);
    expect((await deliveryAttemptsOf(db.pool, id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'delivered'],
    ]);
  });

  it('reports a failed first attempt; run again, leaves the retries to the workflow', async () => {
    hooks.flaky.push(500);
    const id = await admitted(`${hooks.origin()}/flaky`);
    const first = await look({ generationId: id, afterSeq: 0, deliverFirst: true });
    const seq = first.events[0]!.seq;
    expect(first.firstAttempts).toEqual([{ seq, attempt: 1, outcome: 'failed' }]);
    const again = await look({ generationId: id, afterSeq: 0, deliverFirst: true });
    expect(again.firstAttempts).toEqual([{ seq, attempt: 1, outcome: 'failed' }]);
    expect(hooks.deliveriesOf(id)).toHaveLength(1);
    expect((await deliveryAttemptsOf(db.pool, id)).map((a) => [a.attempt, a.status])).toEqual([[1, 500]]);
  });

  it('without deliverFirst (a workflow from before it) only looks', async () => {
    const id = await admitted(`${hooks.origin()}/ok`);
    const found = await look({ generationId: id, afterSeq: 0 });
    expect(found.events).toHaveLength(1);
    expect(found.firstAttempts).toBeUndefined();
    expect(hooks.deliveriesOf(id)).toEqual([]);
  });
});
