import { connect, createServer, type Socket } from 'node:net';

export interface TcpRelay {
  port: number;
  /** Closes the port and cuts every relayed connection: the dependency going away for whoever used it. */
  close(): Promise<void>;
}

/**
 * A connection the relay resets part-way: after `afterBytes` bytes of the client's requests
 * (`request`: the far end gets part of a request) or of the far end's answers (`answer`: the far
 * end has done the work, the client hears part of it), counted over the connection's life (a
 * keep-alive connection carries several). The client sees a reset (RST), as a middlebox or a
 * crashing load balancer would cause.
 */
export interface RelayCut {
  direction: 'request' | 'answer';
  afterBytes: number;
}

export interface TcpRelayOptions {
  /** Asked once per accepted connection (numbered from 0): whether and where to cut it. */
  cut?: (connection: number) => RelayCut | undefined;
  /** Told of each cut made. */
  onCut?: (cut: RelayCut) => void;
}

/**
 * Tracks both ends of a relayed connection in `open`, and ties their fates: one side gone (a
 * process killed resets, it does not end) takes the other with it, so the far end sees the
 * connection close as it would without a relay.
 */
export function pairSockets(client: Socket, upstream: Socket, open: Set<Socket>): void {
  for (const [socket, other] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    open.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      open.delete(socket);
      other.destroy();
    });
  }
}

/**
 * A TCP relay on loopback to `target` (PostgreSQL, Temporal, a provider): on `port` when given
 * (one a process was told to use before anything listened there), else on a free one.
 */
export async function startTcpRelay(
  target: { host: string; port: number },
  port = 0,
  options: TcpRelayOptions = {},
): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    pairSockets(client, upstream, sockets);
    const cut = options.cut?.(accepted++);
    if (!cut) {
      client.pipe(upstream).pipe(client);
      return;
    }
    const [from, to] = cut.direction === 'request' ? [client, upstream] : [upstream, client];
    to.pipe(from);
    let relayed = 0;
    from.on('data', (chunk: Buffer) => {
      if (relayed >= cut.afterBytes) return;
      const room = cut.afterBytes - relayed;
      relayed += chunk.length;
      if (chunk.length < room) {
        to.write(chunk);
        return;
      }
      options.onCut?.(cut);
      // Part of this chunk goes on, then both ends are reset: the client hears RST, not a clean end.
      to.write(chunk.subarray(0, room), () => {
        client.resetAndDestroy();
        upstream.resetAndDestroy();
      });
    });
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
