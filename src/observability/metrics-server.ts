import http from 'node:http';
import type { Registry } from 'prom-client';

/** A metrics port that is listening, and how to close it. */
export interface MetricsServer {
  /** The port it listens on (the one asked for, or the one the system gave for 0). */
  port: number;
  close(): Promise<void>;
}

/**
 * A port of its own serving GET /metrics (Prometheus's text format) and nothing else: metrics stay
 * off the API's public port, out of its authentication and its request log, and a scrape never
 * queues behind client traffic. Unauthenticated: bind it to loopback or a private network only.
 */
export async function startMetricsServer(options: {
  host: string;
  port: number;
  registry: Registry;
  /** Told when a scrape fails (a gauge's query, say); the scrape answers 500. */
  onError: (error: unknown) => void;
}): Promise<MetricsServer> {
  const { registry } = options;
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'application/json; charset=utf-8' });
      response.end(
        JSON.stringify({ error: { code: 'not_found', message: 'Only GET /metrics is served here.' } }),
      );
      return;
    }
    registry.metrics().then(
      (text) => {
        response.writeHead(200, { 'content-type': registry.contentType });
        response.end(text);
      },
      (error: unknown) => {
        options.onError(error);
        response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        response.end('metrics could not be collected\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
