import { PassThrough } from 'node:stream';
import type { FastifyReply } from 'fastify';

/** Whether the client asked for Server-Sent Events (EventSource sends exactly this type). */
export const wantsEventStream = (accept: string | undefined) =>
  /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept ?? '');

/** The body of a Server-Sent Events answer, its headers set and the reconnection delay written. */
export function eventStreamBody(reply: FastifyReply): PassThrough {
  const body = new PassThrough();
  reply
    .header('content-type', 'text/event-stream; charset=utf-8')
    .header('cache-control', 'no-store')
    // Proxies that buffer responses (nginx) would hold the events back.
    .header('x-accel-buffering', 'no');
  // Clients reconnect after a second when the connection drops (and resume with Last-Event-ID).
  body.write('retry: 1000\n\n');
  return body;
}

/**
 * Watches the client's connection from the moment a handler starts, before its first await: a
 * client that sends the request and closes at once is gone before the stream is registered, and
 * its `close` has been emitted already, so a listener attached only then would never run.
 */
export function watchConnection(reply: FastifyReply): { whenGone(detach: () => void): void } {
  let gone = false;
  let onGone: (() => void) | null = null;
  reply.raw.once('close', () => {
    gone = true;
    onGone?.();
  });
  return {
    /** Runs `detach` when the client goes away: at once if it already has. */
    whenGone(detach) {
      if (gone || reply.raw.destroyed || reply.raw.socket?.destroyed) detach();
      else onGone = detach;
    },
  };
}
