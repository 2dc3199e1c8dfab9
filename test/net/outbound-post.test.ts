import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resolve } from '../../src/net/pinned-connection.js';
import { outboundPost } from '../../src/net/outbound-post.js';
import {
  selfSignedCertificate,
  startTestServer,
  type Certificate,
  type TestServer,
} from '../support/test-servers.js';

/**
 * The webhook sender's own check (issue 30 §3: the outbound rules "checked at admission and again
 * at each delivery (DNS can change)"): whatever a name resolved to at admission, what it resolves
 * to now is judged here, at the connection, at every post. Real HTTPS servers on loopback; names
 * are resolved by a test resolver that answers as a DNS server under someone else's control would,
 * so its answer can change between two deliveries.
 */
describe('outboundPost', () => {
  let certificate: Certificate;
  /** The receiver, on 127.0.0.1 (allow-listed, standing for a public address). */
  let receiver: TestServer;
  /** On 127.0.0.2 (the receiver's port), which no test allows: it must never see a connection. */
  let forbidden: TestServer;
  /** What the test resolver answers for `localhost` (the name the test certificate is for). */
  let answer: string[] = [];
  const asked: string[] = [];
  const resolve: Resolve = (hostname, _options, callback) => {
    asked.push(hostname);
    const addresses: LookupAddress[] = answer.map((address) => ({
      address,
      family: address.includes(':') ? 6 : 4,
    }));
    setImmediate(() => callback(null, addresses));
  };

  beforeAll(async () => {
    certificate = await selfSignedCertificate();
    receiver = await startTestServer(
      (request, response) => {
        request.resume();
        request.on('end', () => {
          if (request.url === '/moved')
            response.writeHead(307, { location: `https://127.0.0.2:${forbiddenPort()}/hook` }).end();
          else response.writeHead(request.url === '/fail' ? 500 : 204).end();
        });
      },
      { tls: certificate },
    );
    forbidden = await startTestServer((_request, response) => void response.writeHead(204).end(), {
      tls: certificate,
      host: '127.0.0.2',
      port: Number(port()),
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await forbidden?.close();
  });
  const forbiddenPort = () => new URL(forbidden.origin).port;
  const port = () => new URL(receiver.origin).port;
  const body = { body: Buffer.from('{"type":"generation.succeeded"}'), headers: {} };
  const options = (allowCidrs: string[]) => ({
    timeoutMs: 5_000,
    allowCidrs,
    extraCa: [certificate.cert],
    resolve,
  });
  const refusal = (url: string, allowCidrs: string[]) =>
    outboundPost(url, body, options(allowCidrs)).then(
      (status) => expect.unreachable(`delivered (${status})`),
      (e: unknown) => e as { code: string; kind: string; message: string },
    );

  it('posts to an allowed address and answers the status, by literal and by name', async () => {
    const before = receiver.requests.length;
    expect(await outboundPost(`${receiver.origin}/hook`, body, options(['127.0.0.1/32']))).toBe(204);
    expect(await outboundPost(`${receiver.origin}/fail`, body, options(['127.0.0.1/32']))).toBe(500);
    answer = ['127.0.0.1'];
    expect(await outboundPost(`https://localhost:${port()}/hook`, body, options(['127.0.0.1/32']))).toBe(204);
    expect(receiver.requests.slice(before)).toEqual(['/hook', '/fail', '/hook']);
    // A redirect is an answer, not a delivery: never followed (here, to a forbidden address).
    expect(await outboundPost(`${receiver.origin}/moved`, body, options(['127.0.0.1/32']))).toBe(307);
    expect(forbidden.connections).toBe(0);
  });

  it('judges the address a name resolves to at each post: a name that rebinds to one not allowed is refused', async () => {
    const url = `https://localhost:${port()}/hook`;
    answer = ['127.0.0.1'];
    expect(await outboundPost(url, body, options(['127.0.0.1/32']))).toBe(204);
    const before = { receiver: receiver.connections, asked: asked.length };
    // The same URL, the name's answer changed: each post asks again, and refuses before connecting.
    for (const [addresses, range] of [
      [['127.0.0.2'], 'loopback'],
      [['10.0.0.5'], 'private'],
      [['169.254.169.254'], 'cloud metadata'],
      [['fd00::1'], 'uniqueLocal'],
      // Every address must be allowed, not just one of them.
      [['127.0.0.1', '192.168.1.1'], 'private'],
    ] as const) {
      answer = [...addresses];
      expect(await refusal(url, ['127.0.0.1/32'])).toMatchObject({
        code: 'forbidden_address',
        kind: 'refused',
        message: `https://localhost:${port()} resolves to an address we never fetch (${range})`,
      });
    }
    expect(asked.length - before.asked).toBe(5);
    expect(receiver.connections).toBe(before.receiver);
    expect(forbidden.connections).toBe(0);
  });

  it('refuses literal addresses outside the allowed set, allows an allowed CIDR, never cloud metadata', async () => {
    const before = receiver.connections;
    expect(await refusal(`${receiver.origin}/hook`, [])).toMatchObject({ code: 'forbidden_address' });
    expect(await refusal(`https://127.0.0.2:${forbiddenPort()}/hook`, ['127.0.0.1/32'])).toMatchObject({
      message: expect.stringContaining('(loopback)'),
    });
    expect(await refusal('https://10.1.2.3/hook', ['127.0.0.1/32'])).toMatchObject({
      message: expect.stringContaining('(private)'),
    });
    expect(await refusal('https://169.254.169.254/latest', ['169.254.0.0/16'])).toMatchObject({
      message: expect.stringContaining('(cloud metadata)'),
    });
    expect(await refusal('http://example.com/hook', [])).toMatchObject({ code: 'scheme_not_allowed' });
    expect(receiver.connections).toBe(before);
    expect(forbidden.connections).toBe(0);
    // The allowed set is a CIDR, not one address: the whole 127.0.0.0/8 lets 127.0.0.2 in.
    expect(
      await outboundPost(`https://127.0.0.2:${forbiddenPort()}/hook`, body, options(['127.0.0.0/8'])),
    ).toBe(204);
    expect(forbidden.connections).toBe(1);
  });
});
