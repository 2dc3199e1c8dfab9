import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { expectPromptShutdown } from '../support/shutdown.js';

/** What a raw client saw: the status line's code (if any answer came) and whether the server closed. */
interface RawOutcome {
  status: number | null;
  closed: boolean;
  elapsedMs: number;
}

/**
 * Sends `head` (and `body`, if any) on a plain socket, then waits, sending nothing more, until the
 * server answers (a status line), closes the connection, or `waitMs` pass.
 */
function rawExchange(port: number, head: string, body = '', waitMs = 3000): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    let settled = false;
    const settle = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      resolve({ status: match ? Number(match[1]) : null, closed, elapsedMs: Date.now() - started });
    };
    const timer = setTimeout(() => settle(false), waitMs);
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (received.includes('\r\n\r\n')) settle(false);
    });
    socket.on('close', () => settle(true));
    socket.on('error', () => settle(true));
    socket.write(head + body);
  });
}

describe('slow clients and large bodies', () => {
  let db: TestDatabase;
  let api: ApiService;
  let slowApi: ApiService;
  let account: TestAccount;
  let port: number;
  let slowPort: number;

  const listen = async (service: ApiService) => {
    await service.app.listen({ host: '127.0.0.1', port: 0 });
    return (service.app.server.address() as net.AddressInfo).port;
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    // The default body limit (32 MiB) and timeouts; and one with short timeouts.
    api = await startTestApi(db.url);
    slowApi = await startTestApi(db.url, { API_HEADERS_TIMEOUT_MS: '500', API_REQUEST_TIMEOUT_MS: '1000' });
    account = await createPaidAccount(db.pool);
    port = await listen(api);
    slowPort = await listen(slowApi);
  });
  afterAll(async () => {
    await api?.close();
    await slowApi?.close();
    await db?.drop();
  });

  const announce30MiB = (method: string, path: string, key?: string) =>
    [
      `${method} ${path} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      `Content-Length: ${30 * 1024 * 1024}`,
      ...(key ? [`Authorization: Bearer ${key}`] : []),
      '',
      '',
    ].join('\r\n');

  it('unknown routes and methods answer before reading a large body, authenticated first', async () => {
    for (const [method, path, key, status] of [
      ['POST', '/v1/nope', undefined, 401],
      ['POST', '/v1/nope', account.key, 404],
      ['PUT', '/v1/credits', undefined, 401],
      ['PUT', '/v1/credits', account.key, 405],
      ['POST', '/v1/generations/gen_abc', account.key, 405],
    ] as const) {
      // 30 MiB announced (under the body limit), 16 bytes sent: the answer must not wait for the rest.
      const outcome = await rawExchange(port, announce30MiB(method, path, key), '{"prompt":"xxxx"');
      expect(outcome.status, `${method} ${path} ${key ? 'with' : 'without'} a key`).toBe(status);
    }
  });

  it('a client that never finishes its headers is cut off after API_HEADERS_TIMEOUT_MS', async () => {
    const outcome = await rawExchange(
      slowPort,
      'GET /v1/credits HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n',
      '',
      5000,
    );
    // Node answers 408 and closes; either way the socket is not held.
    expect(outcome.status === 408 || outcome.closed, JSON.stringify(outcome)).toBe(true);
    expect(outcome.elapsedMs).toBeLessThan(4000);
  });

  it('a client that sends its body too slowly is cut off after API_REQUEST_TIMEOUT_MS', async () => {
    const head = [
      'POST /v1/generations HTTP/1.1',
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      'Content-Length: 1000',
      `Authorization: Bearer ${account.key}`,
      '',
      '',
    ].join('\r\n');
    const outcome = await rawExchange(slowPort, head, '{"model":"lumen-lite",', 5000);
    expect(outcome.status === 408 || outcome.closed, JSON.stringify(outcome)).toBe(true);
    expect(outcome.elapsedMs).toBeLessThan(4000);
  });

  it('shutdown closes at once a connection that never sent a request, and one once its request in flight is answered', async () => {
    const stopping = await startTestApi(db.url);
    const body = '{"model":"lumen-lite","prompt":1}';
    await expectPromptShutdown({
      server: stopping.app.server,
      port: await listen(stopping),
      close: () => stopping.close(),
      // A request whose body is still on its way when the shutdown starts (invalid: answered 400).
      head: [
        'POST /v1/generations HTTP/1.1',
        'Host: 127.0.0.1',
        'Content-Type: application/json',
        `Content-Length: ${body.length}`,
        `Authorization: Bearer ${account.key}`,
      ],
      body,
      answer: /^HTTP\/1\.1 400 /,
    });
  });
});
