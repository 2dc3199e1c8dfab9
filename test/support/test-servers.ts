import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { deflateSync } from 'node:zlib';
import { selfSignedLoopbackCertificate, type CertificatePair } from './test-certificates.js';

export type Certificate = CertificatePair;

let certificate: Promise<Certificate> | undefined;

/** A self-signed certificate for localhost, 127.0.0.1, 127.0.0.2 and ::1: made once per test file. */
export function selfSignedCertificate(): Promise<Certificate> {
  certificate ??= selfSignedLoopbackCertificate();
  return certificate;
}

export interface TestServer {
  /** `https://127.0.0.1:PORT` (or the host and scheme asked for), no trailing slash. */
  origin: string;
  /** Paths requested, in order. */
  requests: string[];
  /** TCP connections accepted (a refused fetch must not even connect). */
  connections: number;
  close(): Promise<void>;
}

/** A request as a receiver got it: its headers, and its body as text (the bytes a signature covers). */
export interface ReceivedRequest {
  headers: Record<string, string>;
  body: string;
}

/**
 * A handler that keeps each request, read to its end, in `received`, then answers it as `answer`
 * says (204 by default): the webhook receivers' handler (a delivery verifies over `body`).
 */
export function keepingRequests(
  received: ReceivedRequest[],
  answer: (response: http.ServerResponse) => void = (response) => void response.writeHead(204).end(),
): (request: http.IncomingMessage, response: http.ServerResponse) => void {
  return (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({
        headers: request.headers as Record<string, string>,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      answer(response);
    });
  };
}

/** An HTTP(S) server on a loopback address that records what reaches it. */
export async function startTestServer(
  handler: (request: http.IncomingMessage, response: http.ServerResponse) => void,
  options: { tls?: Certificate | null; host?: string; port?: number } = {},
): Promise<TestServer> {
  const host = options.host ?? '127.0.0.1';
  const server = options.tls
    ? https.createServer({ key: options.tls.key, cert: options.tls.cert }, handler)
    : http.createServer(handler);
  const sockets = new Set<Socket>();
  const state = { requests: [] as string[], connections: 0 };
  server.on('connection', (socket: Socket) => {
    state.connections++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (request: http.IncomingMessage) => state.requests.push(request.url ?? ''));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return {
    origin: `${options.tls ? 'https' : 'http'}://${hostPart}:${port}`,
    get requests() {
      return state.requests;
    },
    get connections() {
      return state.connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A valid PNG of any size that is only a few kilobytes: 1-bit greyscale, all
 * black, deflated. Decoded, it is width × height pixels (a decompression bomb
 * for large sizes).
 */
export function pngBomb(width: number, height: number): Buffer {
  // Each row: a filter byte, then width bits.
  return png(width, height, Buffer.alloc((1 + Math.ceil(width / 8)) * height));
}

/** A PNG whose header claims a size its data does not hold (one row of one pixel). */
export function pngClaiming(width: number, height: number): Buffer {
  return png(width, height, Buffer.alloc(2));
}

function png(width: number, height: number, rows: Buffer): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 1; // bit depth
  header[9] = 0; // greyscale
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(rows, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const byte of bytes) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
