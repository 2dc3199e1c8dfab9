import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, drawn at random from below the kernel's
 * ephemeral range. A port from port 0 comes from that range, from which the kernel also takes the
 * local port of every outgoing connection: between our check and the process that then listens on
 * it, a connection to PostgreSQL or Temporal could take it (EADDRINUSE, seen in the test suite).
 * Below the range only another listener can. Ports already handed out by this process are not
 * handed out again; after 50 ports found taken, port 0's answer is the fallback.
 */
export async function freePort(): Promise<number> {
  // No room below the range (a kernel that starts it low): port 0's answer it is.
  for (let attempt = 0; ephemeralStart - lowestPort >= 1_000 && attempt < 50; attempt++) {
    const port = lowestPort + Math.floor(Math.random() * (ephemeralStart - lowestPort));
    if (handedOut.has(port)) continue;
    // Taken before the check, so that two calls at once never hand out the same port.
    handedOut.add(port);
    if ((await listenOnce(port)) !== null) return port;
    handedOut.delete(port);
  }
  const port = await listenOnce(0);
  if (port === null) throw new Error('no free port on 127.0.0.1');
  return port;
}

/** The ports below this are the well-known and registered services a developer's machine may run. */
const lowestPort = 10_000;
const handedOut = new Set<number>();

/** Where the kernel's ephemeral ports start (Linux's setting; IANA's 49152 where there is none). */
const ephemeralStart = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 49_152;
  }
})();

/** Listens on `port` and closes again: the port it had, or null when it was taken. */
function listenOnce(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(null) : reject(error),
    );
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Resolves once something accepts TCP connections on host:port, or rejects after `timeoutMs`. */
export async function waitForPort(port: number, host = '127.0.0.1', timeoutMs = 30_000): Promise<void> {
  const { connect } = await import('node:net');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect({ port, host });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
