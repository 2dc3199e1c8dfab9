import type { ServerResponse } from 'node:http';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboundFetch, type OutboundFetchOptions } from '../../src/net/outbound-fetch.js';
import {
  selfSignedCertificate,
  startTestServer,
  type Certificate,
  type TestServer,
} from '../support/test-servers.js';

/** The fetcher against real servers on loopback: HTTPS with a certificate made for the run. */
describe('outboundFetch', () => {
  let certificate: Certificate;
  let png: Buffer;
  /** Serves images and misbehaves on demand, on 127.0.0.1 (allow-listed in most tests). */
  let server: TestServer;
  /** On 127.0.0.2, which no test allows: it must never see a connection. */
  let forbidden: TestServer;
  const routes: Record<string, (response: ServerResponse) => void> = {};

  beforeAll(async () => {
    certificate = await selfSignedCertificate();
    png = await sharp({ create: { width: 32, height: 16, channels: 3, background: '#3060c0' } })
      .png()
      .toBuffer();
    server = await startTestServer(
      (request, response) => {
        const route = routes[request.url ?? ''];
        if (route) route(response);
        else response.writeHead(404).end();
      },
      { tls: certificate },
    );
    forbidden = await startTestServer((_request, response) => void response.writeHead(200).end('secret'), {
      tls: certificate,
      host: '127.0.0.2',
    });
    const port = new URL(forbidden.origin).port;
    Object.assign(routes, {
      '/image.png': (r: ServerResponse) =>
        r.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png),
      '/image-charset': (r: ServerResponse) =>
        r.writeHead(200, { 'content-type': 'IMAGE/PNG; charset=binary' }).end(png),
      '/page': (r: ServerResponse) => r.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>'),
      '/untyped': (r: ServerResponse) => r.writeHead(200).end(png),
      '/gzipped': (r: ServerResponse) =>
        r.writeHead(200, { 'content-type': 'image/png', 'content-encoding': 'gzip' }).end(png),
      '/redirect-ok': (r: ServerResponse) => r.writeHead(302, { location: '/image.png' }).end(),
      '/redirect-twice': (r: ServerResponse) => r.writeHead(301, { location: '/redirect-ok' }).end(),
      '/redirect-loop': (r: ServerResponse) => r.writeHead(307, { location: '/redirect-loop' }).end(),
      '/redirect-nowhere': (r: ServerResponse) => r.writeHead(302).end(),
      '/redirect-forbidden': (r: ServerResponse) =>
        r.writeHead(302, { location: `https://127.0.0.2:${port}/secret` }).end(),
      '/redirect-private': (r: ServerResponse) =>
        r.writeHead(302, { location: 'https://10.0.0.5/secret' }).end(),
      '/redirect-metadata': (r: ServerResponse) =>
        r.writeHead(302, { location: 'https://[::ffff:169.254.169.254]/latest/meta-data/' }).end(),
      '/redirect-http': (r: ServerResponse) =>
        r.writeHead(302, { location: `${server.origin.replace('https:', 'http:')}/image.png` }).end(),
      // Honest Content-Length, too large: refused from the header.
      '/large-declared': (r: ServerResponse) => {
        r.writeHead(200, { 'content-type': 'image/png', 'content-length': 5_000_000 });
        r.write(Buffer.alloc(1024));
      },
      // No Content-Length and no end: only counting while streaming stops it.
      '/endless': (r: ServerResponse) => {
        r.writeHead(200, { 'content-type': 'image/png' });
        const chunk = Buffer.alloc(64 * 1024);
        const pump = () => {
          while (!r.destroyed && r.write(chunk));
          if (!r.destroyed) r.once('drain', pump);
        };
        pump();
      },
      // Chunked, no Content-Length, more than the cap.
      '/chunked-large': (r: ServerResponse) => {
        r.writeHead(200, { 'content-type': 'image/png', 'transfer-encoding': 'chunked' });
        r.end(Buffer.alloc(300_000));
      },
      '/not-found': (r: ServerResponse) => r.writeHead(404).end(),
      '/gone': (r: ServerResponse) => r.writeHead(410).end(),
      '/busy': (r: ServerResponse) => r.writeHead(503).end(),
      '/throttled': (r: ServerResponse) => r.writeHead(429).end(),
      '/silent': () => undefined,
      '/reset': (r: ServerResponse) => {
        r.writeHead(200, { 'content-type': 'image/png', 'content-length': 100_000 });
        r.write(Buffer.alloc(1000), () => r.socket?.destroy());
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await forbidden?.close();
  });

  const allowed = (extra: Partial<OutboundFetchOptions> = {}): OutboundFetchOptions => ({
    maxBytes: 100_000,
    timeoutMs: 5_000,
    accept: ['image/*'],
    allowCidrs: ['127.0.0.1/32'],
    extraCa: [certificate.cert],
    ...extra,
  });
  const failure = async (url: string, options: OutboundFetchOptions) => {
    const error = await outboundFetch(url, options).then(
      () => expect.unreachable('the fetch succeeded'),
      (e: unknown) => e as { code: string; kind: string; status?: number; message: string },
    );
    return { code: error.code, kind: error.kind, status: error.status, message: error.message };
  };

  it('fetches an image over HTTPS from an allow-listed address, following redirects', async () => {
    expect(await outboundFetch(`${server.origin}/image.png`, allowed())).toEqual({
      bytes: png,
      contentType: 'image/png',
      headers: expect.objectContaining({ 'content-type': 'image/png' }) as unknown,
    });
    expect((await outboundFetch(`${server.origin}/redirect-twice`, allowed())).bytes.equals(png)).toBe(true);
    // By name: resolved, and connected to, on the allow-listed address.
    const byName = `https://localhost:${new URL(server.origin).port}/image.png`;
    expect(
      (await outboundFetch(byName, allowed({ allowCidrs: ['127.0.0.1', '::1'] }))).bytes.equals(png),
    ).toBe(true);
    expect(await outboundFetch(`${server.origin}/image-charset`, allowed())).toMatchObject({
      contentType: 'image/png',
    });
  });

  it('refuses loopback, private and metadata addresses without connecting, by literal or by name', async () => {
    const before = server.connections;
    const noAllowList = allowed({ allowCidrs: [] });
    const port = new URL(server.origin).port;
    for (const url of [
      `${server.origin}/image.png`,
      // A name: refused on the address it resolves to.
      `https://localhost:${port}/image.png`,
      // IPv4-mapped IPv6 is the IPv4 address it carries.
      `https://[::ffff:127.0.0.1]:${port}/image.png`,
      // Decimal form of 127.0.0.1: the URL parser normalises it.
      `https://2130706433:${port}/image.png`,
    ]) {
      expect(await failure(url, noAllowList)).toMatchObject({ code: 'forbidden_address', kind: 'refused' });
    }
    expect(server.connections).toBe(before);
    expect(server.requests).not.toContain('/secret');

    // Never connected to: the address is refused before any socket is opened.
    expect(await failure('https://10.0.0.5/x.png', noAllowList)).toMatchObject({
      code: 'forbidden_address',
      message: expect.stringContaining('(private)'),
    });
    expect(
      await failure('https://169.254.169.254/latest/meta-data/', allowed({ allowCidrs: ['169.254.0.0/16'] })),
    ).toMatchObject({ code: 'forbidden_address', message: expect.stringContaining('cloud metadata') });
    expect(await failure('https://[fd00:ec2::254]/', noAllowList)).toMatchObject({
      code: 'forbidden_address',
    });
  });

  it('checks every redirect hop again: address and scheme', async () => {
    for (const path of ['/redirect-forbidden', '/redirect-private', '/redirect-metadata']) {
      expect(await failure(`${server.origin}${path}`, allowed())).toMatchObject({
        code: 'forbidden_address',
        kind: 'refused',
      });
    }
    expect(forbidden.connections).toBe(0);
    expect(await failure(`${server.origin}/redirect-http`, allowed())).toMatchObject({
      code: 'scheme_not_allowed',
      kind: 'refused',
    });
    expect(await failure(`${server.origin}/redirect-loop`, allowed())).toMatchObject({
      code: 'too_many_redirects',
    });
    expect(await failure(`${server.origin}/redirect-twice`, allowed({ maxRedirects: 1 }))).toMatchObject({
      code: 'too_many_redirects',
    });
    expect(await failure(`${server.origin}/redirect-nowhere`, allowed())).toMatchObject({
      code: 'bad_redirect',
    });
  });

  it('cuts off a body past the size cap while it streams, whatever Content-Length says', async () => {
    expect(await failure(`${server.origin}/large-declared`, allowed())).toMatchObject({
      code: 'too_large',
      kind: 'refused',
    });
    // Would never end if the fetcher waited for the body to finish.
    expect(await failure(`${server.origin}/endless`, allowed({ timeoutMs: 20_000 }))).toMatchObject({
      code: 'too_large',
      kind: 'refused',
    });
    expect(await failure(`${server.origin}/chunked-large`, allowed())).toMatchObject({ code: 'too_large' });
    // The same body fits a larger cap.
    expect(
      (await outboundFetch(`${server.origin}/chunked-large`, allowed({ maxBytes: 300_000 }))).bytes.length,
    ).toBe(300_000);
  });

  it('refuses a declared type the caller does not accept, a missing one, and a compressed body', async () => {
    expect(await failure(`${server.origin}/page`, allowed())).toMatchObject({
      code: 'unsupported_content_type',
      kind: 'refused',
      message: expect.stringContaining('text/html'),
    });
    expect(await failure(`${server.origin}/untyped`, allowed())).toMatchObject({
      code: 'unsupported_content_type',
    });
    expect(await failure(`${server.origin}/image.png`, allowed({ accept: ['image/jpeg'] }))).toMatchObject({
      code: 'unsupported_content_type',
    });
    expect(await failure(`${server.origin}/gzipped`, allowed())).toMatchObject({
      code: 'unsupported_encoding',
    });
    // Without `accept`, any type is taken.
    expect((await outboundFetch(`${server.origin}/page`, allowed({ accept: undefined }))).contentType).toBe(
      'text/html',
    );
  });

  it('classifies answers: a 4xx will not work, a 5xx, 429, timeout or reset may', async () => {
    expect(await failure(`${server.origin}/not-found`, allowed())).toMatchObject({
      code: 'http_status',
      kind: 'refused',
      status: 404,
    });
    expect(await failure(`${server.origin}/gone`, allowed())).toMatchObject({ kind: 'refused', status: 410 });
    expect(await failure(`${server.origin}/busy`, allowed())).toMatchObject({
      kind: 'transient',
      status: 503,
    });
    expect(await failure(`${server.origin}/throttled`, allowed())).toMatchObject({
      kind: 'transient',
      status: 429,
    });
    const started = Date.now();
    expect(await failure(`${server.origin}/silent`, allowed({ timeoutMs: 300 }))).toMatchObject({
      code: 'timeout',
      kind: 'transient',
    });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await failure(`${server.origin}/reset`, allowed())).toMatchObject({
      code: 'network',
      kind: 'transient',
    });
    // Nothing listens on port 1.
    expect(await failure('https://127.0.0.1:1/x.png', allowed())).toMatchObject({
      code: 'network',
      kind: 'transient',
    });
  });

  it('takes HTTPS only unless told otherwise, never credentials, and only certificates it trusts', async () => {
    const plain = await startTestServer(
      (_request, response) => void response.writeHead(200, { 'content-type': 'image/png' }).end(png),
    );
    try {
      expect(await failure(`${plain.origin}/image.png`, allowed())).toMatchObject({
        code: 'scheme_not_allowed',
        kind: 'refused',
      });
      expect(plain.connections).toBe(0);
      const fetched = await outboundFetch(
        `${plain.origin}/image.png`,
        allowed({ schemes: ['https:', 'http:'] }),
      );
      expect(fetched.bytes.equals(png)).toBe(true);
    } finally {
      await plain.close();
    }
    expect(await failure('file:///etc/passwd', allowed())).toMatchObject({ code: 'scheme_not_allowed' });
    expect(await failure('not a url', allowed())).toMatchObject({ code: 'invalid_url' });
    expect(
      await failure(`https://user:pw@127.0.0.1:${new URL(server.origin).port}/image.png`, allowed()),
    ).toMatchObject({
      code: 'credentials_in_url',
    });
    expect(await failure(`${server.origin}/image.png`, allowed({ extraCa: [] }))).toMatchObject({
      code: 'tls',
      kind: 'refused',
    });
  });
});
