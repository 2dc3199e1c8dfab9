import pg from 'pg';
import { sql } from 'slonik';
import { beforeAll, describe, expect, it } from 'vitest';
import { generationListSchema } from '../../src/api/schemas.js';
import { useGenerationStack } from '../support/stack.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { recordRejectedRequest } from '../../src/db/rejected-requests.js';
import { newId } from '../../src/vocabulary/ids.js';

describe('reads: GET /v1/generations/{id} and the list', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 20 }, account: { oneTime: 200 } });
  const created: string[] = [];
  const list = async (key: string, query = '') => {
    const response = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations${query}`,
      headers: bearer(key),
    });
    return { status: response.statusCode, body: response.json() };
  };

  beforeAll(async () => {
    const bodies = [
      { model: 'lumen-lite', prompt: 'one' },
      { model: 'lumen-pro', prompt: 'two' },
      { model: 'lumen-lite', prompt: 'three [sim:fail]' },
      { model: 'lumen-lite', prompt: '' }, // rejected by validation
      { model: 'prism-2', prompt: 'five' },
    ];
    for (const body of bodies) {
      const response = await createGeneration(stack.api, stack.account.key, body);
      created.push(String(response.headers['x-request-id']));
    }
    for (const id of created)
      await pollGeneration(stack.api, stack.account.key, id, (g) => g.status !== 'queued');
  });

  it('an unknown id and another account’s id are the same 404 not_found', async () => {
    const stranger = await createPaidAccount(stack.db.pool);
    for (const [key, id] of [
      [stranger.key, created[0]!],
      [stack.account.key, 'gen_doesNotExist000000000'],
      [stack.account.key, 'not-an-id'],
    ] as const) {
      const response = await stack.api.app.inject({
        method: 'GET',
        url: `/v1/generations/${id}`,
        headers: bearer(key),
      });
      expect(response.statusCode).toBe(404);
      expect(response.json()).toEqual({
        error: { code: 'not_found', message: 'No generation with this id in this account.' },
      });
    }
    const own = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations/${created[0]}`,
      headers: bearer(stack.account.key),
    });
    expect(own.headers['x-request-id']).toBe(created[0]);
  });

  it('lists newest first, rejected included, each with its actual debit', async () => {
    const { body } = await list(stack.account.key);
    const page = generationListSchema.parse(body);
    expect(page.data.map((g) => g.id)).toEqual([...created].reverse());
    expect(page.next_cursor).toBeNull();
    expect(page.data.map((g) => [g.status, g.credits, g.credits_refunded])).toEqual([
      ['succeeded', 2, false],
      ['rejected', 0, false],
      ['failed', 2, true],
      ['succeeded', 4, false],
      ['succeeded', 2, false],
    ]);
  });

  it('pages with an opaque cursor until next_cursor is null', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const { body }: { body: { data: Array<{ id: string }>; next_cursor: string | null } } = await list(
        stack.account.key,
        `?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...body.data.map((g) => g.id));
      cursor = body.next_cursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...created].reverse());
  });

  it('filters by a comma-separated status subset and by model', async () => {
    const failedOrRejected = (await list(stack.account.key, '?status=failed,rejected')).body.data.map(
      (g: { id: string }) => g.id,
    );
    expect(failedOrRejected).toEqual([created[3], created[2]]);
    const lite = (await list(stack.account.key, '?model=lumen-lite&status=succeeded')).body.data.map(
      (g: { id: string }) => g.id,
    );
    expect(lite).toEqual([created[0]]);
  });

  it('answers bad parameters with 400 naming each', async () => {
    const { status, body } = await list(stack.account.key, '?limit=0&status=done&cursor=garbage');
    expect(status).toBe(400);
    expect(body.issues.map((i: { field: string }) => i.field)).toEqual(['limit', 'cursor', 'status']);
    expect((await list(stack.account.key, '?limit=101')).status).toBe(400);
    expect((await list(stack.account.key, '?limit=100')).status).toBe(200);
  });

  it('a repeated parameter is a 400 naming it, not a 500', async () => {
    for (const [query, field] of [
      ['?status=queued&status=failed', 'status'],
      ['?model=a&model=b', 'model'],
      ['?limit=1&limit=2', 'limit'],
      ['?cursor=a&cursor=b', 'cursor'],
    ] as const) {
      const { status, body } = await list(stack.account.key, query);
      expect(status, query).toBe(400);
      expect(body.error.code).toBe('invalid_request');
      expect(body.issues.map((i: { field: string }) => i.field)).toEqual([field]);
    }
  });

  it('parses each parameter exactly as the OpenAPI description states it', async () => {
    for (const [query, expected] of [
      ['?limit=', 400],
      ['?limit=0x10', 400],
      ['?limit=1e1', 400],
      ['?limit=%2010', 400],
      ['?limit=2.0', 400],
      ['?limit=007', 200],
      ['?status=', 400],
      ['?status=queued,', 400],
      ['?status=queued,%20failed%20', 200],
      ['?status=queued,queued', 200],
      ['?cursor=', 400],
      ['?model=', 400],
      ['?model=no-such-model', 200],
      ['?unknown=ignored', 200],
    ] as const) {
      expect((await list(stack.account.key, query)).status, query).toBe(expected);
    }
  });

  it('a cached record is dropped when what it shows changes, and not for bookkeeping', async () => {
    const owner = await createPaidAccount(stack.db.pool);
    const record = async () => {
      const id = newId('gen');
      await recordRejectedRequest(stack.db.pool, {
        id,
        accountId: owner.accountId,
        apiKeyId: owner.keyId,
        model: 'lumen-lite',
        mediaType: 'image',
        input: null,
        error: { code: 'invalid_request', message: 'before' },
      });
      return id;
    };
    const [quiet, visible] = [await record(), await record()];
    const listener = new pg.Client({ connectionString: stack.db.url });
    await listener.connect();
    const announced: string[] = [];
    listener.on('notification', (n) => announced.push(String(n.payload)));
    await listener.query('LISTEN generation_changed');
    try {
      const read = async (id: string) => {
        const response = await stack.api.app.inject({
          method: 'GET',
          url: `/v1/generations/${id}`,
          headers: bearer(owner.key),
        });
        return response.json<{ error: { message: string } }>();
      };
      expect((await read(visible)).error.message).toBe('before'); // cached from here on

      await stack.db.pool.query(sql.unsafe`
        UPDATE generations SET provider_job_id = 'job_1', output_prefix = 'r1', submit_attempted_at = now(),
          status = status, updated_at = now() WHERE id = ${quiet}`);
      await stack.db.pool.query(sql.unsafe`
        UPDATE generations SET error = '{"code": "invalid_request", "message": "after"}' WHERE id = ${visible}`);
      await expect.poll(() => announced, { timeout: 5_000 }).toContain(visible);
      // Notifications arrive in commit order: the bookkeeping update, committed first, announced nothing.
      expect(announced).not.toContain(quiet);
      await expect.poll(async () => (await read(visible)).error.message, { timeout: 5_000 }).toBe('after');
    } finally {
      await listener.end();
    }
  });
});
