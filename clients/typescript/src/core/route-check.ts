import { ApiError, RouteNotAvailableError } from './errors.js';

/**
 * A route this client knows but the server does not (404 "No route …", or 405): an API older than
 * the client. Rethrown as RouteNotAvailableError naming the route, so the caller sees why.
 */
export function routeMissing(error: unknown, route: string): never {
  if (
    error instanceof ApiError &&
    ((error.status === 404 && /^No route /.test(error.message.replace(/^\d+ \w+: /, ''))) ||
      error.status === 405)
  ) {
    throw new RouteNotAvailableError({
      status: error.status,
      code: 'route_not_available',
      message: `This API has no ${route}: it is older than this client (the route came with the API's Prefer-wait, cancel and quote additions).`,
      requestId: error.requestId,
      headers: error.headers,
      body: error.body,
    });
  }
  throw error;
}
