import { connect, createServer, type Socket } from 'node:net';

export interface TcpRelay {
  port: number;
  /** Closes the port and cuts every relayed connection: the dependency going away for whoever used it. */
  close(): Promise<void>;
}

/**
 * A TCP relay on loopback to `target` (PostgreSQL, Temporal): on `port` when given (one a process
 * was told to use before anything listened there), else on a free one.
 */
export async function startTcpRelay(target: { host: string; port: number }, port = 0): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      // One side gone (a process killed resets, it does not end) takes the other with it: the far
      // end must see the connection close, as it would without the relay.
      socket.on('close', () => {
        sockets.delete(socket);
        other.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
