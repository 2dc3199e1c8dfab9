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
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
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
