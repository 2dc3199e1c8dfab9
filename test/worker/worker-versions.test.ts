import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { buildWorkflowBundle } from '../../src/worker/workflow-bundle.js';
import { buildIdOf, currentVersion } from '../../src/worker/worker-version.js';
import { progressQuery } from '../../src/workflows/generation-messages.js';
import { runAdminCli } from '../support/admin.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf, workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { runsOf } from '../support/workflow-runs.js';

type History = temporal.api.history.v1.IHistory;

/** The build ids and versioning behaviours of the worker tasks that ran a run. */
function ranOn(history: History): string[] {
  const behaviours = { 1: 'PINNED', 2: 'AUTO_UPGRADE' } as Record<number, string>;
  return [
    ...new Set(
      (history.events ?? []).flatMap((event) => {
        const done = event.workflowTaskCompletedEventAttributes;
        if (!done) return [];
        return [`${done.deploymentVersion?.buildId}:${behaviours[done.versioningBehavior ?? 0] ?? 'none'}`];
      }),
    ),
  ];
}

/** B's one-millisecond timers (the generation's own wait sets timers of its own, of seconds). */
const timers = (history: History) =>
  (history.events ?? []).filter((e) => {
    const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
    return timeout && Number(timeout.seconds ?? 0) === 0 && Number(timeout.nanos ?? 0) <= 1_000_000;
  }).length;

/**
 * Worker Deployments: two builds whose workflow differs (B starts the story with a timer, which A's
 * histories cannot replay) on one task queue. A generation started on A finishes on A (its active
 * life is pinned) once B is current, while new generations go to B; the retention runs move to B.
 */
describe('two builds of the workflow in one Worker Deployment', () => {
  const deploymentName = `two-builds-${randomBase62(6)}`;
  const stack = useGenerationStack({ worker: { deploymentName, simDelayMs: 100 } });
  let scratch: string;
  let bundleB: string;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), 'second-build-'));
    bundleB = path.join(scratch, 'workflow-bundle.js');
    await buildWorkflowBundle(
      bundleB,
      fileURLToPath(new URL('../support/changed-workflows.ts', import.meta.url)),
    );
  }, 120_000);
  afterAll(() => rm(scratch, { recursive: true, force: true }));

  const create = async (prompt: string) => {
    const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
    expect(response.statusCode, response.body).toBe(202);
    return response.json().id as string;
  };

  it('a generation started on A finishes on A while new ones go to B, made current; a support reset moves a pinned one to B', async () => {
    const { client } = stack;
    const a = buildIdOf(await readFile(inject('workflowBundlePath'), 'utf8'));
    const b = buildIdOf(await readFile(bundleB, 'utf8'));
    expect(b).not.toBe(a);
    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    // The first worker of the deployment made its version current (none was).
    expect((await currentVersion(connection, 'default', deploymentName)).buildId).toBe(a);

    const first = await create('started on A [sim:slow=12]');
    const firstWorkflow = client.workflow.getHandle(await workflowIdOf(stack.db.pool, first));
    await expect.poll(async () => (await firstWorkflow.query(progressQuery)).step).toBe('generating');
    const reset = await create('started on A, reset once B is current [sim:slow=30]');
    const resetWorkflow = client.workflow.getHandle(await workflowIdOf(stack.db.pool, reset));
    await expect.poll(async () => (await resetWorkflow.query(progressQuery)).step).toBe('generating');

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
        // Support resets a generation pinned to A in its provider wait (a build with a bug, say), at
        // once (a loaded machine may take its slow job's time to get this far): the story runs again
        // from admission on the current version, charged and submitted once (checked below).
        expect((await resetWorkflow.query(progressQuery)).step).toBe('generating');
        const cli = await runAdminCli(['reset-generation', '--id', reset, '--reason', 'test'], stack.db.url, {
          TEMPORAL_ADDRESS: inject('temporalAddress'),
        });
        expect(cli.code, cli.stderr).toBe(0);
        const second = await create('started on B');
        for (const id of [first, second])
          await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded', 30_000);

        // The first generation's active life ran on A only (pinned), with A's code (no timer);
        // its retention run went to the current version, B.
        // The active run closes once the generation succeeded (its continue-as-new).
        await expect.poll(async () => (await runsOf(client, firstWorkflow.workflowId)).length).toBe(2);
        const [firstActive, firstKept] = await runsOf(client, firstWorkflow.workflowId);
        expect(ranOn(firstActive!.history)).toEqual([`${a}:PINNED`]);
        expect(timers(firstActive!.history)).toBe(0);
        await expect
          .poll(async () =>
            ranOn(await client.workflow.getHandle(firstWorkflow.workflowId, firstKept!.runId).fetchHistory()),
          )
          .toEqual([`${b}:AUTO_UPGRADE`]);

        // The second ran on B, with B's code (its timer).
        const [secondActive] = await runsOf(client, await workflowIdOf(stack.db.pool, second));
        expect(ranOn(secondActive!.history)).toEqual([`${b}:PINNED`]);
        expect(timers(secondActive!.history)).toBe(1);

        await pollGeneration(stack.api, stack.account.key, reset, (g) => g.status === 'succeeded', 60_000);
        // The reset run starts on the deployment's current version (B's code: its timer), pinned there.
        const [resetRun] = await runsOf(client, resetWorkflow.workflowId);
        expect(ranOn(resetRun!.history)).toEqual([`${b}:PINNED`]);
        expect(timers(resetRun!.history)).toBe(1);
        expect(await chargesOf(stack.db.pool, reset)).toEqual({
          debits: 1,
          refunds: 0,
          net: -2,
          submissions: 1,
        });
      });
    } finally {
      await connection.close();
    }
  }, 180_000);
});
