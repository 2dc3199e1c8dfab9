import { describe, expect, it } from 'vitest';
import {
  AbortedError,
  Client,
  NotFoundError,
  WaitTimeoutError,
  type Generation,
  type GenerationEvent,
} from '../../clients/typescript/src/index.js';
import { startTestApi } from '../support/api.js';
import { startFaultyFront } from '../support/faulty-front.js';
import { startTcpRelay } from '../support/tcp-relay.js';
import { waitFor } from '../support/wait.js';
import { useListeningStack } from './client-stack.js';

describe('client.generations.events(id)', () => {
  const stack = useListeningStack({ worker: { concurrencyLimit: 20 }, account: { oneTime: 1000 } });
  const client = (baseURL = stack.listening.baseURL) => new Client({ apiKey: stack.account.key, baseURL });
  const collect = async (events: AsyncIterable<GenerationEvent>) => {
    const all: GenerationEvent[] = [];
    for await (const event of events) all.push(event);
    return all;
  };

  it('yields each event as it happens and ends once the generation is terminal', async () => {
    const created = await client().generations.create({ model: 'lumen-lite', prompt: 'slow [sim:slow=2]' });
    const events = await collect(client().generations.events(created.id));
    expect(events.map((e) => `${e.id} ${e.type} ${e.data.status}`)).toEqual([
      '1 generation.created queued',
      '2 generation.processing queued',
      '3 generation.succeeded succeeded',
    ]);
    // Resumed from an event: only the later ones; from the last one: none (the server's 204).
    expect(
      (await collect(client().generations.events(created.id, { lastEventId: 1 }))).map((e) => e.id),
    ).toEqual([2, 3]);
    expect(await collect(client().generations.events(created.id, { lastEventId: 3 }))).toEqual([]);
  });

  it('a connection cut mid-stream is resumed with Last-Event-ID: nothing lost, nothing twice', async () => {
    const cuts: unknown[] = [];
    // The stream's first connection is reset part-way through its answer (after the first event).
    const relay = await startTcpRelay({ host: '127.0.0.1', port: stack.listening.port }, 0, {
      cut: (n) => (n === 0 ? { direction: 'answer', afterBytes: 1600 } : undefined),
      onCut: (cut) => cuts.push(cut),
    });
    try {
      const viaRelay = client(`http://127.0.0.1:${relay.port}/v1`);
      const created = await client().generations.create({ model: 'lumen-lite', prompt: 'slow [sim:slow=2]' });
      const events = await collect(viaRelay.generations.events(created.id));
      expect(cuts.length).toBe(1);
      expect(events.map((e) => e.id)).toEqual([1, 2, 3]);
      expect(events.at(-1)!.type).toBe('generation.succeeded');
    } finally {
      await relay.close();
    }
  });

  it('an unknown generation throws NotFoundError; an abort stops it with AbortedError', async () => {
    await expect(collect(client().generations.events('gen_unknown000000000000'))).rejects.toBeInstanceOf(
      NotFoundError,
    );
    const created = await client().generations.create({ model: 'lumen-lite', prompt: 'slow [sim:slow=30]' });
    const stop = new AbortController();
    const seen: number[] = [];
    const reading = (async () => {
      for await (const event of client().generations.events(created.id, { signal: stop.signal })) {
        seen.push(event.id);
        stop.abort();
      }
    })();
    await expect(reading).rejects.toBeInstanceOf(AbortedError);
    expect(seen).toEqual([1]);
    // The API let the stream go (the connection closed), the generation running on; so does a break.
    const streamsClosed = () => waitFor(() => Promise.resolve(stack.api.streaming() === 0), 3000);
    await streamsClosed();
    for await (const event of client().generations.events(created.id)) if (event.id === 1) break;
    await streamsClosed();
    expect((await client().generations.get(created.id)).status).toBe('queued');
  });

  describe('wait() on the event stream', () => {
    const front = async (rules: Parameters<typeof startFaultyFront>[1] = []) => {
      const f = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, rules);
      return { front: f, client: client(`${f.origin}/v1`) };
    };

    it('a wait longer than one held request reads the event stream: one GET /events, no held GETs', async () => {
      const { front: f, client: c } = await front();
      try {
        const created = await client().generations.create({
          model: 'lumen-lite',
          prompt: 'streamed [sim:slow=2]',
        });
        const updates: Generation[] = [];
        const done = await c.generations.wait(created.id, {
          timeoutMs: 120_000,
          onUpdate: (g) => updates.push(g),
        });
        expect(done).toMatchObject({ id: created.id, status: 'succeeded' });
        expect(done).toEqual(await client().generations.get(created.id));
        // Each visible change once: created, handed to its provider (the provider field), succeeded.
        expect(updates.map((g) => [g.status, g.provider])).toEqual([
          ['queued', null],
          ['queued', 'simulated'],
          ['succeeded', 'simulated'],
        ]);
        const streams = f.requests.filter((r) =>
          r.line.startsWith(`GET /v1/generations/${created.id}/events `),
        );
        expect(streams).toHaveLength(1);
        expect(streams[0]!.head).toContain('\naccept: text/event-stream');
        expect(f.requests.filter((r) => r.line.startsWith(`GET /v1/generations/${created.id} `))).toEqual([]);
        // A short wait is one held GET: no stream for it.
        const quick = await client().generations.create({ model: 'lumen-lite', prompt: 'held' });
        expect((await c.generations.wait(quick.id, { timeoutMs: 30_000 })).status).toBe('succeeded');
        expect(f.requests.filter((r) => r.line.startsWith(`GET /v1/generations/${quick.id}/events`))).toEqual(
          [],
        );
      } finally {
        await f.close();
      }
    });

    it('an API without the stream (404 No route): wait() holds GETs instead', async () => {
      const created = await client().generations.create({
        model: 'lumen-lite',
        prompt: 'fallback [sim:slow=2]',
      });
      const events = `GET /v1/generations/${created.id}/events`;
      const { front: f, client: c } = await front([
        {
          requestLine: events,
          fault: {
            kind: 'answer',
            status: 404,
            body: { error: { code: 'not_found', message: `No route ${events}` } },
          },
        },
      ]);
      try {
        const done = await c.generations.wait(created.id, { timeoutMs: 120_000 });
        expect(done.status).toBe('succeeded');
        expect(f.remaining()).toEqual([0]);
        expect(f.requests.filter((r) => r.line.startsWith(events))).toHaveLength(1);
        const gets = f.requests.filter((r) => r.line.startsWith(`GET /v1/generations/${created.id} `));
        expect(gets.length).toBeGreaterThanOrEqual(1);
        expect(gets[0]!.head).toMatch(/\nprefer: wait=\d+/);
      } finally {
        await f.close();
      }
    });

    it('the deadline ends a wait on the stream: WaitTimeoutError with the last state; the job goes on', async () => {
      const created = await client().generations.create({ model: 'lumen-lite', prompt: 'late [sim:slow=4]' });
      const started = Date.now();
      const error = await client()
        .generations.wait(created.id, { timeoutMs: 1000, useEvents: true })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WaitTimeoutError);
      expect(Date.now() - started).toBeLessThan(3000);
      expect((error as WaitTimeoutError).generation).toMatchObject({ id: created.id, status: 'queued' });
      expect((await client().generations.wait(created.id, { useEvents: true })).status).toBe('succeeded');
    });

    it('a wait ended by its deadline leaves its API nothing to wait for: the stream detached, the shutdown prompt', async () => {
      // An API of its own, closed here while the generation still runs.
      const own = await startTestApi(stack.db.url, stack.worker.apiEnv);
      let closing: Promise<string> | undefined;
      try {
        await own.app.listen({ host: '127.0.0.1', port: 0 });
        const { port } = own.app.server.address() as { port: number };
        const viaOwn = client(`http://127.0.0.1:${port}/v1`);
        const created = await viaOwn.generations.create({
          model: 'lumen-lite',
          prompt: 'long [sim:slow=30]',
        });
        const error = await viaOwn.generations
          .wait(created.id, { timeoutMs: 1000, useEvents: true })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(WaitTimeoutError);
        await waitFor(() => Promise.resolve(own.streaming() === 0), 3000);
        expect((await client().generations.get(created.id)).status).toBe('queued');
        // Node's fetch opened a connection it never uses after the abort (nodejs/undici#5845): the
        // shutdown does not wait for it (it used to, about 70 s).
        closing = own.close().then(() => 'closed');
        const late = new Promise((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000));
        expect(await Promise.race([closing, late])).toBe('closed');
      } finally {
        if (closing) own.app.server.closeAllConnections(); // not to wait 70 s when this fails
        await (closing ?? own.close());
      }
    });
  });
});
