import { afterEach, describe, expect, it } from 'vitest';
import { outboundPost } from '../../src/net/outbound-post.js';
import { WebhookResolver } from '../../src/net/webhook-resolver.js';
import { startSilentNameServer, type TestNameServer } from '../support/silent-name-server.js';

/**
 * How webhook host names are resolved (issue 35 §4): in DNS, with c-ares (no thread of libuv's
 * pool held), a time limit per name and a cap on the names resolved at once; against a name server
 * on loopback that drops queries until told to answer.
 */
describe('the webhook resolver', () => {
  let server: TestNameServer | undefined;
  afterEach(() => server?.close());
  const start = async (options: { timeoutMs: number; maxInFlight: number }) => {
    server = await startSilentNameServer();
    return { server, resolver: new WebhookResolver({ servers: [server.address], ...options }) };
  };
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      (value) => expect.unreachable(`resolved (${JSON.stringify(value)})`),
      (error: unknown) => error as NodeJS.ErrnoException,
    );

  it('answers literals as themselves and localhost as loopback without asking; /etc/hosts is not read', async () => {
    const { server, resolver } = await start({ timeoutMs: 1_000, maxInFlight: 4 });
    expect(await resolver.lookup('203.0.113.9')).toEqual([{ address: '203.0.113.9', family: 4 }]);
    expect(await resolver.lookup('[::1]')).toEqual([{ address: '::1', family: 6 }]);
    expect(await resolver.lookup('localhost')).toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(await resolver.lookup('hooks.localhost.', 4)).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(server.asked).toEqual([]);
    // A name only a host file could know is asked of DNS (which here never answers).
    expect((await failure(resolver.lookup('ip6-localhost'))).code).toBe('ETIMEOUT');
    expect(server.asked).toContain('ip6-localhost');
  });

  it('a name whose name server drops queries fails at its time limit (ETIMEOUT); a delivery to it is refused', async () => {
    const { resolver } = await start({ timeoutMs: 300, maxInFlight: 4 });
    const started = Date.now();
    const error = await failure(resolver.lookup('hooks.silent.example.com'));
    expect(error).toMatchObject({
      code: 'ETIMEOUT',
      message: expect.stringMatching(/did not answer within 300 ms/),
    });
    const delivery = await failure(
      outboundPost(
        'https://hooks.silent.example.com/hook',
        { body: Buffer.from('{}'), headers: {} },
        { timeoutMs: 15_000, allowCidrs: [], resolve: resolver.resolve },
      ),
    );
    expect(delivery).toMatchObject({
      code: 'network',
      message: 'https://hooks.silent.example.com: its host name did not resolve in time',
    });
    // Both within the time limit (and far within the delivery's 15 s), not the system resolver's retries.
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('resolves at most maxInFlight names at once: the others wait their turn', async () => {
    const { server, resolver } = await start({ timeoutMs: 10_000, maxInFlight: 2 });
    const names = Array.from({ length: 5 }, (_, i) => `hook-${i}.example.com`);
    const lookups = names.map((name) => resolver.lookup(name, 4));
    await expect.poll(() => new Set(server.asked).size).toBe(2);
    // Held unanswered, two names are all that were asked; answered, the others follow.
    expect(new Set(server.asked)).toEqual(new Set(names.slice(0, 2)));
    server.answer();
    for (const addresses of await Promise.all(lookups))
      expect(addresses).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(new Set(server.asked)).toEqual(new Set(names));
  });
});
