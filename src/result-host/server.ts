import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import { readiness, readinessCheck } from '../dependencies/readiness.js';
import type { S3Storage } from '../storage/s3-storage.js';
import { serveBucketFiles } from './bucket-files.js';
import { closeUnusedConnectionsOnShutdown } from '../net/unused-connections.js';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
} from 'fastify';
import type { Registry } from 'prom-client';
import { observeHttpRequests } from '../observability/http-metrics.js';

/**
 * The {result_host}: serves stored results read-only at stable, unguessable
 * URLs (`/<random token>/<file>`). Files never change once written, so they
 * are served as immutable; there is no listing and no index. They come from
 * the storage folder, or, with a bucket, are streamed from it.
 */
export async function buildResultHost(
  options: {
    logger: FastifyBaseLogger;
    /** Downloads are timed into it (by route pattern: `/*` for every result, never its token). */
    metrics?: Registry;
  } & ({ storageDir: string } | { bucket: S3Storage }),
): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
  });
  // Stopping waits for the downloads in flight, not for idle keep-alive connections (72 s).
  closeUnusedConnectionsOnShutdown(app);
  if (options.metrics) observeHttpRequests(app, options.metrics);
  let storageReadable: () => Promise<unknown>;
  if ('bucket' in options) {
    serveBucketFiles(app, options.bucket);
    storageReadable = () => options.bucket.check();
  } else {
    const root = path.resolve(options.storageDir);
    await mkdir(root, { recursive: true });
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
    storageReadable = () => access(root, constants.R_OK);
  }
  // Alive; ready when the storage (folder or bucket) can be read. No result is ever named like these (folders are tokens).
  app.get('/healthz', (_request, reply) => reply.send({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const { statusCode, body } = readiness({ storage: await readinessCheck(storageReadable) });
    return reply.code(statusCode).send(body);
  });
  const notFound = (reply: FastifyReply) =>
    reply.code(404).send({ error: { code: 'not_found', message: 'No such result. It may have expired.' } });
  app.setNotFoundHandler((_request, reply) => notFound(reply));
  // @fastify/static (10) answers its own 403 for paths it will not serve (dot or empty segments,
  // `..%2F`, dotfiles under `dotfiles: 'deny'`). On this host every such path names no result, and
  // a different status would tell a prober which spellings reach the folder: same 404 as any miss.
  app.setErrorHandler((error: Error & { code?: string; statusCode?: number }, _request, reply) => {
    if (error.code === 'FST_STATIC_FORBIDDEN_PATH' || error.statusCode === 403) return notFound(reply);
    throw error; // to Fastify's own handler, as before
  });
  await app.ready();
  return app;
}
