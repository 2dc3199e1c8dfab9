import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { httpRequestHistogram } from './metrics.js';

const knownMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Times every answered request by its route pattern (`/v1/generations/:id`, never the path with
 * its id, so the series stay few), method and status. A request no route matched (404, 405, an
 * unreadable path) is `unmatched`. Returns the observer for answers given outside Fastify's hooks.
 */
export function observeHttpRequests(
  app: FastifyInstance,
  registry: Registry,
): (request: FastifyRequest, reply: FastifyReply) => void {
  const histogram = httpRequestHistogram(registry);
  const observe = (request: FastifyRequest, reply: FastifyReply) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    const method = knownMethods.has(request.method) ? request.method : 'other';
    histogram.observe({ route, method, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  };
  app.addHook('onResponse', (request, reply, done) => {
    observe(request, reply);
    done();
  });
  return observe;
}
