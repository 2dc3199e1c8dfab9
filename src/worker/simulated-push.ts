import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { providerJobEndedSignal } from '../workflows/generation-messages.js';

/**
 * How the simulated provider pushes a job's end, as fal and Replicate push theirs to our webhook
 * route: it signals the generation's workflow (providerJobEndedSignal) itself, since it lives in
 * the worker. A push that cannot be sent is logged and left to the wait's fallback read.
 */
export function signalSimulatedJobEnded(
  temporal: () => Promise<Client>,
  logger: Logger,
): (to: { generationId: string; workflowId: string }, jobId: string) => Promise<void> {
  return async ({ generationId, workflowId }, jobId) => {
    try {
      const client = await temporal();
      await client.workflow.getHandle(workflowId).signal(providerJobEndedSignal, { generationId, jobId });
    } catch (error) {
      logger.warn(
        { err: error, generationId },
        'the simulated provider could not push a job’s end; the fallback read will find it',
      );
    }
  };
}
