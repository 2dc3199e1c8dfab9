import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import { readiness, readinessCheck } from '../readiness.js';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { observeHttpRequests } from '../observability/http-metrics.js';

/**
 * The {result_host}: serves stored results read-only at stable, unguessable
 * URLs (`/<random token>/<file>`). Files never change once written, so they
 * are served as immutable; there is no listing and no index.
 */
export async function buildResultHost(options: {
  storageDir: string;
  logger: FastifyBaseLogger;
  /** Downloads are timed into it (by route pattern: `/*` for every result, never its token). */
  metrics?: Registry;
}): Promise<FastifyInstance> {
  const root = path.resolve(options.storageDir);
  await mkdir(root, { recursive: true });
  const app = Fastify({
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
  });
  if (options.metrics) observeHttpRequests(app, options.metrics);
  await app.register(fastifyStatic, {
    root,
    index: false,
    list: false,
    dotfiles: 'deny',
    immutable: true,
    maxAge: '365d',
    // Results are addressed by token only; no redirects from directory paths.
    redirect: false,
  });
  // Alive; ready when the storage folder can be read. No result is ever named like these (folders are tokens).
  app.get('/healthz', (_request, reply) => reply.send({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const { statusCode, body } = readiness({
      storage: await readinessCheck(() => access(root, constants.R_OK)),
    });
    return reply.code(statusCode).send(body);
  });
  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send({ error: { code: 'not_found', message: 'No such result. It may have expired.' } }),
  );
  await app.ready();
  return app;
}
