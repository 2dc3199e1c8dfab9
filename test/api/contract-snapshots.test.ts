import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';

/**
 * What a library upgrade must not change, byte for byte: the OpenAPI document, the catalog with its
 * JSON Schemas, and the full 400 answer (codes, messages, fields) to a corpus of invalid requests
 * that reaches every zod schema the API validates with. A change to any of these is a change of
 * contract and is made deliberately, by updating the snapshot file in its own commit.
 */

/** 1×1 PNG and the first bytes of a JPEG, as data URIs. */
const png =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const pngClaimingHugeSize =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAQAAAAEAACAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

interface Case {
  name: string;
  method?: 'GET' | 'POST';
  url?: string;
  /** A JSON body (serialized here) or raw text. */
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
}

const lite = (fields: Record<string, unknown>) => ({ model: 'lumen-lite', prompt: 'a cat', ...fields });
const pro = (fields: Record<string, unknown>) => ({ model: 'lumen-pro', prompt: 'a cat', ...fields });
const motion = (fields: Record<string, unknown>) => ({ model: 'motion-1', prompt: 'a cat', ...fields });

const corpus: Case[] = [
  // ── the body as a whole ──
  { name: 'body: an array', body: [1, 2] },
  { name: 'body: a string', body: 'hello' },
  { name: 'body: null', raw: 'null' },
  { name: 'body: not JSON', raw: '{"model": ' },
  { name: 'body: empty', raw: '' },
  { name: 'body: an empty object', body: {} },
  // ── model ──
  { name: 'model: missing', body: { prompt: 'a cat' } },
  { name: 'model: a number', body: { model: 7, prompt: 'a cat' } },
  { name: 'model: unknown', body: { model: 'no-such-model', prompt: 'a cat' } },
  { name: 'model: null', body: { model: null, prompt: 'a cat' } },
  // ── prompt ──
  { name: 'prompt: missing (lite)', body: { model: 'lumen-lite' } },
  { name: 'prompt: missing (pro)', body: { model: 'lumen-pro' } },
  { name: 'prompt: a number', body: lite({ prompt: 42 }) },
  { name: 'prompt: null', body: pro({ prompt: null }) },
  { name: 'prompt: an array', body: pro({ prompt: ['a'] }) },
  { name: 'prompt: empty (lite)', body: lite({ prompt: '' }) },
  { name: 'prompt: empty (pro)', body: pro({ prompt: '' }) },
  { name: 'prompt: too long (lite)', body: lite({ prompt: 'x'.repeat(3001) }) },
  { name: 'prompt: too long (pro)', body: pro({ prompt: 'x'.repeat(5001) }) },
  { name: 'prompt: too long in code points', body: lite({ prompt: '😀'.repeat(3001) }) },
  { name: 'prompt: NUL', body: pro({ prompt: 'a\u0000b' }) },
  { name: 'prompt: unpaired surrogate', body: pro({ prompt: 'a\ud800b' }) },
  // ── enums ──
  { name: 'aspect_ratio: not allowed (lite)', body: lite({ aspect_ratio: '7:5' }) },
  { name: 'aspect_ratio: a number', body: pro({ aspect_ratio: 1 }) },
  { name: 'aspect_ratio: null', body: pro({ aspect_ratio: null }) },
  { name: 'quality: not allowed', body: lite({ quality: 'max' }) },
  { name: 'output_format: not allowed', body: lite({ output_format: 'gif' }) },
  { name: 'resolution: not allowed (pro)', body: pro({ resolution: '8K' }) },
  { name: 'resolution: not allowed (prism-2)', body: { model: 'prism-2', prompt: 'x', resolution: '4K' } },
  { name: 'resolution: wrong case', body: { model: 'nova-image', prompt: 'x', resolution: '1k' } },
  // ── integers and booleans (the video model) ──
  { name: 'duration: not allowed', body: motion({ duration: 5 }) },
  { name: 'duration: a string', body: motion({ duration: '4' }) },
  { name: 'duration: a fraction', body: motion({ duration: 4.5 }) },
  { name: 'generate_audio: a string', body: motion({ generate_audio: 'yes' }) },
  { name: 'video resolution: not allowed', body: motion({ resolution: '4K' }) },
  // ── unknown fields ──
  { name: 'unknown field (lite rejects)', body: lite({ seed: 1, negative_prompt: 'x' }) },
  {
    name: 'unknown field (pro ignores it, not the bad resolution)',
    body: pro({ seed: 1, quality: 'x', resolution: '3K' }),
  },
  { name: 'unknown field with NUL in its key', body: pro({ 'se\u0000ed': 1 }) },
  { name: 'unknown field with NUL in its value', body: pro({ extra: { deep: ['ok', 'a\u0000'] } }) },
  {
    name: 'unknown field nested too deep',
    body: pro({ extra: JSON.parse('['.repeat(40) + ']'.repeat(40)) }),
  },
  // ── images ──
  { name: 'images: a string', body: lite({ images: 'https://example.com/a.png' }) },
  { name: 'images: too many (lite)', body: lite({ images: Array(5).fill('https://example.com/a.png') }) },
  { name: 'images: too many (prism-2)', body: { model: 'prism-2', prompt: 'x', images: Array(3).fill(png) } },
  { name: 'images: a number item', body: lite({ images: ['https://example.com/a.png', 3] }) },
  { name: 'images: http URL', body: lite({ images: ['http://example.com/a.png'] }) },
  { name: 'images: not a URL', body: pro({ images: ['cat.png'] }) },
  { name: 'images: credentials', body: lite({ images: ['https://u:p@example.com/a.png'] }) },
  { name: 'images: a space', body: lite({ images: ['https://example.com/a b.png'] }) },
  { name: 'images: too long URL', body: lite({ images: [`https://example.com/${'a'.repeat(2100)}`] }) },
  { name: 'images: data URI where not accepted', body: lite({ images: [png] }) },
  { name: 'images: data URI not base64', body: pro({ images: ['data:image/png;base64,@@@@'] }) },
  { name: 'images: data URI bad header', body: pro({ images: ['data:text/plain;base64,aGVsbG8='] }) },
  { name: 'images: data URI unsupported type', body: pro({ images: ['data:image/bmp;base64,Qk0='] }) },
  {
    name: 'images: data URI wrong bytes',
    body: pro({ images: ['data:image/jpeg;base64,' + png.split(',')[1]] }),
  },
  { name: 'images: data URI too many pixels', body: pro({ images: [pngClaimingHugeSize] }) },
  { name: 'images: empty list is fine, bad prompt is not', body: pro({ images: [], prompt: '' }) },
  {
    name: 'images: ignored by a model without images, not the bad duration',
    body: motion({ images: ['https://example.com/a.png'], duration: 5 }),
  },
  // ── image options (the video model) ──
  { name: 'last_frame_image without first', body: motion({ last_frame_image: 'https://example.com/a.png' }) },
  { name: 'first_frame_image: a number', body: motion({ first_frame_image: 5 }) },
  { name: 'first_frame_image: http', body: motion({ first_frame_image: 'http://example.com/a.png' }) },
  // ── several at once ──
  {
    name: 'several fields wrong at once (lite)',
    body: {
      model: 'lumen-lite',
      prompt: '',
      quality: 'max',
      images: ['x', 'https://example.com/a.png'],
      seed: 1,
    },
  },
  // ── Idempotency-Key ──
  { name: 'Idempotency-Key: empty', body: lite({}), headers: { 'idempotency-key': '' } },
  { name: 'Idempotency-Key: a space', body: lite({}), headers: { 'idempotency-key': 'a b' } },
  { name: 'Idempotency-Key: too long', body: lite({}), headers: { 'idempotency-key': 'k'.repeat(129) } },
  { name: 'Idempotency-Key: non-ASCII', body: lite({}), headers: { 'idempotency-key': 'clé' } },
  // ── Cancel-After ──
  { name: 'Cancel-After: not a duration', body: lite({}), headers: { 'cancel-after': 'soon' } },
  { name: 'Cancel-After: over 24 h', body: lite({}), headers: { 'cancel-after': '25h' } },
  // ── the list query ──
  { name: 'list: limit 0', method: 'GET', url: '/v1/generations?limit=0' },
  { name: 'list: limit 101', method: 'GET', url: '/v1/generations?limit=101' },
  { name: 'list: limit not a number', method: 'GET', url: '/v1/generations?limit=ten' },
  { name: 'list: limit a fraction', method: 'GET', url: '/v1/generations?limit=2.5' },
  { name: 'list: limit negative', method: 'GET', url: '/v1/generations?limit=-1' },
  { name: 'list: limit empty', method: 'GET', url: '/v1/generations?limit=' },
  { name: 'list: limit repeated', method: 'GET', url: '/v1/generations?limit=1&limit=2' },
  { name: 'list: cursor garbage', method: 'GET', url: '/v1/generations?cursor=abc' },
  { name: 'list: cursor with bad characters', method: 'GET', url: '/v1/generations?cursor=a%2Bb' },
  {
    name: 'list: cursor JSON of the wrong shape',
    method: 'GET',
    url: `/v1/generations?cursor=${Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000Z'])).toString('base64url')}`,
  },
  {
    name: 'list: cursor with a bad id',
    method: 'GET',
    url: `/v1/generations?cursor=${Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000Z', 'x'])).toString('base64url')}`,
  },
  { name: 'list: status unknown', method: 'GET', url: '/v1/generations?status=done' },
  { name: 'list: status empty item', method: 'GET', url: '/v1/generations?status=queued,,failed' },
  { name: 'list: model empty', method: 'GET', url: '/v1/generations?model=' },
  { name: 'list: model with NUL', method: 'GET', url: '/v1/generations?model=a%00b' },
  {
    name: 'list: everything wrong at once',
    method: 'GET',
    url: '/v1/generations?limit=0&cursor=%3F&status=nope&model=',
  },
  // ── the path ──
  { name: 'get: bad percent-encoding', method: 'GET', url: '/v1/generations/%E0%A4%A' },
  { name: 'get: not an id (404, not 400)', method: 'GET', url: '/v1/generations/nope' },
];

/**
 * The body, pretty-printed for a readable diff. The API sends compact JSON, so the body is exactly
 * the compact form of what is snapshotted: equal pretty text means byte-identical bodies.
 */
function readable(body: string): string {
  const parsed: unknown = JSON.parse(body);
  expect(JSON.stringify(parsed)).toBe(body);
  return `${JSON.stringify(parsed, null, 2)}\n`;
}

describe('contract snapshots: what library upgrades must leave byte-identical', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url);
    account = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('GET /v1/openapi.json', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(response.statusCode).toBe(200);
    await expect(readable(response.body)).toMatchFileSnapshot('__snapshots__/contract/openapi.json');
  });

  it('GET /v1/models (the catalog and each model’s request JSON Schema)', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(account.key) });
    expect(response.statusCode).toBe(200);
    await expect(readable(response.body)).toMatchFileSnapshot('__snapshots__/contract/models.json');
  });

  it('the answer to each invalid request: status, error and issues', async () => {
    const answers: Array<{ name: string; status: number; body: unknown }> = [];
    for (const c of corpus) {
      const method = c.method ?? 'POST';
      const headers: Record<string, string> = { ...bearer(account.key), ...c.headers };
      let payload: string | undefined;
      if (method === 'POST') {
        headers['content-type'] = 'application/json';
        payload = c.raw ?? JSON.stringify(c.body);
      }
      const response = await api.app.inject({ method, url: c.url ?? '/v1/generations', headers, payload });
      // Anything accepted would have started a generation: the corpus is invalid requests only.
      expect(response.statusCode, c.name).toBeGreaterThanOrEqual(400);
      answers.push({ name: c.name, status: response.statusCode, body: JSON.parse(readable(response.body)) });
    }
    await expect(`${JSON.stringify(answers, null, 2)}\n`).toMatchFileSnapshot(
      '__snapshots__/contract/invalid-requests.json',
    );
  });
});
