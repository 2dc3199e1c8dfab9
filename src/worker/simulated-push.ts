import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { providerJobEndedSignal } from '../workflows/generation-messages.js';

const workflowRow = z.object({ workflow_id: z.string() });

/**
 * How the simulated provider pushes a job's end, as fal and Replicate push theirs to our webhook
 * route: it signals the generation's workflow (providerJobEndedSignal) itself, since it lives in
 * the worker. A push that cannot be sent is logged and left to the wait's fallback read.
 */
export function signalSimulatedJobEnded(
  db: CommonQueryMethods,
  temporal: () => Promise<Client>,
  logger: Logger,
): (generationId: string, jobId: string) => Promise<void> {
  return async (generationId, jobId) => {
    try {
      const row = await db.maybeOne(
        sql.type(workflowRow)`SELECT workflow_id FROM generations WHERE id = ${generationId}`,
      );
      if (!row) return;
      const client = await temporal();
      await client.workflow
        .getHandle(row.workflow_id)
        .signal(providerJobEndedSignal, { generationId, jobId });
    } catch (error) {
      logger.warn(
        { err: error, generationId },
        'the simulated provider could not push a job’s end; the fallback read will find it',
      );
    }
  };
}
