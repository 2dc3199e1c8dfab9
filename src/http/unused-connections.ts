import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** While closing, connections left idle by a response that ended are closed this often. */
const idleSweepMs = 100;

/**
 * Shutdown waits only for the requests in flight; the API, the console and the result host each
 * call this on their Fastify app. Node's `server.close()` closes the connections idle at that
 * moment, and no other: it counts one that has not sent a request yet as busy and stops expiring
 * connections (the headers timeout) once closing, and a keep-alive connection whose answer ends
 * later stays open for the keep-alive timeout (72 s). Either held `close()` for a minute or more.
 * Connections with no request are common: Node's fetch opens one after every aborted streaming
 * response (nodejs/undici#5845: each client that stops reading an event stream leaves one), and
 * proxies open them ahead of need. So, from the start of the shutdown: those are closed at once
 * (and any that connects meanwhile), and a connection is closed as soon as its answer has gone.
 * Nothing is lost: no request was on them, and a client retries a refused connection as it would
 * retry the 503 answered while closing.
 */
export function closeUnusedConnectionsOnShutdown(app: FastifyInstance): void {
  const unused = new Set<Socket>();
  let closing = false;
  app.server.on('connection', (socket: Socket) => {
    if (closing) {
      socket.destroy();
      return;
    }
    unused.add(socket);
    socket.once('close', () => unused.delete(socket));
  });
  app.server.on('request', (request: IncomingMessage) => unused.delete(request.socket));
  // preClose runs before Fastify closes the server (which closes the connections idle then).
  app.addHook('preClose', (done) => {
    closing = true;
    for (const socket of unused) socket.destroy();
    unused.clear();
    const sweep = setInterval(() => app.server.closeIdleConnections(), idleSweepMs);
    sweep.unref();
    app.server.once('close', () => clearInterval(sweep));
    done();
  });
}
