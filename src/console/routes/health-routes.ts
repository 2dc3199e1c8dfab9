import type { FastifyInstance } from 'fastify';
import { sql } from 'slonik';
import { readiness, readinessCheck } from '../../dependencies/readiness.js';
import type { ConsoleRouteDeps } from '../route-deps.js';

/**
 * GET /healthz (the process is alive) and GET /readyz (it can serve: PostgreSQL answers for every
 * page, Temporal answers for the playground and the progress of a generation), outside the session
 * guard, for docker-compose's healthcheck and a load balancer. The same bodies as the API's.
 */
export function healthRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  const open = { config: { consolePublic: true } };
  app.get('/healthz', open, (_request, reply) => reply.send({ status: 'ok' }));
  app.get('/readyz', open, async (_request, reply) => {
    const [postgres, temporal] = await Promise.all([
      readinessCheck(() => deps.db.query(sql.unsafe`SELECT 1`)),
      readinessCheck(() => deps.temporal.workflowService.getSystemInfo({})),
    ]);
    const { statusCode, body } = readiness({ postgres, temporal });
    return reply.code(statusCode).send(body);
  });
}
