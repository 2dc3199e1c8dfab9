import net from 'node:net';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { setApiAccess } from '../../src/db/accounts-repository.js';
import { revokeApiKey } from '../../src/db/api-keys-repository.js';
import { newId } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { openSse } from '../support/sse.js';

/**
 * No event stream holds a place longer than its connection or its key's right to read (issue 35
 * §2): a client that sends the request and closes at once leaves nothing counted; revoking a key,
 * or disabling its account's API access, ends its streams on every API process; an account's
 * streams are capped whatever keys it makes. Two API services on one database stand for two
 * processes (each its own listening connection). Generations are written with SQL and stay
 * queued: without a worker, their streams would stay open until the generation ends.
 */
describe('event stream places', () => {
  let db: TestDatabase;
  let apis: ApiService[];
  let origins: string[];

  beforeAll(async () => {
    db = await createTestDatabase();
    apis = await Promise.all([
      startTestApi(db.url, { EVENT_STREAMS_PER_ACCOUNT: '3' }),
      startTestApi(db.url, { EVENT_STREAMS_PER_ACCOUNT: '3' }),
    ]);
    origins = [];
    for (const api of apis) {
      await api.app.listen({ host: '127.0.0.1', port: 0 });
      const address = api.app.server.address();
      origins.push(`http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`);
    }
  });
  afterAll(async () => {
    for (const api of apis ?? []) await api.close();
    await db?.drop();
  });

  const newGeneration = async (owner: TestAccount) => {
    const id = newId('gen');
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, credits, input)
      VALUES (${id}, ${owner.accountId}, ${owner.keyId}, 'queued', 'lumen-lite', 'image', 2, '{"prompt":"x"}')`);
    return id;
  };
  /** Sends a stream request on a fresh connection and closes it at once, without reading a byte. */
  const openAndClose = (origin: string, path: string, key: string) =>
    new Promise<void>((resolve, reject) => {
      const { hostname, port } = new URL(origin);
      const socket = net.connect({ host: hostname, port: Number(port) }, () => {
        socket.write(
          `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n` +
            'Accept: text/event-stream\r\n\r\n',
          () => {
            socket.destroy();
            resolve();
          },
        );
      });
      socket.on('error', reject);
    });

  it('500 requests that open a stream and close at once leave no place counted', async () => {
    const owner = await createPaidAccount(db.pool);
    const id = await newGeneration(owner);
    const [api, origin] = [apis[0]!, origins[0]!];
    const paths = Array.from({ length: 500 }, (_, i) =>
      i % 5 === 4 ? '/v1/events' : `/v1/generations/${id}/events`,
    );
    for (let i = 0; i < paths.length; i += 25)
      await Promise.all(paths.slice(i, i + 25).map((path) => openAndClose(origin, path, owner.key)));
    // Every request has been answered or dropped by the server once one made after them is answered.
    expect((await fetch(`${origin}/v1/credits`, { headers: bearer(owner.key) })).status).toBe(200);
    await expect.poll(() => api.streaming(), { timeout: 3000 }).toBe(0);
    // The places are free: the key still opens streams.
    const sse = await openSse(`${origin}/v1/generations/${id}/events`, bearer(owner.key));
    expect(sse.status).toBe(200);
    sse.close();
    await expect.poll(() => api.streaming(), { timeout: 3000 }).toBe(0);
  });

  it("a revoked key's streams end on every API process, the account's other key keeps its own", async () => {
    const owner = await createPaidAccount(db.pool);
    const other = await createApiKey(db.pool, { accountId: owner.accountId });
    const id = await newGeneration(owner);
    const open = (origin: string, path: string, key: string) => openSse(`${origin}${path}`, bearer(key));
    const revoked = [
      await open(origins[0]!, `/v1/generations/${id}/events`, owner.key),
      await open(origins[1]!, '/v1/events', owner.key),
    ];
    const kept = await open(origins[1]!, '/v1/events', other.key);
    for (const s of [...revoked, kept]) expect(s.status).toBe(200);
    expect((await revoked[0]!.next())?.event).toBe('generation.created');
    const started = Date.now();
    await revokeApiKey(db.pool, owner.keyId);
    // Each ends (next() is null: the server closed it) with nothing more sent.
    expect(await Promise.all(revoked.map((s) => s.next()))).toEqual([null, null]);
    // A figure, not an assertion (the machine may be loaded): one notification and one query.
    console.info(`revoked key's streams ended after ${Date.now() - started} ms`);
    // The other key's stream is open: it gets the next event.
    await db.pool.query(sql.unsafe`UPDATE generations SET credits = 3 WHERE id = ${id}`);
    expect((await kept.next())?.event).toBe('generation.updated');
    kept.close();
    await expect.poll(() => apis.map((a) => a.streaming()), { timeout: 3000 }).toEqual([0, 0]);
  });

  it("disabling an account's API access ends its streams; its streams are capped per account whatever keys it uses", async () => {
    const owner = await createPaidAccount(db.pool);
    const second = await createApiKey(db.pool, { accountId: owner.accountId });
    const id = await newGeneration(owner);
    const [origin] = origins;
    const streams = [
      await openSse(`${origin}/v1/events`, bearer(owner.key)),
      await openSse(`${origin}/v1/generations/${id}/events`, bearer(owner.key)),
      await openSse(`${origin}/v1/events`, bearer(second.key)),
    ];
    for (const s of streams) expect(s.status).toBe(200);
    const refused = await fetch(`${origin}/v1/events`, {
      headers: { ...bearer(second.key), accept: 'text/event-stream' },
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: { code: 'stream_limit_exceeded' } });
    await streams[1]!.next(); // generation.created
    await setApiAccess(db.pool, owner.accountId, false);
    expect(await Promise.all(streams.map((s) => s.next()))).toEqual([null, null, null]);
    await expect.poll(() => apis[0]!.streaming(), { timeout: 3000 }).toBe(0);
  });
});
