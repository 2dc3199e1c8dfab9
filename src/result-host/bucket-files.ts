import type { FastifyInstance, FastifyReply } from 'fastify';
import { immutableCacheControl, type ByteRange, type ObjectHead } from '../storage/s3-objects.js';
import type { S3Storage } from '../storage/s3-storage.js';

/**
 * Serves `/{prefix}/{name}` from the bucket, as @fastify/static serves the folder: type, length,
 * one byte range (206, or 416 past the end), immutable caching, ETag and If-None-Match, HEAD
 * without the bytes. A missing object is the not-found handler's 404.
 */
export function serveBucketFiles(app: FastifyInstance, bucket: S3Storage): void {
  app.route<{ Params: { prefix: string; name: string } }>({
    method: ['GET', 'HEAD'],
    url: '/:prefix/:name',
    exposeHeadRoute: false,
    // The store failing is not the client's fault, and its message is not the client's business.
    errorHandler(error, request, reply) {
      request.log.error({ err: error, url: request.url }, 'reading a stored result failed');
      void reply.code(503).send({
        error: {
          code: 'service_unavailable',
          message: 'Stored results cannot be read right now; retry shortly.',
        },
      });
    },
    async handler(request, reply) {
      const { prefix, name } = request.params;
      if (request.method === 'HEAD') {
        const head = await bucket.head(prefix, name);
        if (!head) return reply.callNotFound();
        describe(reply, head).header('content-length', head.size);
        return reply.send();
      }
      const ifNoneMatch = request.headers['if-none-match'];
      const read = await bucket.open(prefix, name, {
        range: parseRange(request.headers.range) ?? undefined,
        ...(ifNoneMatch ? { ifNoneMatch } : {}),
      });
      switch (read.kind) {
        case 'missing':
          return reply.callNotFound();
        case 'not-modified':
          return reply
            .code(304)
            .header('etag', read.etag)
            .header('cache-control', immutableCacheControl)
            .send();
        case 'unsatisfiable':
          return reply
            .code(416)
            .header('content-range', `bytes */${read.size}`)
            .send({
              error: {
                code: 'range_not_satisfiable',
                message: `The range starts past the end of the file (${read.size} bytes).`,
              },
            });
        case 'found':
          describe(reply, read.head).header('content-length', read.length);
          if (read.range)
            reply
              .code(206)
              .header('content-range', `bytes ${read.range.start}-${read.range.end}/${read.head.size}`);
          return reply.send(read.body);
      }
    },
  });
}

function describe(reply: FastifyReply, head: ObjectHead): FastifyReply {
  reply
    .header('content-type', head.contentType)
    .header('accept-ranges', 'bytes')
    .header('cache-control', immutableCacheControl);
  if (head.etag) reply.header('etag', head.etag);
  if (head.lastModified) reply.header('last-modified', head.lastModified.toUTCString());
  return reply;
}

/**
 * The one byte range a Range header asks for; null, to serve the whole file, when there is none,
 * it is malformed or in another unit, or it asks for several (as @fastify/static does).
 */
function parseRange(header: string | undefined): ByteRange | null {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match) return null;
  const [, first = '', last = ''] = match;
  if (first === '') return last === '' ? null : { suffix: Number(last) };
  const start = Number(first);
  if (last === '') return { start };
  const end = Number(last);
  return end >= start ? { start, end } : null;
}
