import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { createActivities } from '../../src/activities/index.js';
import { randomBase62 } from '../../src/ids.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { buildWorkflowBundle } from '../../src/worker/workflow-bundle.js';
import { buildIdOf } from '../../src/worker/worker-version.js';
import { batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { runsOf } from '../support/workflow-runs.js';

type History = temporal.api.history.v1.IHistory;

/** The build ids and versioning behaviours of the workflow tasks a run's history shows, in order, repeats dropped. */
function ranOn(history: History): string[] {
  const behaviours = { 1: 'PINNED', 2: 'AUTO_UPGRADE' } as Record<number, string>;
  const seen = (history.events ?? []).flatMap((event) => {
    const done = event.workflowTaskCompletedEventAttributes;
    if (!done) return [];
    return [`${done.deploymentVersion?.buildId}:${behaviours[done.versioningBehavior ?? 0] ?? 'none'}`];
  });
  return seen.filter((s, i) => s !== seen[i - 1]);
}

const countRow = z.object({ n: z.coerce.number() });

/**
 * Issue 45 §4: a deploy never strands a batch. A batch runs on build A; build B is made current and
 * A's workers stop once the lines' generations A started have ended (their active lives are
 * Pinned, and finish on A). The batch's workflow is Auto-Upgrade: its next tasks run on B, and it
 * finishes. Its history, which spans both builds (and continues as new), replays on either build.
 */
describe('a batch across a change of build', () => {
  const deploymentName = `batch-builds-${randomBase62(6)}`;
  const stack = useBatchStack({
    worker: { deploymentName, simDelayMs: 20 },
    apiEnv: { BATCH_LINES_IN_FLIGHT: '2', BATCH_HISTORY_EVENTS_PER_RUN: '20' },
  });
  let scratch: string;
  let bundleB: string;
  beforeAll(async () => {
    // Short slices: the batch's workflow continues as new a few times, across the change too.
    stack.worker.deps.batchTiming = { pollIntervalMs: 100, sliceMs: 500 };
    scratch = await mkdtemp(path.join(os.tmpdir(), 'batch-build-b-'));
    bundleB = path.join(scratch, 'workflow-bundle.js');
    await buildWorkflowBundle(
      bundleB,
      fileURLToPath(new URL('../support/changed-workflows.ts', import.meta.url)),
    );
  }, 120_000);
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  it('a batch started on A finishes on B once A’s workers are gone; its history replays on both builds', async () => {
    const bundleA = inject('workflowBundlePath');
    const a = buildIdOf(await readFile(bundleA, 'utf8'));
    const b = buildIdOf(await readFile(bundleB, 'utf8'));
    const created = await postBatch(stack.api, stack.account.key, {
      requests: batchLines(16, (i) => `line ${i} across builds [sim:slow=1]`),
    });
    expect(created.statusCode, created.body).toBe(201);
    const batch = created.json();
    await waitForBatch(
      stack.api,
      stack.account.key,
      batch.id,
      (x) => x.request_counts.succeeded >= 2,
      30_000,
    );

    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const workerB = await createWorker({
      connection,
      namespace: 'default',
      taskQueue: stack.worker.taskQueue,
      activities: createActivities(stack.worker.deps),
      workflowBundlePath: bundleB,
      deployment: { name: deploymentName, currentVersion: 'always' },
    });
    try {
      await workerB.runUntil(async () => {
        expect(await workerB.currentVersion()).toBe(b);
        const switched = new Date().toISOString();
        // The lines' generations started on A finish on A (Pinned); then A's workers stop, as a
        // deploy that replaces them does.
        await expect
          .poll(
            () =>
              stack.db.pool.oneFirst(sql.type(countRow)`
                SELECT count(*) AS n FROM generations
                WHERE batch_id = ${batch.id as string} AND status = 'queued' AND created_at < ${switched}`),
            { timeout: 30_000, interval: 200 },
          )
          .toBe(0);
        await stack.worker.stopWorker();
        const done = await waitForBatch(stack.api, stack.account.key, batch.id, undefined, 60_000);
        expect(done).toMatchObject({ status: 'completed', request_counts: { total: 16, succeeded: 16 } });

        const workflowId = await stack.db.pool.oneFirst(sql.type(z.object({ workflow_id: z.string() }))`
          SELECT workflow_id FROM batches WHERE id = ${batch.id as string}`);
        const runs = await runsOf(stack.client, workflowId);
        expect(runs.length).toBeGreaterThan(1);
        const builds = runs.flatMap((run) => ranOn(run.history));
        expect(builds[0]).toBe(`${a}:AUTO_UPGRADE`);
        expect(builds.at(-1)).toBe(`${b}:AUTO_UPGRADE`);
        expect(new Set(builds)).toEqual(new Set([`${a}:AUTO_UPGRADE`, `${b}:AUTO_UPGRADE`]));
        // Every run of it, those that crossed from A to B included, replays on either build.
        for (const [i, run] of runs.entries())
          for (const codePath of [bundleA, bundleB])
            await Worker.runReplayHistory(
              { workflowBundle: { codePath } },
              run.history,
              `${workflowId}-${i}`,
            );
      });
    } finally {
      await connection.close();
    }
  }, 180_000);
});
