import type { IncomingMessage } from 'node:http';

/** How long a connection answered early goes on taking (and dropping) what its client still sends. */
export const lingerMs = 5_000;

/**
 * Closes the connection of a request answered before its body had all arrived the way nginx's
 * `lingering_close` does: once the answer is sent, the sending side is shut (a FIN), what the
 * client still sends is read and dropped for at most `ms`, and only then is the socket closed.
 *
 * Closing at once, as Node does after an answer with `Connection: close`, leaves the client's
 * unread bytes in the kernel's buffer, and Linux answers a close over unread bytes with a reset.
 * A client still writing its body then sees `EPIPE` or `ECONNRESET`, and can lose the answer (a
 * 413 saying which line was too long) that was already on its way. A client that reads the answer
 * stops sending, and the connection ends at once; one that does not is cut off after `ms`.
 *
 * To be called while answering, before the answer is sent; the answer carries `Connection: close`.
 */
export function closeLingering(request: IncomingMessage, ms = lingerMs): void {
  const socket = request.socket;
  // Node's server calls destroySoon once the last answer on a connection is sent (res._last).
  socket.destroySoon = function lingeringClose() {
    socket.end();
    // From here the connection carries no HTTP: the parser is taken off it, so that a request
    // pipelined after the body is never read, let alone served, and the bytes are dropped as they
    // come. A 'data' listener makes the server's socket stop feeding the parser from the handle
    // directly (unconsume); the server's own listener, which feeds it, is then removed.
    const drop = () => undefined;
    socket.on('data', drop);
    for (const listener of socket.listeners('data'))
      if (listener !== drop) socket.off('data', listener as (chunk: Buffer) => void);
    socket.resume();
    const cutOff = setTimeout(() => socket.destroy(), ms);
    socket.once('close', () => clearTimeout(cutOff));
  };
}
