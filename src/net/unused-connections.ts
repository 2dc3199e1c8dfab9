import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * Shutdown waits only for the requests in flight; the API, the console and the result host each
 * call this on their Fastify app. Node's `server.close()` closes the connections idle at that
 * moment, and no other: it counts one that has not sent a request yet as busy and stops expiring
 * connections (the headers timeout) once closing, and a keep-alive connection whose answer ends
 * later stays open for the keep-alive timeout (72 s). Either held `close()` for a minute or more.
 * Connections with no request are common: Node's fetch opens one after every aborted streaming
 * response (nodejs/undici#5845: each client that stops reading an event stream leaves one), and
 * proxies open them ahead of need. So, from the start of the shutdown: those are closed at once
 * (and any that connects meanwhile), and a connection that served requests is ended as soon as it
 * has no answer left to send, once that answer has been handed to the OS.
 * Nothing is lost: no request was on them, and a client retries a refused connection as it would
 * retry the 503 answered while closing.
 */
export function closeUnusedConnectionsOnShutdown(app: FastifyInstance): void {
  const connections = new Set<Socket>();
  // Responses not yet flushed, per connection: a connection is idle when it has none.
  const answering = new Map<Socket, number>();
  const requested = new WeakSet<Socket>();
  let closing = false;
  // A connection is ended (FIN after what it has written), never destroyed, once it serves nothing:
  // a response's last bytes may still be in its buffers after `end()`.
  const endIfIdle = (socket: Socket) => {
    if (closing && !answering.has(socket)) {
      if (requested.has(socket)) socket.end();
      else socket.destroy();
    }
  };
  app.server.on('connection', (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    connections.add(socket);
    socket.once('close', () => {
      connections.delete(socket);
      answering.delete(socket);
    });
  });
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    requested.add(socket);
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    // 'close' follows 'finish' (everything handed to the OS) or an abort.
    response.once('close', () => {
      const left = (answering.get(socket) ?? 1) - 1;
      if (left > 0) answering.set(socket, left);
      else answering.delete(socket);
      endIfIdle(socket);
    });
  });
  // preClose runs before Fastify closes the server, which then waits for every connection to close.
  app.addHook('preClose', (done) => {
    closing = true;
    for (const socket of connections) endIfIdle(socket);
    done();
  });
}
