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
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { buildWorkflowBundle } from '../../src/worker/workflow-bundle.js';
import { buildIdOf } from '../../src/worker/worker-version.js';
import { batchLines, postBatch, useBatchStack, waitForBatch } from '../support/batches.js';
import { runAdminCli } from '../support/admin.js';
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
 * A second batch, pinned to A as a batch of a build from before is, waits once A is gone, until
 * `admin cancel-batch` moves it to B, which cancels it (`admin batch` shows where it stands).
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

  const workflowIdOf = (batchId: string) =>
    stack.db.pool.oneFirst(sql.type(z.object({ workflow_id: z.string() }))`
      SELECT workflow_id FROM batches WHERE id = ${batchId}`);
  const admin = async (args: string[]) => {
    const ran = await runAdminCli([...args, '--json'], stack.db.url, {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: stack.worker.taskQueue,
    });
    expect(ran.code, ran.stderr).toBe(0);
    return JSON.parse(ran.stdout) as Record<string, any>;
  };

  it('a batch started on A finishes on B once A’s workers are gone, and its history replays on both builds; one left Pinned to A is canceled by admin cancel-batch', async () => {
    const bundleA = inject('workflowBundlePath');
    const a = buildIdOf(await readFile(bundleA, 'utf8'));
    const b = buildIdOf(await readFile(bundleB, 'utf8'));
    const start = async (what: string) => {
      const created = await postBatch(stack.api, stack.account.key, {
        requests: batchLines(16, (i) => `line ${i} ${what} [sim:slow=1]`),
      });
      expect(created.statusCode, created.body).toBe(201);
      return created.json().id as string;
    };
    const batch = await start('across builds');
    // The second stands for a batch a build from before started Pinned: pinned to A by an override.
    const pinned = await start('pinned to A');
    await stack.client.workflowService.updateWorkflowExecutionOptions({
      namespace: 'default',
      workflowExecution: { workflowId: await workflowIdOf(pinned) },
      workflowExecutionOptions: {
        versioningOverride: { pinned: { behavior: 1, version: { deploymentName, buildId: a } } },
      },
      updateMask: { paths: ['versioning_override'] },
    });
    for (const id of [batch, pinned])
      await waitForBatch(stack.api, stack.account.key, id, (x) => x.request_counts.succeeded >= 2, 30_000);

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
                WHERE batch_id IN (${batch}, ${pinned}) AND status = 'queued' AND created_at < ${switched}`),
            { timeout: 30_000, interval: 200 },
          )
          .toBe(0);
        await stack.worker.stopWorker();
        const done = await waitForBatch(stack.api, stack.account.key, batch, undefined, 60_000);
        expect(done).toMatchObject({ status: 'completed', request_counts: { total: 16, succeeded: 16 } });

        const workflowId = await workflowIdOf(batch);
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

        // The one pinned to A waits for A's workers, for good: admin batch shows it so, and
        // admin cancel-batch moves it to the current build, which carries the cancel out.
        const shown = await admin(['batch', '--id', pinned]);
        expect(shown).toMatchObject({
          batch: { id: pinned, status: 'in_progress' },
          workflow: { running: true, override: 'pinned', pinned: true },
        });
        expect(shown.request_counts.pending).toBeGreaterThan(0);
        const canceled = await admin(['cancel-batch', '--id', pinned]);
        expect(canceled).toMatchObject({
          batch: { status: 'canceling' },
          moved_to_current_build: true,
          workflow: { running: true, override: 'auto_upgrade', pinned: false },
        });
        const ended = await waitForBatch(stack.api, stack.account.key, pinned, undefined, 60_000);
        expect(ended.status).toBe('canceled');
        expect(ended.request_counts.canceled).toBeGreaterThan(0);
        expect(ended.request_counts.pending + ended.request_counts.queued).toBe(0);
        expect((await admin(['batch', '--id', pinned])).workflow).toMatchObject({
          running: false,
          status: 'COMPLETED',
        });
      });
    } finally {
      await connection.close();
    }
  }, 240_000);
});
