import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * The plumbing the three fake provider servers share: a loopback HTTP server on an ephemeral
 * port, a log of what reached it (credentials redacted), scripted faults, and a clean close that
 * also ends the answers a fault left hanging.
 */

/** One request as the fake received it. The Authorization header is never kept in clear. */
export interface RecordedRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: Record<string, string>;
  /** The body as text (multipart bodies are summarised by the server that parses them). */
  body: string;
}

/**
 * What a fake does instead of its normal answer.
 * - `status`: answer with this status; `body` defaults to the provider's own error shape for it,
 *   and `retryAfter` (seconds) sets Retry-After.
 * - `hang`: read the whole request, count it, then never answer (the socket stays open until the
 *   client gives up or the server closes).
 * - `drop`: read the whole request, count it, then destroy the socket without a byte of answer.
 * - `raw`: answer with this status and body as they are (not JSON), as a proxy in front of the
 *   provider might, or an answer cut to nothing.
 * `accepted`: whether the provider created the job anyway (defaults: false for `status`, true for
 * `hang` and `drop`, since the request reached the provider whole). Only creates use it.
 */
export type Fault =
  | { kind: 'status'; status: number; body?: unknown; retryAfter?: number; accepted?: boolean }
  | { kind: 'hang'; accepted?: boolean }
  | { kind: 'drop'; accepted?: boolean }
  /** Answer with this status and a body that is not JSON: a proxy's HTML page, an empty body. */
  | { kind: 'raw'; status: number; contentType: string; body: string; accepted?: boolean };

export const faultAccepts = (fault: Fault): boolean =>
  fault.accepted ?? (fault.kind !== 'status' && fault.kind !== 'raw');

export interface FakeHttpServer {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  origin: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
  /** Stops listening (connections are then refused, as by a provider that is down) until `goUp`. */
  goDown(): Promise<void>;
  /** Listens again on the same port. */
  goUp(): Promise<void>;
}

export type FakeHandler = (
  request: http.IncomingMessage,
  body: Buffer,
  response: http.ServerResponse,
) => Promise<void> | void;

/** Starts a node:http server on 127.0.0.1 and an ephemeral port that records every request. */
export async function startFakeHttp(handler: FakeHandler): Promise<FakeHttpServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({
        method: request.method ?? 'GET',
        url: request.url ?? '/',
        headers: redactedHeaders(request.headers),
        body: isText(request.headers['content-type']) ? body.toString('utf8') : `<${body.length} bytes>`,
      });
      Promise.resolve(handler(request, body, response)).catch((error: unknown) => {
        if (!response.headersSent) sendJson(response, 500, { fake_server_error: String(error) });
        else response.destroy();
      });
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: stop,
    goDown: stop,
    goUp: () =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      }),
  };
}

function redactedHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(', ') : value;
    out[name] = name === 'authorization' ? redact(text) : text;
  }
  return out;
}

/** Keeps the scheme word ("Key", "Bearer") so a test can check which one was used, never the secret. */
function redact(value: string): string {
  const space = value.indexOf(' ');
  return space > 0 ? `${value.slice(0, space)} [redacted]` : '[redacted]';
}

function isText(contentType: string | undefined): boolean {
  return contentType === undefined || /json|text|x-www-form-urlencoded/.test(contentType);
}

export function sendJson(
  response: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

/** Plays a fault; `errorBody` gives the provider's own error shape for a status. */
export function playFault(
  response: http.ServerResponse,
  fault: Fault,
  errorBody: (status: number) => unknown,
  extraHeaders: (status: number) => Record<string, string> = () => ({}),
): void {
  if (fault.kind === 'hang') return; // never answered; close() destroys the socket
  if (fault.kind === 'drop') {
    response.socket?.destroy();
    return;
  }
  if (fault.kind === 'raw') {
    response.writeHead(fault.status, { 'content-type': fault.contentType }).end(fault.body);
    return;
  }
  const headers: Record<string, string> = { ...extraHeaders(fault.status) };
  if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
  sendJson(response, fault.status, fault.body ?? errorBody(fault.status), headers);
}

/** The credential after `scheme ` in Authorization, or undefined when absent or of another scheme. */
export function credential(request: http.IncomingMessage, scheme: string): string | undefined {
  const value = request.headers.authorization;
  if (!value?.startsWith(`${scheme} `)) return undefined;
  return value.slice(scheme.length + 1).trim();
}

/** A one-shot script: the first entry whose `match` accepts the input is used and removed. */
export class Script<Input, Outcome> {
  private entries: Array<{ outcome: Outcome; match: (input: Input) => boolean }> = [];

  add(outcome: Outcome, match: (input: Input) => boolean = () => true): void {
    this.entries.push({ outcome, match });
  }

  take(input: Input): Outcome | undefined {
    const index = this.entries.findIndex((entry) => entry.match(input));
    if (index < 0) return undefined;
    return this.entries.splice(index, 1)[0]!.outcome;
  }

  clear(): void {
    this.entries = [];
  }
}

/**
 * What the three fakes share around their own protocol: the server they listen on, the creates
 * counted, and the script of outcomes by input. A subclass answers in `handle` and starts with
 * `listen()`.
 */
export abstract class FakeProvider<Outcome> {
  /** Creates (or, for OpenAI, calls) that passed auth and were read whole, answered or not. */
  creates = 0;
  protected readonly outcomes = new Script<unknown, Outcome>();
  private server: FakeHttpServer | undefined;

  protected abstract handle(
    request: http.IncomingMessage,
    body: Buffer,
    response: http.ServerResponse,
  ): Promise<void> | void;

  protected async listen(): Promise<this> {
    this.server = await startFakeHttp((request, body, response) => this.handle(request, body, response));
    return this;
  }

  get origin(): string {
    return this.server!.origin;
  }
  get requests(): RecordedRequest[] {
    return this.server!.requests;
  }
  /** The next request whose input `match`es (default: any) ends this way. */
  script(outcome: Outcome, match?: (input: unknown) => boolean): void {
    this.outcomes.add(outcome, match);
  }
  close(): Promise<void> {
    return this.server!.close();
  }
  /** The provider goes away: its port refuses connections until `goUp()`. */
  goDown(): Promise<void> {
    return this.server!.goDown();
  }
  goUp(): Promise<void> {
    return this.server!.goUp();
  }
}

/** Matches inputs whose `prompt` contains `text`. */
export const promptContains =
  (text: string) =>
  (input: unknown): boolean => {
    const prompt = (input as { prompt?: unknown } | null)?.prompt;
    return typeof prompt === 'string' && prompt.includes(text);
  };
