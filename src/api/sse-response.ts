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

/**
 * The stream of an event log that ends (a generation's, a batch's), given what the reader has not
 * seen yet (each as its message) and whether the log has ended: 204 when it has and nothing is
 * left (EventSource stops reconnecting); the rest and the end when it has; else a stream opened by
 * `open` (null: past a cap, `refused` is thrown), detached when the client goes away.
 */
export function sendEndingEventStream(
  reply: FastifyReply,
  connection: ReturnType<typeof watchConnection>,
  log: {
    unseen: string[];
    ended: boolean;
    open: (body: PassThrough) => (() => void) | null;
    refused: () => Error;
  },
): FastifyReply {
  if (log.ended && log.unseen.length === 0) return reply.code(204).send();
  const body = eventStreamBody(reply);
  if (log.ended) {
    body.end(log.unseen.join(''));
    return reply.send(body);
  }
  const detach = log.open(body);
  if (!detach) throw log.refused();
  connection.whenGone(detach);
  // The schema describes the JSON answer; a stream is sent as it is, unserialized.
  return reply.send(body);
}
