import { connect, createServer, type Socket } from 'node:net';
import { pairSockets } from './tcp-relay.js';

/**
 * What a front between client and API does to one request it matches: `drop-answer` lets the
 * request through and, once the API has processed it and its answer starts to come back, cuts the
 * client's connection instead (a load balancer dying, a Wi-Fi drop); `answer` answers it itself (a
 * proxy's 503, a gateway's 429) and the API never sees it.
 */
export type Fault =
  | { kind: 'drop-answer' }
  | { kind: 'answer'; status: number; headers?: Record<string, string>; body?: unknown };

export interface FaultRule {
  /** The request line starts with this, e.g. `POST /v1/generations ` (the space ends the path). */
  requestLine: string;
  fault: Fault;
  /** How many matching requests it applies to (then it is spent). Default 1. */
  times?: number;
}

export interface FaultyFront {
  port: number;
  origin: string;
  /** Every request seen: its line, its header block (lower-cased) and when it arrived (ms since the epoch). */
  requests: Array<{ line: string; head: string; at: number }>;
  /** The rules' remaining counts, in order. */
  remaining(): number[];
  close(): Promise<void>;
}

const reasons: Record<number, string> = {
  408: 'Request Timeout',
  429: 'Too Many Requests',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/**
 * A TCP relay to the real API that reads request lines as they pass (HTTP/1.1, no pipelining: an
 * answer that comes back belongs to the last request sent) and applies the first matching rule.
 */
export async function startFaultyFront(
  target: { host: string; port: number },
  rules: FaultRule[],
): Promise<FaultyFront> {
  const counts = rules.map((r) => r.times ?? 1);
  const requests: FaultyFront['requests'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    let dropNextAnswer = false;
    pairSockets(client, upstream, sockets);
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      const line = /^(GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) [^\r\n]*/.exec(text)?.[0];
      if (line) {
        requests.push({ line, head: text.split('\r\n\r\n')[0]!.toLowerCase(), at: Date.now() });
        const index = rules.findIndex((r, i) => counts[i]! > 0 && line.startsWith(r.requestLine));
        if (index >= 0) {
          counts[index]!--;
          const fault = rules[index]!.fault;
          if (fault.kind === 'answer') {
            const body = JSON.stringify(
              fault.body ?? {
                error: {
                  code: fault.status === 429 ? 'rate_limited' : 'service_unavailable',
                  message: 'from the front',
                },
              },
            );
            const headers = {
              'content-type': 'application/json',
              'content-length': String(Buffer.byteLength(body)),
              connection: 'close',
              ...fault.headers,
            };
            client.end(
              `HTTP/1.1 ${fault.status} ${reasons[fault.status] ?? 'Error'}\r\n` +
                Object.entries(headers)
                  .map(([k, v]) => `${k}: ${v}\r\n`)
                  .join('') +
                `\r\n${body}`,
            );
            upstream.destroy();
            return;
          }
          dropNextAnswer = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropNextAnswer) {
        // The API has answered, so it has processed the request: the client never hears of it.
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    requests,
    remaining: () => [...counts],
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
