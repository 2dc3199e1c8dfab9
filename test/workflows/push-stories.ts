import type { WorkflowHandle } from '@temporalio/client';
import { sql } from 'slonik';
import { expect, inject } from 'vitest';
import { z } from 'zod';
import { createActivities } from '../../src/activities/index.js';
import { randomBase62 } from '../../src/ids.js';
import { createLogger } from '../../src/logger.js';
import { SimulatedProvider } from '../../src/providers/simulated/simulated-provider.js';
import { createWorker, NativeConnection } from '../../src/worker/create-worker.js';
import { signalSimulatedJobEnded } from '../../src/worker/simulated-push.js';
import { generationWorkflow } from '../../src/workflows/generation-workflow.js';
import type { GenerationStart } from '../../src/workflows/generation-types.js';
import { generationStart, getGeneration } from '../support/generations.js';
import type { GenerationStack } from '../support/stack.js';
import { activitiesOf, runsOf } from '../support/workflow-runs.js';
import { testDeployment } from '../support/worker.js';
import { generationStories } from './stories.js';

/** Saves the last runs of a workflow id's chain under these names, once ended (histories.record.ts). */
type Record = (workflowId: string, names: readonly string[]) => Promise<void>;

/** What becomes of a generation's push: sent as the provider sends it, lost, sent twice, sent late, or held for the story to send. */
type PushFate = 'sent' | 'lost' | 'twice' | { lateMs: number } | 'held';

const story = (name: string) => generationStories[name]!;
/** The simulated provider's time per job, and the fallback reads' interval: the first fallback read comes at 600 ms. */
const delayMs = 300;
const fallbackMs = 300;

/**
 * The stories of the provider's push (issue 47): a job's end pushed and read once; the push lost,
 * and the fallback read finding the end; the push racing the fallback read; the push sent twice;
 * a long wait continued as new, its end then pushed to the new run. Told on a worker of their own
 * whose simulated provider's pushes the story decides (a webhook's fate at fal or Replicate is the
 * same signal to the workflow: the API's provider-webhook route sends it once verified).
 */
export async function tellPushStories(stack: GenerationStack, record: Record): Promise<void> {
  const { client } = stack;
  const fates = new Map<string, PushFate>();
  const signal = signalSimulatedJobEnded(
    () => Promise.resolve(client),
    createLogger('push-stories', 'silent'),
  );
  const provider = new SimulatedProvider(stack.db.pool, {
    delayMs,
    storage: stack.worker.deps.storage,
    push: async (to, jobId) => {
      const fate = fates.get(to.generationId) ?? 'sent';
      if (fate === 'lost' || fate === 'held') return;
      if (typeof fate === 'object') await new Promise((resolve) => setTimeout(resolve, fate.lateMs));
      await signal(to, jobId);
      if (fate === 'twice') await signal(to, jobId);
    },
  });
  const taskQueue = `record-push-${randomBase62(8)}`;
  const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const worker = await createWorker({
    connection,
    namespace: 'default',
    taskQueue,
    workflowBundlePath: inject('workflowBundlePath'),
    deployment: { name: testDeployment, currentVersion: 'when-none' },
    activities: createActivities({
      ...stack.worker.deps,
      providerFor: () => provider,
      fallbackReadIntervalMs: fallbackMs,
    }),
  });
  const start = async (
    prompt: string,
    fate: PushFate,
    change: (s: GenerationStart) => GenerationStart = (s) => s,
  ): Promise<{ handle: WorkflowHandle; generationId: string }> => {
    const started = change(generationStart(stack.account, prompt));
    started.timing = { ...started.timing, resultRetentionMs: 500 };
    fates.set(started.generationId, fate);
    const handle = await client.workflow.start(generationWorkflow, {
      workflowId: started.workflowId,
      taskQueue,
      args: [started],
    });
    return { handle, generationId: started.generationId };
  };
  /** The reads of the job the generation's active runs made. */
  const readsOf = async (handle: WorkflowHandle) => {
    const reads: string[] = [];
    for (const { history } of await runsOf(client, handle.workflowId))
      for (const { name, summary } of activitiesOf(history))
        if (name === 'readProviderJob') reads.push(/\((\w+)\)/.exec(summary ?? '')?.[1] ?? '?');
    return reads;
  };

  try {
    await worker.runUntil(async () => {
      await worker.currentVersion();
      const succeeds = async (name: string, fate: PushFate, reads: (seen: string[]) => void) => {
        const { handle, generationId } = await start(`recorded ${name}`, fate);
        await record(handle.workflowId, story(name));
        expect(await getGeneration(stack.api, stack.account.key, generationId)).toMatchObject({
          status: 'succeeded',
        });
        reads(await readsOf(handle));
      };
      await succeeds("the provider pushes the job's end: read once, persisted", 'sent', (reads) =>
        expect(reads).toEqual(['pushed']),
      );
      await succeeds("the push is lost: the fallback read finds the job's end", 'lost', (reads) =>
        expect(reads).toEqual(['fallback']),
      );
      await succeeds('the push comes twice: the job read once, persisted once', 'twice', (reads) =>
        expect(reads).toEqual(['pushed']),
      );
      await succeeds(
        'the push comes as the fallback read is due: the job read once or twice, persisted once',
        { lateMs: delayMs + fallbackMs - 25 },
        (reads) => expect(reads.length).toBeGreaterThanOrEqual(1),
      );

      // A long wait: its history passes the (lowered) limit, so the run continues as new at a
      // read; the job's end, pushed then, reaches the new run.
      const { handle, generationId } = await start('recorded long wait [sim:slow=600]', 'held', (s) => ({
        ...s,
        timing: { ...s.timing, waitHistoryEventLimit: 40 },
      }));
      await expect
        .poll(async () => (await runsOf(client, handle.workflowId)).length, { timeout: 20_000, interval: 50 })
        .toBe(2);
      const jobId = await stack.db.pool.oneFirst(sql.type(z.object({ job_id: z.string() }))`
        UPDATE sim_provider_jobs SET ready_at = now() WHERE token = ${`tok_${generationId}`} RETURNING job_id`);
      await signal({ generationId, workflowId: handle.workflowId }, jobId);
      await record(
        handle.workflowId,
        story('a long wait continues as new; its end, pushed then, reaches the new run'),
      );
      expect(await getGeneration(stack.api, stack.account.key, generationId)).toMatchObject({
        status: 'succeeded',
      });
    });
  } finally {
    await connection.close();
  }
}
