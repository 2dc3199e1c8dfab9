import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import {
  ProviderRejection,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
} from '../../src/providers/provider.js';
import { callProvider, safeProviderMessage } from '../../src/providers/provider-http.js';

/**
 * What a failed call to a provider means for the charging rules: the classes the workflow acts on.
 * The server answers by path: /status/N answers N (with a JSON error body), /hang reads the request
 * and never answers.
 */
describe('calling a provider', () => {
  let server: http.Server;
  let origin: string;
  beforeAll(async () => {
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
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

  const call = (path: string, kind: 'create' | 'read', timeoutMs = 2_000) =>
    callProvider('testprov', kind, {
      method: 'POST',
      url: `${origin}${path}`,
      headers: { authorization: 'Key sekrit-key-value' },
      json: { prompt: 'x' },
      timeoutMs,
    });

  it('a connection never made is transient whatever the call: nothing was sent', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const error = await callProvider('testprov', 'create', {
      method: 'POST',
      url: `${closed}/x`,
      headers: {},
      json: {},
      timeoutMs: 2_000,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderTransientError);
    expect((error as Error).message).toContain('nothing was sent');
  });

  it('429 is throttling, with the Retry-After the provider gave', async () => {
    const error = await call('/status/429', 'create').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderThrottled);
    expect((error as ProviderThrottled).retryAfterMs).toBe(7_000);
  });

  it('proves a create not accepted only where nothing was taken: never connected, 429, a 5xx the adapter names', async () => {
    const proves = (error: unknown) => error instanceof ProviderTransientError && error.provesNotAccepted;
    const closed = `http://127.0.0.1:${await freePort()}`;
    const never = await callProvider('testprov', 'create', {
      method: 'POST',
      url: `${closed}/x`,
      headers: {},
      json: {},
      timeoutMs: 2_000,
    }).catch((e: unknown) => e);
    expect(proves(never)).toBe(true);
    expect(proves(await call('/status/429', 'create').catch((e: unknown) => e))).toBe(true);
    const named = (status: number) =>
      callProvider(
        'testprov',
        'create',
        { method: 'POST', url: `${origin}/status/${status}`, headers: {}, json: {}, timeoutMs: 2_000 },
        [],
        [503],
      ).catch((e: unknown) => e);
    expect(proves(await named(503))).toBe(true);
    // Another 5xx, or a 503 the adapter does not name, may have created the job: uncertain.
    expect(await named(502)).toBeInstanceOf(ProviderUncertainError);
    expect(await call('/status/503', 'create').catch((e: unknown) => e)).toBeInstanceOf(
      ProviderUncertainError,
    );
    // An answer lost after sending proves nothing; nor does a throttled read.
    expect(proves(await call('/hang', 'create', 300).catch((e: unknown) => e))).toBe(false);
    expect(proves(await call('/status/429', 'read').catch((e: unknown) => e))).toBe(false);
  });

  it('an input error on a create is a rejection that says why; on a read it is transient', async () => {
    const create = await call('/status/422', 'create').catch((e: unknown) => e);
    expect(create).toBeInstanceOf(ProviderRejection);
    expect((create as Error).message).toContain('prompt is required');
    expect(await call('/status/422', 'read').catch((e: unknown) => e)).toBeInstanceOf(ProviderTransientError);
  });

  it('a create whose answer never comes, or a 5xx, is uncertain; a read is only transient', async () => {
    expect(await call('/hang', 'create', 300).catch((e: unknown) => e)).toBeInstanceOf(
      ProviderUncertainError,
    );
    expect(await call('/status/502', 'create').catch((e: unknown) => e)).toBeInstanceOf(
      ProviderUncertainError,
    );
    const read = await call('/hang', 'read', 300).catch((e: unknown) => e);
    expect(read).toBeInstanceOf(ProviderTransientError);
    expect(read).not.toBeInstanceOf(ProviderUncertainError);
  });

  it('refused credentials are transient and the key is never in the message', async () => {
    const error = await call('/status/401', 'create').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderTransientError);
    expect((error as Error).message).toContain('credentials');
    expect((error as Error).message).not.toContain('sekrit');
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
