import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import {
  ProviderRejection,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
} from '../../src/providers/provider.js';
import { callProvider } from '../../src/providers/provider-http.js';
import { safeProviderMessage } from '../../src/providers/provider-answers.js';

/**
 * What a failed call to a provider means for the charging rules: the classes the workflow acts on.
 * The server answers by path: /status/N answers N (with a JSON error body), /hang reads the request
 * and never answers.
 */
describe('calling a provider', () => {
  let server: http.Server;
  let origin: string;
  /** Called once a request to /received has arrived whole (it is never answered). */
  let received: (() => void) | undefined;
  beforeAll(async () => {
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url === '/received') return received?.();
        const proxied = /^\/proxy\/(\d+)/.exec(request.url ?? '');
        if (proxied) {
          // What a proxy or load balancer answers itself: its own page, not the provider's JSON.
          response.writeHead(Number(proxied[1]), { 'content-type': 'text/html' });
          return response.end('<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>');
        }
        const status = /^\/status\/(\d+)/.exec(request.url ?? '');
        if (!status) return; // /hang: read whole, never answered
        const code = Number(status[1]);
        if (code === 429) response.setHeader('retry-after', '7');
        response.writeHead(code, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ detail: [{ msg: 'prompt is required', loc: ['body', 'prompt'] }] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  type ErrorClass = abstract new (...args: never[]) => Error;
  /** One failed call and what it must mean. */
  interface Case {
    why: string;
    /** A path on the server (/status/N, /hang), or `closed`: a port nobody listens on. */
    at: string;
    kind: 'create' | 'read';
    /** The 5xx statuses the adapter names as "not accepted" on a create, when in its provider's JSON shape. */
    notAccepted?: number[];
    timeoutMs?: number;
    is: ErrorClass;
    isNot?: ErrorClass;
    /** Whether it proves the create was not taken (a routed generation may go to its next route). */
    provesNotAccepted?: boolean;
    says?: string;
    retryAfterMs?: number;
  }
  const cases: Case[] = [
    {
      why: 'a connection never made is transient whatever the call: nothing was sent',
      at: 'closed',
      kind: 'create',
      is: ProviderTransientError,
      says: 'nothing was sent',
      provesNotAccepted: true,
    },
    {
      why: '429 is throttling, with the Retry-After the provider gave; a create was not taken',
      at: '/status/429',
      kind: 'create',
      is: ProviderThrottled,
      retryAfterMs: 7_000,
      provesNotAccepted: true,
    },
    {
      why: 'a throttled read proves nothing',
      at: '/status/429',
      kind: 'read',
      is: ProviderThrottled,
      provesNotAccepted: false,
    },
    {
      why: 'a 5xx the adapter names proves a create not accepted',
      at: '/status/503',
      kind: 'create',
      notAccepted: [503],
      is: ProviderTransientError,
      provesNotAccepted: true,
    },
    {
      why: 'that 5xx as a proxy answers it (its own page, not the provider’s JSON) proves nothing: uncertain',
      at: '/proxy/503',
      kind: 'create',
      notAccepted: [503],
      is: ProviderUncertainError,
    },
    {
      why: 'another 5xx may have created the job: uncertain',
      at: '/status/502',
      kind: 'create',
      notAccepted: [503],
      is: ProviderUncertainError,
    },
    {
      why: 'a 503 the adapter does not name may have created the job: uncertain',
      at: '/status/503',
      kind: 'create',
      is: ProviderUncertainError,
    },
    { why: 'a 5xx to a create is uncertain', at: '/status/502', kind: 'create', is: ProviderUncertainError },
    {
      why: 'a create whose answer never comes is uncertain, and proves nothing',
      at: '/hang',
      kind: 'create',
      timeoutMs: 300,
      is: ProviderUncertainError,
      provesNotAccepted: false,
    },
    {
      why: 'a read whose answer never comes is only transient',
      at: '/hang',
      kind: 'read',
      timeoutMs: 300,
      is: ProviderTransientError,
      isNot: ProviderUncertainError,
    },
    {
      why: 'an input error on a create is a rejection that says why',
      at: '/status/422',
      kind: 'create',
      is: ProviderRejection,
      says: 'prompt is required',
    },
    {
      why: 'an input error on a read is transient',
      at: '/status/422',
      kind: 'read',
      is: ProviderTransientError,
    },
    {
      why: 'refused credentials are transient',
      at: '/status/401',
      kind: 'create',
      is: ProviderTransientError,
      says: 'credentials',
    },
  ];

  // Every call carries a key, which no failure's message may repeat.
  it.each(cases)('$why', async (c) => {
    const url = c.at === 'closed' ? `http://127.0.0.1:${await freePort()}/x` : `${origin}${c.at}`;
    const error = await callProvider(
      'testprov',
      c.kind,
      {
        method: 'POST',
        url,
        headers: { authorization: 'Key sekrit-key-value' },
        json: { prompt: 'x' },
        timeoutMs: c.timeoutMs ?? 2_000,
      },
      [],
      (answer) =>
        (c.notAccepted ?? []).includes(answer.status) &&
        typeof answer.body === 'object' &&
        answer.body !== null,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(c.is);
    if (c.isNot) expect(error).not.toBeInstanceOf(c.isNot);
    const { message } = error as Error;
    if (c.says) expect(message).toContain(c.says);
    expect(message).not.toContain('sekrit');
    if (c.retryAfterMs !== undefined) expect((error as ProviderThrottled).retryAfterMs).toBe(c.retryAfterMs);
    if (c.provesNotAccepted !== undefined)
      expect(error instanceof ProviderTransientError && error.provesNotAccepted).toBe(c.provesNotAccepted);
  });

  it('a connection lost with EHOSTUNREACH after the create was written is uncertain, not "nothing was sent"', async () => {
    // The client's socket, as undici writes the request on it; once the server has the request
    // whole, the socket fails as the kernel fails it when an ICMP "host unreachable" comes back.
    let socket: Socket | undefined;
    const onHeaders = (message: unknown) => {
      socket = (message as { socket: Socket }).socket;
    };
    diagnosticsChannel.subscribe('undici:client:sendHeaders', onHeaders);
    received = () =>
      socket?.destroy(
        Object.assign(new Error('read EHOSTUNREACH'), { code: 'EHOSTUNREACH', syscall: 'read' }),
      );
    try {
      const call = {
        method: 'POST',
        url: `${origin}/received`,
        headers: {},
        json: { prompt: 'x' },
        timeoutMs: 5_000,
      };
      const error = await callProvider('testprov', 'create', call as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderUncertainError);
      expect((error as Error).message).toContain('EHOSTUNREACH');
      // The same code on a read is only transient (reads are safe to repeat).
      const read = await callProvider('testprov', 'read', {
        ...call,
        method: 'GET',
        json: undefined,
      } as never).catch((e: unknown) => e);
      expect(read).toBeInstanceOf(ProviderTransientError);
      expect(read instanceof ProviderTransientError && read.provesNotAccepted).toBe(false);
    } finally {
      diagnosticsChannel.unsubscribe('undici:client:sendHeaders', onHeaders);
      received = undefined;
    }
  });

  it('keeps credentials out of a provider message, however they are written', () => {
    const secrets = {
      openai: `sk-proj-${'aB3'.repeat(16)}`,
      replicate: `r8_${'Xy9'.repeat(13)}`,
      falKey: 'f00dcafe-1234-4bcd-9abc-00112233aabb:0123456789abcdef0123456789abcdef',
      jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
      hex: 'deadbeef'.repeat(5),
    };
    const message = safeProviderMessage(
      [
        `Incorrect API key provided: ${secrets.openai}.`,
        `token=${secrets.replicate}`,
        `key: ${secrets.falKey}`,
        `{"api_key": "${secrets.falKey}"}`,
        `authorization: Bearer ${secrets.jwt}`,
        `signature ${secrets.hex}`,
        `bare ${secrets.openai} and ${secrets.replicate}`,
      ].join('\n'),
    );
    for (const secret of Object.values(secrets)) {
      expect(message).not.toContain(secret);
      expect(message).not.toContain(secret.slice(0, 16));
    }
    // What is left still says what went wrong.
    expect(message).toContain('Incorrect API key provided');
  });

  it('keeps signed URLs and tokens out of a provider message', () => {
    expect(
      safeProviderMessage(
        'failed\n fetching https://cdn.example/x.png?sig=abc with Bearer r8_secret\u0000 and Key fal:secret',
      ),
    ).toBe('failed fetching [url] with Bearer [redacted] and Key [redacted]');
    expect(safeProviderMessage('x'.repeat(1000))).toHaveLength(300);
  });
});
