import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationActivities } from '../../src/activities/generation-activities.js';
import { flagQueuedForReview } from '../../src/db/reconciliation-repository.js';
import {
  createMetricsRegistry,
  metricNames,
  workerGenerationMetrics,
} from '../../src/observability/metrics.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { inProcessRenderer } from '../../src/providers/simulated/renderer.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { generationErrors } from '../../src/workflows/generation-errors.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { parseScrape } from '../support/prometheus.js';

const model = 'lumen-lite';

/**
 * Each activity that commits an outcome counts it only when its statement changed the row: run
 * twice, as a retry after a lost answer or a support reset would run it, it counts once.
 */
describe('outcome counters under retried activities', () => {
  let db: TestDatabase;
  let folder: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    folder = await mkdtemp(path.join(os.tmpdir(), 'outcomes-'));
  });
  afterAll(async () => {
    await db?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  it('admission, refusal, success, refund and review each count once', async () => {
    const registry = createMetricsRegistry();
    const provider = new SimulatedProvider(db.pool, { delayMs: 0, renderer: inProcessRenderer });
    const activities = createGenerationActivities({
      db: db.pool,
      providerFor: () => provider,
      storage: new LocalStorage(folder, 'http://results.test'),
      concurrencyLimit: 10,
      metrics: workerGenerationMetrics(registry),
    });
    const twice = async (run: () => Promise<unknown>) => {
      await run();
      await run();
    };
    const account = await createPaidAccount(db.pool, { oneTime: 100 });

    // Admitted (2 credits), then succeeded.
    const succeeding = generationStart(account, 'a lighthouse');
    await twice(() => activities.debit(succeeding));
    const { jobId } = await activities.submit(succeeding);
    const status = await provider.status(jobId);
    if (status.state !== 'succeeded') throw new Error(`provider says ${status.state}`);
    const persist = activities.persistResults.bind(activities);
    await twice(() =>
      new MockActivityEnvironment().run(
        persist,
        { generationId: succeeding.generationId, model, jobId, results: status.results },
        60_000,
      ),
    );

    // Admitted, then refunded.
    const failing = generationStart(account, 'a storm');
    await activities.debit(failing);
    await twice(() => activities.refund(failing.generationId, generationErrors.providerFailed('no')));

    // Admitted, sent to review, then refunded by support: one review, one refund.
    const uncertain = generationStart(account, 'fog');
    await activities.debit(uncertain);
    await twice(() =>
      activities.markNeedsReview(uncertain.generationId, generationErrors.submissionUnresolved),
    );
    await twice(() => activities.refund(uncertain.generationId, generationErrors.interrupted));

    // Refused: more than the balance.
    const poor = await createPaidAccount(db.pool, { oneTime: 1 });
    const dear = generationStart(poor, 'dear');
    await twice(() => activities.debit(dear));

    // Flagged by the reconciliation sweep while still queued.
    const overdue = generationStart(account, 'overdue');
    await activities.debit(overdue);
    expect(await flagQueuedForReview(db.pool, overdue.generationId)).toBe(model);
    expect(await flagQueuedForReview(db.pool, overdue.generationId)).toBeNull();

    const counted = parseScrape(await registry.metrics());
    expect(counted.value(metricNames.generationsAdmitted, { model })).toBe(4);
    expect(counted.value(metricNames.creditsDebited, { model })).toBe(8);
    expect(counted.value(metricNames.generationsSucceeded, { model })).toBe(1);
    expect(counted.value(metricNames.generationsFailed, { model, code: 'generation_failed' })).toBe(1);
    expect(counted.value(metricNames.generationsFailed, { model, code: 'generation_interrupted' })).toBe(1);
    expect(counted.value(metricNames.generationsRefunded, { model })).toBe(2);
    expect(counted.value(metricNames.creditsRefunded, { model })).toBe(4);
    expect(counted.value(metricNames.generationsSentToReview, { model })).toBe(1);
    expect(counted.value(metricNames.generationsRejected, { model, code: 'insufficient_credits' })).toBe(1);
  });
});
