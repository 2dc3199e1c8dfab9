import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { supportCommands } from '../../src/admin/support-commands.js';
import { cancelGeneration } from '../../src/generations/cancel-generation.js';
import { generationWorkflowId, startGeneration } from '../../src/generations/admission/start-generation.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { LocalStorage } from '../../src/storage/storage.js';
import { buildWorkflowBundle } from '../../src/worker/workflow-bundle.js';
import { createGeneration, generationStart } from '../support/generations.js';
import { workflowIdOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import type { Answers } from '../support/workflows/continue-as-new-on-update.js';

/**
 * Issue 28 follow-up: an update (a repeated POST's admit, a cancel, support's resolve) that reaches
 * a run in the workflow task it continues as new in is not answered by that run. The callers ask
 * the workflow id again, and its newest run answers, instead of answering 503 (or failing support's
 * command) for a generation that exists. The run here (test/support/workflows) continues as new as
 * the first update reaches it, every time, on the real Temporal server.
 */
describe('an update that reaches a run as it continues as new', () => {
  const stack = useGenerationStack();
  const taskQueue = `can-race-${randomBase62(8)}`;
  let scratch: string;
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), 'can-race-'));
    const bundle = path.join(scratch, 'workflow-bundle.js');
    const entry = fileURLToPath(
      new URL('../support/workflows/continue-as-new-on-update.ts', import.meta.url),
    );
    await buildWorkflowBundle(bundle, entry);
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    worker = await Worker.create({ connection, taskQueue, workflowBundle: { codePath: bundle } });
    running = worker.run();
  }, 120_000);
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await connection?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const answers = (generationId: string, fingerprint = 'f'): Answers => ({
    admit: {
      generationId,
      fingerprint,
      admission: { outcome: 'accepted', credits: 1 },
      keyHeldUntil: new Date(Date.now() + 3_600_000).toISOString(),
    },
    progress: { generationId, step: 'generating', providerJobId: 'job', expiresAt: null },
  });
  /** The racing workflow under `workflowId` (whatever ran there before is ended first). */
  const race = async (workflowId: string, given: Answers) => {
    await stack.client.workflow
      .getHandle(workflowId)
      .terminate('replaced by the racing workflow')
      .catch(() => undefined);
    return stack.client.workflow.start('continuesAsNewOnUpdate', { workflowId, taskQueue, args: [given] });
  };
  /** How many runs of the racing workflow the workflow id has had (the first continued as the second). */
  const racingRuns = async (workflowId: string) => {
    let runs = 0;
    for await (const w of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
      if (w.type === 'continuesAsNewOnUpdate') runs++;
    return runs;
  };
  /** A queued generation of the stack's account whose workflow is replaced by the racing one. */
  const queuedGeneration = async () => {
    const response = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'held in the queue [sim:queued=600]',
    });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json().id as string;
    return { id, workflowId: await workflowIdOf(stack.db.pool, id) };
  };

  it('a cancel: the newest run decides (not 503)', async () => {
    const { id, workflowId } = await queuedGeneration();
    await race(workflowId, answers(id));
    const result = await cancelGeneration(
      { db: stack.db.pool, temporal: stack.client, timeoutMs: 10_000 },
      id,
      null,
    );
    expect(result).toMatchObject({ canceled: false, generation: { id, status: 'queued' } });
    await expect.poll(() => racingRuns(workflowId)).toBe(2);
  });

  it("support's resolve: the newest run answers (the command does not fail)", async () => {
    const { id, workflowId } = await queuedGeneration();
    await race(workflowId, answers(id));
    const resolved = await supportCommands['resolve-generation']!.run(
      { db: stack.db.pool, temporal: () => Promise.resolve(stack.client) },
      { id, succeed: 'job' },
      [],
    );
    expect(resolved.json).toMatchObject({ generationId: id, step: 'generating' });
    await expect.poll(() => racingRuns(workflowId)).toBe(2);
  });

  const request = (key: string) => ({
    accountId: stack.account.accountId,
    apiKeyId: stack.account.keyId,
    idempotencyKey: key,
    model: { id: 'lumen-lite', media_type: 'image' as const },
    input: { prompt: 'a repeated POST' },
    fingerprint: 'f',
  });
  const deps = () => ({
    db: stack.db.pool,
    temporal: stack.client,
    taskQueue,
    storage: new LocalStorage(scratch, 'http://127.0.0.1:9'),
    admissionTimeoutMs: 10_000,
    timing: generationStart(stack.account, 'unused').timing,
  });

  it("a repeated POST's admit (update-with-start on the running workflow): admitted, not 503", async () => {
    const key = `race-${randomBase62(6)}`;
    const workflowId = generationWorkflowId(stack.account.keyId, key, 'unused');
    await race(workflowId, answers('gen_held'));
    const outcome = await startGeneration(deps(), request(key));
    expect(outcome).toMatchObject({ outcome: 'admitted', generationId: 'gen_held' });
  });

  it('a repeated POST while its provider is down meets the running generation, not a refusal', async () => {
    const key = `race-${randomBase62(6)}`;
    const workflowId = generationWorkflowId(stack.account.keyId, key, 'unused');
    await race(workflowId, answers('gen_held'));
    const outcome = await startGeneration(deps(), request(key), {
      refuseNew: () => {
        throw new Error('refused as new: the running generation was not met');
      },
    });
    expect(outcome).toMatchObject({ outcome: 'admitted', generationId: 'gen_held' });
  });
});
