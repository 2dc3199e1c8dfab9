import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generationEventListSchema, generationEventSchema } from '../../src/api/schemas.js';
import { bearer, createPaidAccount, type TestAccount } from '../support/api.js';
import { startApiProcess, type ApiProcess } from '../support/api-process.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { openSse, type SseMessage } from '../support/sse.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

/**
 * GET /v1/generations/{id}/events through the real API process (as `npm run api` runs it) and a
 * real worker with the simulated provider: what a client sees on the wire.
 */
describe('GET /v1/generations/{id}/events', () => {
  let db: TestDatabase;
  let worker: TestWorker;
  let api: ApiProcess;
  let env: Record<string, string>;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    worker = await startTestWorker(db.pool, { concurrencyLimit: 20 });
    env = {
      ...worker.apiEnv,
      DATABASE_URL: db.url,
      RATE_LIMIT_PER_MINUTE: '100000',
      EVENT_STREAMS_PER_KEY: '3',
      EVENT_STREAM_KEEPALIVE_MS: '300',
    };
    api = await startApiProcess(env);
    account = await createPaidAccount(db.pool, { oneTime: 1000 });
  });
  afterAll(async () => {
    await api?.stop();
    await worker?.close();
    await db?.drop();
  });

  const create = async (prompt: string, owner = account) => {
    const response = await fetch(`${api.origin}/v1/generations`, {
      method: 'POST',
      headers: { ...bearer(owner.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'lumen-lite', prompt }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };
  const eventsUrl = (id: string) => `${api.origin}/v1/generations/${id}/events`;
  const stream = (id: string, headers: Record<string, string> = {}) =>
    openSse(eventsUrl(id), { ...bearer(account.key), ...headers });
  const parsed = (messages: SseMessage[]) =>
    messages.map((m) => {
      const event = generationEventSchema.parse(JSON.parse(m.data));
      // The SSE id and event name are the event's own.
      expect(m.id).toBe(String(event.id));
      expect(m.event).toBe(event.type);
      return event;
    });

  it('past events first, then live ones as they are committed; closed by the server after the terminal one', async () => {
    const id = await create('slow lighthouse [sim:slow=2]');
    const sse = await stream(id);
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(sse.headers.get('x-request-id')).toBe(id);
    const first = parsed([(await sse.next())!]);
    expect(first[0]).toMatchObject({ id: 1, type: 'generation.created', data: { id, status: 'queued' } });
    const rest = parsed(await sse.rest()); // returns only when the server ends the stream
    expect([...first, ...rest].map((e) => `${e.id} ${e.type}`)).toEqual([
      '1 generation.created',
      '2 generation.processing',
      '3 generation.succeeded',
    ]);
    const now = await (
      await fetch(`${api.origin}/v1/generations/${id}`, { headers: bearer(account.key) })
    ).json();
    expect(rest.at(-1)!.data).toEqual(now);
  });

  it('a finished generation: its log, then the end; Last-Event-ID resumes after it; 204 once all is seen', async () => {
    const id = await create('quick');
    const whole = parsed(await (await stream(id)).rest());
    expect(whole.map((e) => e.type)).toEqual([
      'generation.created',
      'generation.processing',
      'generation.succeeded',
    ]);
    expect(parsed(await (await stream(id, { 'last-event-id': '1' })).rest()).map((e) => e.id)).toEqual([
      2, 3,
    ]);
    const done = await stream(id, { 'last-event-id': '3' });
    expect(done.status).toBe(204);
  });

  it('without Accept: text/event-stream, the log as JSON; a bad Last-Event-ID is 400, a foreign id 404', async () => {
    const id = await create('quick');
    await (await stream(id)).rest();
    const list = await fetch(eventsUrl(id), { headers: bearer(account.key) });
    expect(list.status).toBe(200);
    const body = generationEventListSchema.parse(await list.json());
    expect(body.data.map((e) => e.id)).toEqual([1, 2, 3]);
    const after = await fetch(eventsUrl(id), { headers: { ...bearer(account.key), 'last-event-id': '2' } });
    expect(generationEventListSchema.parse(await after.json()).data.map((e) => e.id)).toEqual([3]);
    // Empty, as a client sends it before it has seen an event: read as absent, from the first event.
    const empty = await fetch(eventsUrl(id), { headers: { ...bearer(account.key), 'last-event-id': '' } });
    expect(generationEventListSchema.parse(await empty.json()).data.map((e) => e.id)).toEqual([1, 2, 3]);
    const bad = await fetch(eventsUrl(id), { headers: { ...bearer(account.key), 'last-event-id': 'x' } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      error: { code: 'invalid_request' },
      issues: [{ field: 'Last-Event-ID' }],
    });
    const stranger = await createPaidAccount(db.pool);
    const foreign = await openSse(eventsUrl(id), bearer(stranger.key));
    expect(foreign.status).toBe(404);
  });

  it('a batch’s events route answers as this one (one listOrStreamEvents): the same 400, a 404 in its own words', async () => {
    const answer = async (url: string, headers: Record<string, string>) => {
      const response = await fetch(url, { headers: { ...bearer(account.key), ...headers } });
      const body = (await response.json()) as { error: Record<string, unknown> };
      return { status: response.status, requestId: response.headers.get('x-request-id'), body };
    };
    const id = await create('quick');
    const accepts: Array<Record<string, string>> = [{}, { accept: 'text/event-stream' }];
    for (const accept of accepts) {
      const generation = await answer(eventsUrl(id), { ...accept, 'last-event-id': 'x' });
      const batch = await answer(`${api.origin}/v1/batches/batch_nope/events`, {
        ...accept,
        'last-event-id': 'x',
      });
      expect(generation.status).toBe(400);
      expect({ ...batch.body, error: { ...batch.body.error, request_id: null } }).toEqual({
        ...generation.body,
        error: { ...generation.body.error, request_id: null },
      });
      const missing = await answer(`${api.origin}/v1/batches/batch_nope/events`, accept);
      expect(missing.status).toBe(404);
      expect(missing.body.error).toMatchObject({
        code: 'not_found',
        message: 'No batch with this id in this account.',
      });
    }
  });

  it('an idle stream gets keep-alive comments, and counts once against the rate limit', async () => {
    const id = await create('very slow [sim:slow=30]');
    const sse = await stream(id);
    expect(sse.status).toBe(200);
    // Everything that arrives is read (events and comments) while the generation stays queued.
    sse.rest().catch(() => undefined); // ends in an AbortError when the test closes it
    await new Promise((r) => setTimeout(r, 1500));
    expect(sse.comments.filter((c) => c === ': keep-alive').length).toBeGreaterThanOrEqual(2);
    // The open stream counted once against the key's rate limit: the next request is the one after it.
    const before = Number(sse.headers.get('x-ratelimit-remaining'));
    const next = await fetch(`${api.origin}/v1/credits`, { headers: bearer(account.key) });
    expect(Number(next.headers.get('x-ratelimit-remaining'))).toBe(before - 1);
    sse.close();
  });

  it('streams per key are capped: past it, 429 stream_limit_exceeded; a closed stream frees its place', async () => {
    const id = await create('very slow [sim:slow=30]');
    const open = [await stream(id), await stream(id), await stream(id)];
    for (const s of open) expect(s.status).toBe(200);
    const refused = await fetch(eventsUrl(id), {
      headers: { ...bearer(account.key), accept: 'text/event-stream' },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ error: { code: 'stream_limit_exceeded' } });
    const other = await createPaidAccount(db.pool);
    const otherId = await create('very slow [sim:slow=30]', other);
    expect((await openSse(eventsUrl(otherId), bearer(other.key))).status).toBe(200);
    open[0]!.close();
    await new Promise((r) => setTimeout(r, 200));
    const again = await stream(id);
    expect(again.status).toBe(200);
    for (const s of [...open, again]) s.close();
  });

  it('shutdown ends the streams; a new API process resumes with Last-Event-ID without loss or repeat', async () => {
    const id = await create('slow [sim:slow=4]');
    const sse = await stream(id);
    const seen = parsed([(await sse.next())!]);
    const stoppedAt = Date.now();
    const stopping = api.stop();
    // The server ends the stream (rest() returns) at once, instead of holding its shutdown until the
    // process is killed (api.stop() sends SIGKILL after 5 s): a stream must not delay a deploy.
    seen.push(...parsed(await sse.rest()));
    expect(Date.now() - stoppedAt).toBeLessThan(2000);
    await stopping;
    api = await startApiProcess(env);
    const resumed = await stream(id, { 'last-event-id': String(seen.at(-1)!.id) });
    seen.push(...parsed(await resumed.rest()));
    expect(seen.map((e) => `${e.id} ${e.type}`)).toEqual([
      '1 generation.created',
      '2 generation.processing',
      '3 generation.succeeded',
    ]);
  });
});
