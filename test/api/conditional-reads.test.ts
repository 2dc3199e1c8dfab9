import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { generationSchema } from '../../src/api/schemas.js';
import { bearer, startTestApi } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { useGenerationStack } from '../support/stack.js';

describe('conditional polls: ETag, If-None-Match and Retry-After', () => {
  const stack = useGenerationStack();
  const get = (id: string, headers: Record<string, string> = {}, api: ApiService = stack.api) =>
    api.app.inject({
      method: 'GET',
      url: `/v1/generations/${id}`,
      headers: { ...bearer(stack.account.key), ...headers },
    });

  it('a queued generation carries Retry-After: 2 and an ETag that If-None-Match turns into 304', async () => {
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a slow fox [sim:slow=3]',
    });
    expect(created.statusCode).toBe(202);
    expect(created.headers['retry-after']).toBe('2');
    const id = String(created.headers['x-request-id']);
    expect(created.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);

    const first = await get(id);
    expect(first.statusCode).toBe(200);
    expect(first.json().status).toBe('queued');
    expect(first.headers['retry-after']).toBe('2');
    const etag = String(first.headers.etag);
    // The 202 and the GET show the same body, so the same tag.
    expect(created.headers.etag).toBe(etag);
    expect(first.body).toBe(created.body);

    for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const again = await get(id, { 'if-none-match': ifNoneMatch });
      expect(again.statusCode, ifNoneMatch).toBe(304);
      expect(again.body).toBe('');
      expect(again.headers.etag).toBe(etag);
      expect(again.headers['x-request-id']).toBe(id);
      expect(again.headers['retry-after']).toBe('2');
    }
    expect((await get(id, { 'if-none-match': '"something else"' })).statusCode).toBe(200);

    // Once it is done the body changed, so the tag did: the old one gets the new body.
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    const done = await get(id, { 'if-none-match': etag });
    expect(done.statusCode).toBe(200);
    expect(generationSchema.parse(done.json()).status).toBe('succeeded');
    expect(done.headers.etag).not.toBe(etag);
    expect(done.headers['retry-after']).toBeUndefined();
    const unchanged = await get(id, { 'if-none-match': String(done.headers.etag) });
    expect(unchanged.statusCode).toBe(304);
    expect(unchanged.headers['retry-after']).toBeUndefined();
  });

  it('the tag is the same from any API process, and from a cold read', async () => {
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'x',
    });
    const id = String(created.headers['x-request-id']);
    await pollGeneration(stack.api, stack.account.key, id);
    const other = await startTestApi(stack.db.url, stack.worker.apiEnv);
    try {
      const here = await get(id);
      const there = await get(id, {}, other);
      expect(there.headers.etag).toBe(here.headers.etag);
      expect(there.body).toBe(here.body);
    } finally {
      await other.close();
    }
  });

  describe('a 304 counts against the rate limit', () => {
    let limited: ApiService;
    beforeAll(async () => {
      limited = await startTestApi(stack.db.url, { ...stack.worker.apiEnv, RATE_LIMIT_PER_MINUTE: '3' });
    });
    afterAll(() => limited?.close());

    it('three conditional polls use the budget; the fourth is 429', async () => {
      const created = await createGeneration(stack.api, stack.account.key, {
        model: 'lumen-lite',
        prompt: 'y',
      });
      const id = String(created.headers['x-request-id']);
      const etag = String(created.headers.etag);
      const statuses: number[] = [];
      const remaining: string[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await get(id, { 'if-none-match': etag }, limited);
        statuses.push(response.statusCode);
        remaining.push(String(response.headers['x-ratelimit-remaining']));
      }
      // The generation may finish in between (then a 200): either way each poll counted once.
      expect(statuses.slice(0, 3).every((s) => s === 304 || s === 200)).toBe(true);
      expect(statuses[3]).toBe(429);
      expect(remaining.slice(0, 3)).toEqual(['2', '1', '0']);
    });
  });
});
