import type { CommonQueryMethods } from 'slonik';
import { findKeyState } from '../../db/key-limits.js';
import { ApiError } from '../../vocabulary/errors.js';
import { principalOf } from '../auth-plugin.js';
import { toApiKey } from '../key-schemas.js';
import { routeSchemas } from '../route-schemas.js';
import type { ZodApp } from '../zod-type-provider.js';

/**
 * GET /v1/key: the key in use (an API key, or a connected app's token), its rules and its spend,
 * so that a script or an agent can plan within its budget. Read fresh: a limit is only useful
 * exact.
 */
export function keyRoutes(app: ZodApp, deps: { db: CommonQueryMethods }): void {
  app.get('/v1/key', { schema: routeSchemas.getKey }, async (request) => {
    const { keyId, accountId } = principalOf(request);
    const state = await findKeyState(deps.db, keyId, accountId);
    if (!state) throw new ApiError('unauthorized', 'Unknown API key.');
    return toApiKey(state);
  });
}
