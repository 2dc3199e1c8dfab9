import { describe, expect, it } from 'vitest';
import {
  AbortedError,
  Client,
  NotFoundError,
  type GenerationEvent,
} from '../../clients/typescript/src/index.js';
import { startTcpRelay } from '../support/tcp-relay.js';
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
  });
});
