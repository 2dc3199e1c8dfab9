import type { Client } from '@temporalio/client';
import type { CommonQueryMethods } from 'slonik';
import { ApiError } from '../../vocabulary/errors.js';
import { principalOf } from '../auth-plugin.js';
import { cancelGeneration } from '../../generations/cancel-generation.js';
import { sendGeneration } from '../conditional-reads.js';
import { toGeneration } from '../generation-view.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/**
 * POST /v1/generations/{id}/cancel. No Idempotency-Key: a cancel is idempotent by nature. 200 with
 * the generation once it is canceled (failed, `canceled`, refunded), now or before; 409
 * not_cancelable with the generation as it stands when the provider runs or ran it, or it ended
 * otherwise. The workflow decides (its cancel update), never this route.
 */
export function cancelRoutes(
  app: ZodApp,
  deps: { db: CommonQueryMethods; temporal: Client; admissionTimeoutMs: number },
): void {
  app.post(
    '/v1/generations/:id/cancel',
    { schema: routeSchemas.cancelGeneration },
    async (request, reply) => {
      const { id } = request.params;
      const result = id
        ? await cancelGeneration(
            { db: deps.db, temporal: deps.temporal, timeoutMs: deps.admissionTimeoutMs },
            id,
            principalOf(request).accountId,
          )
        : null;
      if (!result) throw new ApiError('not_found', 'No generation with this id in this account.');
      reply.header('x-request-id', id);
      if (result.canceled) return sendGeneration(reply, result.generation, { status: 200 });
      throw new ApiError(
        'not_cancelable',
        result.generation.status === 'queued'
          ? 'The provider is running or has run this generation; it can no longer be canceled without charge. Nothing changed.'
          : `This generation is ${result.generation.status} already; nothing changed.`,
        { requestId: id, generation: toGeneration(result.generation) },
      );
    },
  );
}
