import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { generationListSchema } from '../../src/api/schemas.js';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

describe('GET /v1/generations?idempotency_key=K: a lost 202 found by its key', () => {
  const stack = useGenerationStack({ account: { oneTime: 10 } });
  const lookUp = async (key: string, idempotencyKey: string, extra = '') => {
    const response = await stack.api.app.inject({
      method: 'GET',
      url: `/v1/generations?idempotency_key=${encodeURIComponent(idempotencyKey)}${extra}`,
      headers: bearer(key),
    });
    return { status: response.statusCode, body: response.json() };
  };
  const ids = async (key: string, idempotencyKey: string) => {
    const { status, body } = await lookUp(key, idempotencyKey);
    expect(status).toBe(200);
    return generationListSchema.parse(body).data.map((g) => g.id);
  };

  it('returns the generation that holds the key, in the key namespace of the calling API key only', async () => {
    const created = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'kept' },
      'order-17',
    );
    expect(created.statusCode).toBe(202);
    const id = String(created.headers['x-request-id']);
    expect(await ids(stack.account.key, 'order-17')).toEqual([id]);
    // The other filters still apply on top.
    expect((await lookUp(stack.account.key, 'order-17', '&model=prism-2')).body.data).toEqual([]);
    expect(await ids(stack.account.key, 'order-18')).toEqual([]);

    const sameAccountOtherKey = await createApiKey(stack.db.pool, { accountId: stack.account.accountId });
    expect(await ids(sameAccountOtherKey.key, 'order-17')).toEqual([]);
    const stranger = await createPaidAccount(stack.db.pool);
    expect(await ids(stranger.key, 'order-17')).toEqual([]);
  });

  it('a refusal that claimed the key is found (402); a validation failure claimed nothing', async () => {
    const poor = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-pro', prompt: 'too dear', resolution: '4K' },
      'dear-1',
    );
    expect(poor.statusCode).toBe(402);
    expect(await ids(stack.account.key, 'dear-1')).toEqual([String(poor.headers['x-request-id'])]);

    const invalid = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: '' },
      'bad-1',
    );
    expect(invalid.statusCode).toBe(400);
    expect(await ids(stack.account.key, 'bad-1')).toEqual([]);
  });

  it('past the key horizon the key is free again, and the lookup finds nothing', async () => {
    const created = await createGeneration(
      stack.api,
      stack.account.key,
      { model: 'lumen-lite', prompt: 'old' },
      'old-1',
    );
    const id = String(created.headers['x-request-id']);
    expect(await ids(stack.account.key, 'old-1')).toEqual([id]);
    // As if the horizon had passed (IDEMPOTENCY_RETENTION_MS later).
    await stack.db.pool.query(
      sql.unsafe`UPDATE idempotency_keys SET held_until = now() - interval '1 second' WHERE generation_id = ${id}`,
    );
    expect(await ids(stack.account.key, 'old-1')).toEqual([]);
  });

  it('a value that cannot be an Idempotency-Key is a 400 naming the parameter', async () => {
    for (const value of ['has space', '', 'x'.repeat(129)]) {
      const { status, body } = await lookUp(stack.account.key, value);
      expect(status, value).toBe(400);
      expect(body.issues.map((i: { field: string }) => i.field)).toEqual(['idempotency_key']);
    }
  });
});
