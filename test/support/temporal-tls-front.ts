import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { TestCertificates } from './test-certificates.js';

/** One gRPC call the front let through or refused. */
export interface FrontCall {
  method: string;
  /** The common name of the client certificate the caller presented. */
  client: string;
  /** Whether the call carried `authorization: Bearer <the expected key>`. */
  keyAccepted: boolean;
}

export interface TemporalTlsFront {
  /** host:port to give as TEMPORAL_ADDRESS. */
  address: string;
  calls: FrontCall[];
  close(): Promise<void>;
}

/**
 * What a production Temporal frontend looks like from a client (Temporal Cloud, or a self-hosted
 * cluster behind mTLS): TLS with a certificate for `serverName`, a client certificate signed by
 * our CA required, and, when `apiKey` is given, each call's bearer token checked. The Temporal dev
 * server speaks plaintext only, so this front terminates TLS and forwards each HTTP/2 stream (a
 * gRPC call) to it unchanged.
 */
export async function startTemporalTlsFront(options: {
  upstream: string;
  certificates: TestCertificates;
  apiKey?: string;
}): Promise<TemporalTlsFront> {
  const calls: FrontCall[] = [];
  const upstream = http2.connect(`http://${options.upstream}`);
  upstream.on('error', () => {});
  const server = http2.createSecureServer({
    cert: options.certificates.server.cert,
    key: options.certificates.server.key,
    ca: options.certificates.ca.cert,
    requestCert: true,
    rejectUnauthorized: true,
    allowHTTP1: false,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const socket = stream.session?.socket as TLSSocket | undefined;
    const client = String(socket?.getPeerCertificate().subject?.CN ?? '');
    const keyAccepted = options.apiKey !== undefined && headers.authorization === `Bearer ${options.apiKey}`;
    calls.push({ method: String(headers[':path']), client, keyAccepted });
    if (options.apiKey !== undefined && !keyAccepted) {
      // gRPC's trailers-only answer: UNAUTHENTICATED, as Temporal Cloud answers a bad key.
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc',
          'grpc-status': '16',
          'grpc-message': 'bad API key',
        },
        { endStream: true },
      );
      return;
    }
    const forwarded: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers))
      if (!name.startsWith(':') || name === ':method' || name === ':path') forwarded[name] = value;
    const call = upstream.request(forwarded);
    let trailers: http2.IncomingHttpHeaders = {};
    call.on('response', (responseHeaders) => {
      const trailersOnly = responseHeaders['grpc-status'] !== undefined;
      stream.respond(stripPseudo(responseHeaders, ':status'), {
        endStream: trailersOnly,
        waitForTrailers: !trailersOnly,
      });
      if (!trailersOnly) call.pipe(stream);
    });
    call.on('trailers', (received) => (trailers = received));
    stream.on('wantTrailers', () => stream.sendTrailers(stripPseudo(trailers)));
    stream.pipe(call);
    stream.on('close', () => call.close());
    call.on('close', () => {
      if (!stream.closed && !stream.headersSent) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    call.on('error', () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.on('error', () => call.close());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        upstream.close();
        server.close(() => resolve());
        // Long polls hold their sessions open; closing the server waits for none of them.
        for (const session of sessions) session.destroy();
      }),
  };
}

function stripPseudo(headers: http2.IncomingHttpHeaders, keep?: string): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers))
    if (!name.startsWith(':') || name === keep) out[name] = value;
  return out;
}
