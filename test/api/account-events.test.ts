import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { accountEventListSchema, generationEventSchema } from '../../src/api/schemas.js';
import { accountEventsAfter } from '../../src/db/account-events.js';
import { newId } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { openSse, type SseMessage } from '../support/sse.js';

/**
 * GET /v1/events: one stream for every generation of the account, in commit order, resumable with
 * one cursor. The account log itself first (concurrent writers, a reader resuming), then the route
 * on the real API service, across a restart. Generations are written with SQL (the trigger logs
 * their events as it does for the worker's changes): no worker needed.
 */
describe('GET /v1/events', () => {
  let db: TestDatabase;
  let api: ApiService;
  let origin: string;
  let account: TestAccount;
  const env = { EVENT_STREAM_KEEPALIVE_MS: '300' };

  const listen = async (service: ApiService) => {
    await service.app.listen({ host: '127.0.0.1', port: 0 });
    const address = service.app.server.address();
    return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  };
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, env);
    origin = await listen(api);
    account = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  const newGeneration = async (owner: TestAccount = account) => {
    const id = newId('gen');
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, credits, input)
      VALUES (${id}, ${owner.accountId}, ${owner.keyId}, 'queued', 'lumen-lite', 'image', 2, '{"prompt":"x"}')`);
    return id;
  };
  /** A change that logs one event (generation.updated). */
  const touch = (id: string, credits: number) =>
    db.pool.query(sql.unsafe`UPDATE generations SET credits = ${credits} WHERE id = ${id}`);
  const events = (messages: SseMessage[]) =>
    messages.map((m) => {
      const event = generationEventSchema.parse(JSON.parse(m.data));
      expect(m.event).toBe(event.type);
      return { cursor: m.id!, generation: event.data.id, seq: event.id, type: event.type };
    });
  const take = async (sse: Awaited<ReturnType<typeof openSse>>, n: number) => {
    const got: SseMessage[] = [];
    while (got.length < n) got.push((await sse.next())!);
    return events(got);
  };
  const stream = (headers: Record<string, string> = {}, query = '') =>
    openSse(`${origin}/v1/events${query}`, { ...bearer(account.key), ...headers });

  it('positions follow commit order: concurrent writers, and a reader resuming as it goes, see every event once', async () => {
    const owner = await createPaidAccount(db.pool);
    const ids = await Promise.all(Array.from({ length: 8 }, () => newGeneration(owner)));
    const { position: start } = (await accountEventsAfter(db.pool, owner.accountId, 0, 1000)).at(-1)!;
    // Each writer holds its transaction open a moment after logging its event: with positions taken
    // from a sequence, a later position would commit before an earlier one, and the reader, resuming
    // after the later one, would never see the earlier.
    const write = (id: string, credits: number) =>
      db.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`UPDATE generations SET credits = ${credits} WHERE id = ${id}`);
        await tx.query(sql.unsafe`SELECT pg_sleep(random() * 0.01)`);
      });
    let writing = true;
    const writers = Promise.all(
      ids.map(async (id) => {
        for (let credits = 3; credits < 9; credits += 1) await write(id, credits);
      }),
    ).finally(() => (writing = false));
    const seen: number[] = [];
    let after = start;
    for (let more = true; more;) {
      more = writing;
      const rows = await accountEventsAfter(db.pool, owner.accountId, after, 1000);
      for (const row of rows) seen.push(row.position);
      after = rows.at(-1)?.position ?? after;
    }
    await writers;
    const all = (await accountEventsAfter(db.pool, owner.accountId, start, 1000)).map((r) => r.position);
    expect(all).toHaveLength(8 * 6);
    expect(seen).toEqual(all); // nothing lost, nothing twice, in order
    expect(all).toEqual(all.map((_, i) => start + 1 + i)); // and no gaps
  });

  it('a stream carries the events of two generations in commit order, from now on; resumes after an API restart with none lost or repeated', async () => {
    const before = await newGeneration(); // its created event is before the stream: not sent
    const sse = await stream();
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const a = await newGeneration();
    const b = await newGeneration();
    await touch(b, 3);
    await touch(a, 3);
    const first = await take(sse, 4);
    expect(
      first.map((e) => `${e.generation === a ? 'a' : e.generation === b ? 'b' : '?'} ${e.seq} ${e.type}`),
    ).toEqual([
      'a 1 generation.created',
      'b 1 generation.created',
      'b 2 generation.updated',
      'a 2 generation.updated',
    ]);
    const cursors = first.map((e) => Number(e.cursor));
    expect(cursors).toEqual([...cursors].sort((x, y) => x - y));
    await touch(b, 4); // seen before the restart
    const seen = [...first, ...(await take(sse, 1))];

    // Shutdown ends the stream; events committed while no API runs are read after the restart.
    await api.close();
    expect(await sse.next()).toBeNull();
    await touch(a, 4);
    await touch(before, 3);
    api = await startTestApi(db.url, env);
    origin = await listen(api);
    const resumed = await stream({ 'last-event-id': seen.at(-1)!.cursor });
    await touch(b, 5);
    const after = await take(resumed, 3);
    expect(after.map((e) => [e.generation, e.seq])).toEqual([
      [a, 3],
      [before, 2],
      [b, 4],
    ]);
    const all = [...seen, ...after].map((e) => Number(e.cursor));
    expect(new Set(all).size).toBe(all.length);
    resumed.close();
  });

  it('JSON: the newest events, a page after a cursor, next_cursor and has_more; `after` in a stream', async () => {
    const owner = await createPaidAccount(db.pool);
    const get = async (query: string) => {
      const response = await fetch(`${origin}/v1/events${query}`, { headers: bearer(owner.key) });
      expect(response.status).toBe(200);
      return accountEventListSchema.parse(await response.json());
    };
    expect(await get('')).toEqual({ data: [], next_cursor: '0', has_more: false });
    const id = await newGeneration(owner);
    for (let credits = 3; credits < 7; credits += 1) await touch(id, credits);
    const newest = await get('?limit=2');
    expect(newest.data.map((e) => e.event.id)).toEqual([4, 5]);
    expect(newest.data[1]!.event.data).toMatchObject({ id, credits: 6 });
    const first = await get('?after=0&limit=2');
    expect(first.data.map((e) => e.event.id)).toEqual([1, 2]);
    expect(first).toMatchObject({ next_cursor: first.data[1]!.cursor, has_more: true });
    const last = await get(`?after=${first.next_cursor}`);
    expect(last.data.map((e) => e.event.id)).toEqual([3, 4, 5]);
    expect(last.has_more).toBe(false);
    expect(await get(`?after=${last.next_cursor}`)).toEqual({
      data: [],
      next_cursor: last.next_cursor,
      has_more: false,
    });
    // A stream starts with its reconnection delay; from `after`, the log after it comes first.
    const raw = await fetch(`${origin}/v1/events`, {
      headers: { ...bearer(owner.key), accept: 'text/event-stream' },
    });
    const reader = raw.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/^retry: 1000\n\n/);
    await reader.cancel();
    const sse = await openSse(`${origin}/v1/events?after=${first.next_cursor}`, bearer(owner.key));
    expect((await take(sse, 3)).map((e) => e.seq)).toEqual([3, 4, 5]);
    sse.close();
  });

  it('a bad Last-Event-ID, or a cursor the log has not reached, is 400 naming it', async () => {
    for (const [headers, query, field] of [
      [{ 'last-event-id': 'x' }, '', 'Last-Event-ID'],
      [{ 'last-event-id': '99999999' }, '', 'Last-Event-ID'],
      [{}, '?after=99999999', 'after'],
      [{}, '?after=-1', 'after'],
    ] as const) {
      for (const accept of ['text/event-stream', 'application/json']) {
        const response = await fetch(`${origin}/v1/events${query}`, {
          headers: { ...bearer(account.key), ...headers, accept },
        });
        expect(response.status).toBe(400);
        expect(await response.json()).toMatchObject({
          error: { code: 'invalid_request' },
          issues: [{ field }],
        });
      }
    }
  });
});
