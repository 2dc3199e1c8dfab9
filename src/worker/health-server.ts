import http from 'node:http';
import type { Client } from '@temporalio/client';
import { sql, type CommonQueryMethods } from 'slonik';
import { checkTimeoutMs, readiness, readinessCheck } from '../dependencies/readiness.js';

/**
 * The worker's own small HTTP port: GET /healthz (alive) and GET /readyz (PostgreSQL and Temporal
 * answer, and the worker is polling). Nothing else is served there.
 */
export async function startHealthServer(options: {
  host: string;
  port: number;
  db: CommonQueryMethods;
  temporal: Client;
  /** Whether the worker is polling its task queues. */
  polling: () => boolean;
}): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const send = (statusCode: number, body: unknown) => {
      response.writeHead(statusCode, { 'content-type': 'application/json; charset=utf-8' });
      response.end(JSON.stringify(body));
    };
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || (path !== '/healthz' && path !== '/readyz'))
      return send(404, {
        error: { code: 'not_found', message: 'Only GET /healthz and GET /readyz are served here.' },
      });
    if (path === '/healthz') return send(200, { status: 'ok' });
    void Promise.all([
      readinessCheck(() => options.db.query(sql.unsafe`SELECT 1`)),
      // With a deadline, or Temporal's client would go on retrying for half a minute after the answer.
      readinessCheck(() =>
        options.temporal.connection.withDeadline(Date.now() + checkTimeoutMs, () =>
          options.temporal.workflowService.getSystemInfo({}),
        ),
      ),
    ]).then(([postgres, temporal]) => {
      const { statusCode, body } = readiness({
        postgres,
        temporal,
        worker: options.polling() ? 'ok' : 'the worker is not polling',
      });
      send(statusCode, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return server;
}
