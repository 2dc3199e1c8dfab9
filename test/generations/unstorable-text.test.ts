import { WorkflowNotFoundError } from '@temporalio/client';
import { createHash } from 'node:crypto';
import { sql } from 'slonik';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { generationSchema, validationErrorBodySchema } from '../../src/api/schemas.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer } from '../support/api.js';
import { createGeneration, getGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * PostgreSQL cannot store NUL, nor (in jsonb) an unpaired surrogate: such text is refused at
 * validation wherever it comes in. Any other text is accepted and works end to end.
 */
describe('text the service cannot store, and text it can', () => {
  const stack = useGenerationStack({ account: { oneTime: 100 } });

  const balance = async () =>
    (
      await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(stack.account.key) })
    ).json().credits as number;
  /** The workflow a keyed POST would start (the API derives its id from the API key's id and the key). */
  const workflowIdFor = (idempotencyKey: string) =>
    `generation-${createHash('sha256').update(`${stack.account.keyId}\u0000${idempotencyKey}`).digest('hex').slice(0, 40)}`;
  const storedError = async (id: string) =>
    stack.db.pool.one(
      sql.type(z.object({ model: z.string(), error: z.object({ code: z.string(), message: z.string() }) }))`
        SELECT model, error FROM generations WHERE id = ${id}`,
    );
  const invalid = (body: string) => validationErrorBodySchema.strict().parse(JSON.parse(body));

  it('a prompt with NUL or an unpaired surrogate is a quick 400 naming prompt: nothing debited, no workflow', async () => {
    const before = await balance();
    for (const prompt of ['before\u0000after', 'half a pair \ud869 here', 'low \udc00 first']) {
      const key = `k-${randomBase62(16)}`;
      const started = Date.now();
      const response = await createGeneration(
        stack.api,
        stack.account.key,
        { model: 'lumen-lite', prompt },
        key,
      );
      expect(Date.now() - started, JSON.stringify(prompt)).toBeLessThan(2000);
      expect(response.statusCode, JSON.stringify(prompt)).toBe(400);
      expect(invalid(response.body).issues).toEqual([
        { field: 'prompt', code: 'unstorable_text', message: expect.any(String) },
      ]);
      // Recorded as rejected (listed, named by x-request-id), without the text.
      const id = String(response.headers['x-request-id']);
      expect(await getGeneration(stack.api, stack.account.key, id)).toMatchObject({
        status: 'rejected',
        credits: 0,
        input: null,
        error: { code: 'invalid_request' },
      });
      expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 0, submissions: 0 });
      await expect(stack.client.workflow.getHandle(workflowIdFor(key)).describe()).rejects.toThrow(
        WorkflowNotFoundError,
      );
      // The key was not claimed: fixed, the same key starts the generation.
      const fixed = await createGeneration(
        stack.api,
        stack.account.key,
        { model: 'lumen-lite', prompt: 'fixed' },
        key,
      );
      expect(fixed.statusCode).toBe(202);
      await pollGeneration(stack.api, stack.account.key, fixed.json().id);
    }
    expect(await balance()).toBe(before - 3 * 2);
  });

  it('anywhere in the body: nested values, object keys, fields the model ignores, the model id', async () => {
    const cases: Array<[Record<string, unknown>, string[]]> = [
      [{ model: 'lumen-pro', prompt: 'ok', extra: { 'k\u0000ey': 1 } }, ['extra.k\ufffdey']],
      [{ model: 'lumen-pro', prompt: 'ok', 'ignored\ud800': 'x' }, ['ignored\ufffd']],
      [{ model: 'lumen-pro', prompt: 'ok', deep: [[{ x: 'a\u0000' }]] }, ['deep.0.0.x']],
      [{ model: 'lumen-lite', prompt: 'ok', 'unknown\u0000': true }, ['unknown\ufffd']],
      [{ model: 'lumen-pro', prompt: 'ok', images: ['https://example.com/\u0000.png'] }, ['images.0']],
      [{ model: 'lumen\u0000lite', prompt: 'x\u0000' }, ['model', 'prompt']],
    ];
    for (const [body, fields] of cases) {
      const response = await createGeneration(stack.api, stack.account.key, body);
      expect(response.statusCode, JSON.stringify(body)).toBe(400);
      expect(
        invalid(response.body).issues.map((i) => i.field),
        JSON.stringify(body),
      ).toEqual(fields);
      const row = await storedError(String(response.headers['x-request-id']));
      expect(row.error.code).toBe('invalid_request');
      expect(row.model).not.toContain('\u0000');
    }
    const unknownModel = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen\u0000lite',
      prompt: 'x',
    });
    expect((await storedError(String(unknownModel.headers['x-request-id']))).model).toBe('lumen\ufffdlite');
  });

  it('a body nested too deep is a 400, not a 500', async () => {
    const depth = 100_000;
    const response = await stack.api.app.inject({
      method: 'POST',
      url: '/v1/generations',
      headers: { ...bearer(stack.account.key), 'content-type': 'application/json' },
      payload: `{"model":"lumen-pro","prompt":"ok","deep":${'['.repeat(depth)}${']'.repeat(depth)}}`,
    });
    expect(response.statusCode).toBe(400);
    expect(invalid(response.body).issues).toEqual([
      expect.objectContaining({ field: expect.stringMatching(/^deep(\.0)+$/), code: 'too_deep' }),
    ]);
  });

  it('query and path parameters: 400 naming the parameter, not a 500 or a silent miss', async () => {
    const cursorWithNul = Buffer.from(JSON.stringify(['2026-01-01T00:00:00.000Z', 'gen_a\u0000'])).toString(
      'base64url',
    );
    for (const [url, field] of [
      ['/v1/generations?model=%00', 'model'],
      ['/v1/generations?model=lumen-lite%00', 'model'],
      ['/v1/generations?status=queued&limit=5&model=a%00b', 'model'],
      [`/v1/generations?cursor=${cursorWithNul}`, 'cursor'],
      ['/v1/generations/gen_abc%00', 'id'],
      ['/v1/credits?anything=%00', 'anything'],
    ] as const) {
      const response = await stack.api.app.inject({ method: 'GET', url, headers: bearer(stack.account.key) });
      expect(response.statusCode, url).toBe(400);
      expect(
        invalid(response.body).issues.map((i) => i.field),
        url,
      ).toEqual([field]);
    }
  });

  it('any other text is accepted and generated: controls, emoji, right-to-left', async () => {
    for (const prompt of ['tab\u0013stop \u0001\u001f\u007f', 'a 🏳️‍🌈 over שלום עולם and مرحبا \u202eevil']) {
      const response = await createGeneration(stack.api, stack.account.key, { model: 'lumen-lite', prompt });
      expect(response.statusCode, JSON.stringify(prompt)).toBe(202);
      const created = generationSchema.parse(response.json());
      expect(created.input).toEqual({ prompt });
      const done = generationSchema.parse(await pollGeneration(stack.api, stack.account.key, created.id));
      expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
      const image = done.output!.images![0]!;
      const download = await fetch(image.url);
      expect(download.status).toBe(200);
      expect(await sharp(Buffer.from(await download.arrayBuffer())).metadata()).toMatchObject({
        format: 'png',
        width: image.width,
        height: image.height,
      });
    }
  });
});
