import { connect, createServer, type Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { Client, type AccountEvent, type GenerationEvent } from '../../clients/typescript/src/index.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { pairSockets } from '../support/tcp-relay.js';
import { keepingRequests, startTestServer } from '../support/test-servers.js';
import { useListeningStack } from './client-stack.js';
import { useGen } from './gen-cli.js';

/**
 * Issue 35 item 7, the clients' side: one stream for the whole account (GET /v1/events) read by
 * `client.events()`, the webhook secret read by `client.webhooks`, and `gen listen --forward-to`,
 * which hands a local receiver each event signed exactly as a webhook delivery is.
 */
describe('the account event stream: client.events(), client.webhooks, gen listen (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 100 }, worker: { simDelayMs: 300 } });
  const cli = useGen(stack, { tmpPrefix: 'gen-listen-', killAfterMs: 60_000 });

  /** A client of an account of its own: its stream holds only this test's generations. */
  const ownClient = async (baseURL = stack.listening.baseURL) => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    return { account, client: new Client({ apiKey: account.key, baseURL }) };
  };

  /** A generation's event log as GET /v1/generations/{id}/events (JSON) gives it. */
  const logOf = async (key: string, id: string) =>
    (
      await stack.api.app.inject({
        method: 'GET',
        url: `/v1/generations/${id}/events`,
        headers: bearer(key),
      })
    ).json<{ data: GenerationEvent[] }>().data;

  /** Reads `events` in the background until `enough` says so; `opened` resolves once it is open. */
  function reader(
    start: (onOpen: () => void) => AsyncIterable<AccountEvent>,
    enough: (seen: AccountEvent[]) => boolean,
  ) {
    const seen: AccountEvent[] = [];
    let open: () => void = () => undefined;
    const isOpen = new Promise<void>((resolve) => (open = resolve));
    const done = (async () => {
      for await (const event of start(() => open())) {
        seen.push(event);
        if (enough(seen)) break;
      }
      return seen;
    })();
    // A stream that fails before it opens fails the test at once.
    const opened = Promise.race([isOpen, done.then(() => Promise.reject(new Error('ended unopened')))]);
    return { opened, done, seen };
  }

  const succeeded = (ids: string[]) => (seen: AccountEvent[]) =>
    ids.every((id) =>
      seen.some(({ event }) => event.data.id === id && event.type === 'generation.succeeded'),
    );

  it('client.events(): each generation of the account, event by event, as in its own log; a cursor resumes after its event', async () => {
    const { account, client } = await ownClient();
    const ids: string[] = [];
    const reading = reader(
      (onOpen) => client.events({ onOpen }),
      (seen) => ids.length === 2 && succeeded(ids)(seen),
    );
    await reading.opened;
    for (const prompt of ['first', 'second'])
      ids.push((await client.generations.create({ model: 'lumen-lite', prompt })).id);
    const items = await reading.done;
    const events = items.map((item) => item.event);

    for (const id of ids) {
      const mine = events.filter((e) => e.data.id === id);
      expect(mine.map((e) => `${e.id} ${e.type}`)).toEqual([
        '1 generation.created',
        '2 generation.processing',
        '3 generation.succeeded',
      ]);
      // The same objects as the generation's own log.
      expect(mine).toEqual(await logOf(account.key, id));
    }
    // The same bytes as a webhook body of the event.
    for (const item of items) expect(item.raw).toBe(JSON.stringify(item.event));
    expect(events.every((e) => ids.includes(e.data.id))).toBe(true);
    // The first generation's creation was committed before the second's.
    expect(events.findIndex((e) => e.data.id === ids[0])).toBeLessThan(
      events.findIndex((e) => e.data.id === ids[1]),
    );
    const cursors = items.map((e) => e.cursor);
    expect(new Set(cursors).size).toBe(cursors.length);
    expect(cursors.every((c) => typeof c === 'string' && c !== '')).toBe(true);
    // As GET /v1/events gives an event: {cursor, event} (raw is not part of its JSON).
    expect(Object.keys(items[0]!).sort()).toEqual(['cursor', 'event']);

    // From a cursor: exactly the events after it, nothing repeated.
    const after = reader(
      (onOpen) => client.events({ lastEventId: items[1]!.cursor, onOpen }),
      (seen) => seen.length === items.length - 2,
    );
    expect((await after.done).map((e) => e.cursor)).toEqual(cursors.slice(2));
  });

  it('a stream cut before its first event, then after it, is resumed: nothing lost, nothing twice', async () => {
    // A relay to the API whose open connections the test resets (a proxy or a network failing).
    const sockets = new Set<Socket>();
    let connections = 0;
    const relay = createServer((socket) => {
      connections++;
      const upstream = connect(stack.listening.port, '127.0.0.1');
      pairSockets(socket, upstream, sockets);
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const { port } = relay.address() as { port: number };
    const cutAll = () => {
      for (const socket of sockets) socket.resetAndDestroy();
    };
    try {
      const { account, client } = await ownClient(`http://127.0.0.1:${port}/v1`);
      const direct = new Client({ apiKey: account.key, baseURL: stack.listening.baseURL });
      let id = '';
      let opens = 0;
      let cutAfterEvent = false;
      const reading = reader(
        (onOpen) =>
          client.events({
            onOpen: () => {
              // The first stream is cut as soon as it opens: the generation is made while no
              // stream is open, its first events committed before the next one opens.
              if (opens++ === 0) cutAll();
              onOpen();
            },
          }),
        (seen) => {
          if (!cutAfterEvent) {
            cutAfterEvent = true;
            cutAll();
          }
          return succeeded([id])(seen);
        },
      );
      await reading.opened;
      id = (await direct.generations.create({ model: 'lumen-lite', prompt: 'cut [sim:slow=2]' })).id;
      const events = (await reading.done).map((item) => item.event);
      expect(events).toEqual(await logOf(account.key, id));
      expect(opens).toBeGreaterThanOrEqual(3);
      expect(connections).toBeGreaterThanOrEqual(3);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => relay.close(resolve));
    }
  });

  it('onStart tells where an iteration from now on starts: a new iteration from there, after a failure before any event, misses nothing (gen listen resumes so)', async () => {
    const { account, client } = await ownClient();
    const stop = new AbortController();
    let start: string | undefined;
    const first = client.events({ signal: stop.signal, onStart: (cursor) => (start = cursor) });
    // The first iteration pins its start, then is given up before any event (as after a failure).
    const pending = first.next();
    await expect.poll(() => start).toBeDefined();
    stop.abort();
    await pending.catch(() => undefined);
    const id = (await client.generations.create({ model: 'lumen-lite', prompt: 'meanwhile' })).id;
    const reading = reader((onOpen) => client.events({ lastEventId: start, onOpen }), succeeded([id]));
    const events = (await reading.done).map((item) => item.event);
    expect(events).toEqual(await logOf(account.key, id));
  });

  it('client.webhooks: secret() reads the signing secret, rotateSecret() replaces it (the old one signs on as previous)', async () => {
    const { client } = await ownClient();
    const first = await client.webhooks.secret();
    expect(first.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(await client.webhooks.secret()).toEqual(first);
    const rotated = await client.webhooks.rotateSecret();
    expect(rotated.secret).not.toBe(first.secret);
    expect(rotated.previous?.secret).toBe(first.secret);
    expect((await client.webhooks.secret()).secret).toBe(rotated.secret);
  });

  it('gen listen --forward-to: three events of two generations, in order, each verified by standardwebhooks at a loopback receiver; a receiver failure is reported; Ctrl-C ends it', async () => {
    const { account, client } = await ownClient();
    const received: { headers: Record<string, string>; body: string }[] = [];
    const answers = [500]; // the first delivery fails; the others are still forwarded
    const receiver = await startTestServer(
      keepingRequests(received, (response) => void response.writeHead(answers.shift() ?? 204).end()),
    );
    try {
      // Refused before anything is sent.
      for (const [option, value] of [
        ['--forward-to', 'ftp://localhost/hook'],
        ['--events', 'generation.nope'],
      ] as const) {
        const refused = await cli.gen(['listen', option, value], { key: account.key });
        expect({ code: refused.code, stderr: refused.stderr }).toEqual({
          code: 2,
          stderr: expect.stringContaining(`gen: ${option} ${value}: expected`) as string,
        });
      }

      const listening = cli.start(
        [
          'listen',
          '--forward-to',
          `${receiver.origin}/hook`,
          '--events',
          'generation.created,generation.succeeded',
        ],
        { key: account.key },
      );
      await expect.poll(() => listening.output.stderr, { timeout: 20_000 }).toContain('Ready:');
      const first = await client.generations.run({ model: 'lumen-lite', prompt: 'one' });
      const second = await client.generations.create({ model: 'lumen-lite', prompt: 'two [sim:slow=30]' });
      await expect.poll(() => received.length, { timeout: 20_000 }).toBe(3);
      const lines = () => listening.output.stdout.trim().split('\n');
      await expect.poll(() => lines().length).toBe(3);
      listening.stop();
      const ended = await listening.done;
      expect(ended.code, ended.stderr).toBe(0);
      expect(ended.stderr).toContain('Stopped listening.');

      // Each delivery verifies with the reference library and the account's secret, unchanged.
      const { secret } = await client.webhooks.secret();
      const verified = received.map((r) => new Webhook(secret).verify(r.body, r.headers) as GenerationEvent);
      const expected = [
        [first.id, 1, 'generation.created'],
        [first.id, 3, 'generation.succeeded'],
        [second.id, 1, 'generation.created'],
      ] as const;
      expect(verified.map((e) => [e.data.id, e.id, e.type])).toEqual(expected);
      // The webhook-id a delivery of that event has, and its body's very bytes.
      const logs = {
        [first.id]: await logOf(account.key, first.id),
        [second.id]: await logOf(account.key, second.id),
      };
      expected.forEach(([id, seq], i) => {
        expect(received[i]!.headers['webhook-id']).toBe(`msg_${id}_${seq}`);
        expect(received[i]!.headers['content-type']).toBe('application/json');
        expect(received[i]!.body).toBe(JSON.stringify(logs[id]!.find((e) => e.id === seq)));
      });
      // A line per event (JSON off a terminal), the receiver's status in each.
      expect(lines().map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual(
        expected.map(([id, seq, type], i) =>
          expect.objectContaining({
            type,
            generation_id: id,
            event_id: seq,
            webhook_id: `msg_${id}_${seq}`,
            status: [500, 204, 204][i],
          }),
        ),
      );
    } finally {
      await receiver.close();
    }
  });
});
