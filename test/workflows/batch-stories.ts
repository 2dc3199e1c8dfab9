import { sql } from 'slonik';
import { expect, inject } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config/service-config.js';
import { createLogger } from '../../src/process/logger.js';
import { wireBatchAdmission } from '../../src/worker/batch-admission.js';
import { batchLines, postBatch } from '../support/batches.js';
import type { GenerationStack } from '../support/stack.js';

const workflowRow = z.object({ workflow_id: z.string() });

/**
 * The batch workflow's stories (test/workflows/stories.ts): a batch of three lines, admitted in turn
 * through admission and completed; with a webhook, its delivery workflow (the generations') started
 * by the batch's and its events delivered. `record` saves the batch's run under the story's name.
 */
export async function tellBatchStory(
  stack: GenerationStack,
  record: (workflowId: string) => Promise<void>,
  /** With a webhook (its URL): the batch's delivery workflow starts, and `recordDeliveries` saves it. */
  webhook?: { url: string; recordDeliveries: (batchId: string) => Promise<void> },
): Promise<void> {
  const config = loadConfig({
    DATABASE_URL: stack.db.url,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    ...stack.worker.apiEnv,
  });
  const wired = await wireBatchAdmission(config, stack.db.pool, createLogger('batch-story', 'silent'));
  stack.worker.deps.batchLines = wired.lines;
  stack.worker.deps.batchTiming = { pollIntervalMs: 100, sliceMs: 5_000 };
  try {
    const created = await postBatch(
      stack.api,
      stack.account.key,
      {
        requests: batchLines(3),
        ...(webhook && {
          webhook: { url: webhook.url, events: ['batch.created', 'batch.progress', 'batch.completed'] },
        }),
      },
      webhook ? 'record-batch-webhook' : 'record-batch',
    );
    expect(created.statusCode, created.body).toBe(201);
    const batchId = created.json().id as string;
    const workflowId = await stack.db.pool.oneFirst(sql.type(workflowRow)`
      SELECT workflow_id FROM batches WHERE id = ${batchId}`);
    await record(workflowId);
    await webhook?.recordDeliveries(batchId);
  } finally {
    await wired.close();
  }
}
