import Ajv2019 from 'ajv/dist/2019.js';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { creditBalanceSchema, modelListSchema } from '../../src/api/schemas.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { runAdminCli } from '../support/admin.js';

describe('GET /v1/models, GET /v1/credits and GET /v1/openapi.json', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url);
    account = await createPaidAccount(db.pool, { subscription: 30, oneTime: 12 });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  const models = async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/models', headers: bearer(account.key) });
    expect(response.statusCode).toBe(200);
    return modelListSchema.parse(response.json()).data;
  };

  it('credits: the spec fields, subscription and one-time apart', async () => {
    const response = await api.app.inject({
      method: 'GET',
      url: '/v1/credits',
      headers: bearer(account.key),
    });
    expect(creditBalanceSchema.strict().parse(response.json())).toEqual({
      credits: 42,
      subscription_credits: 30,
      one_time_credits: 12,
    });
  });

  it('credits: a balance change made elsewhere shows on the next request, though balances are cached', async () => {
    const read = async () =>
      (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) })).json();
    expect((await read()).credits).toBe(42); // cached now
    await runAdminCli(
      ['grant-credits', '--account', account.accountId, '--pool', 'one_time', '--amount', '8'],
      db.url,
    );
    expect(await read()).toEqual({ credits: 50, subscription_credits: 30, one_time_credits: 20 });
    await runAdminCli(
      ['grant-credits', '--account', account.accountId, '--pool', 'subscription', '--amount', '1'],
      db.url,
    );
    expect((await read()).subscription_credits).toBe(31);
  });

  it('models: everything a client needs to build a request and know its price', async () => {
    const list = await models();
    expect(list.map((m) => m.id)).toEqual(['lumen-lite', 'lumen-pro', 'nova-image', 'prism-2', 'motion-1']);
    const lite = list[0]!;
    expect(lite).toMatchObject({
      media_type: 'image',
      max_images: 4,
      accepts_data_uris: false,
      unknown_fields: 'reject',
      prompt: { min_length: 1, max_length: 3000 },
      options: {
        quality: { type: 'enum', values: ['basic', 'high', 'ultra'], default: 'basic' },
        output_format: { type: 'enum', values: ['png', 'jpeg'], default: 'png' },
        aspect_ratio: { type: 'enum', default: '1:1' },
      },
      pricing: { unit: 'generation', by: 'quality', credits: { basic: 2, high: 4, ultra: 6 } },
      default_price: 2,
    });
    expect(lite.request_schema).toMatchObject({
      type: 'object',
      required: ['model', 'prompt'],
      additionalProperties: false,
      properties: {
        prompt: { minLength: 1, maxLength: 3000 },
        quality: { enum: ['basic', 'high', 'ultra'] },
      },
    });
    const video = list.find((m) => m.media_type === 'video')!;
    expect(video.pricing).toEqual({
      unit: 'second',
      by: 'resolution',
      credits: { '720p': 5, '1080p': 8 },
      surcharges: { generate_audio: { true: 2 } },
    });
    expect(video.options.duration).toMatchObject({
      type: 'integer_enum',
      values: [4, 6, 8],
      default: 4,
      unit: 'seconds',
    });
  });

  it('models: a price changed in the database is served at once (the web app owns prices)', async () => {
    await db.pool.query(sql.unsafe`
      UPDATE models SET definition = jsonb_set(definition, '{pricing,credits,4K}', '25') WHERE id = 'lumen-pro'`);
    await expect
      .poll(async () => (await models()).find((m) => m.id === 'lumen-pro')!.pricing.credits['4K'], {
        timeout: 5000,
      })
      .toBe(25);
  });

  it('models: an entry the service cannot read is left out instead of breaking the catalog', async () => {
    await db.pool.query(
      sql.unsafe`UPDATE models SET definition = definition - 'pricing' WHERE id = 'nova-image'`,
    );
    await expect
      .poll(async () => (await models()).map((m) => m.id), { timeout: 5000 })
      .not.toContain('nova-image');
    expect((await models()).length).toBe(4);
  });

  it('openapi.json: OpenAPI 3.1 without authentication, request bodies from the live catalog', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(response.statusCode).toBe(200);
    const doc = response.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/batches',
      '/batches/quote',
      '/batches/{id}',
      '/batches/{id}/cancel',
      '/batches/{id}/events',
      '/batches/{id}/results',
      '/credits',
      '/events',
      '/generations',
      '/generations/quote',
      '/generations/{id}',
      '/generations/{id}/cancel',
      '/generations/{id}/events',
      '/key',
      '/models',
      '/openapi.json',
      '/webhooks/secret',
      '/webhooks/secret/rotate',
    ]);
    const bodies = doc.paths['/generations'].post.requestBody.content['application/json'].schema.oneOf.map(
      (r: { $ref: string }) => r.$ref,
    );
    expect(bodies).toContain('#/components/schemas/GenerationRequest_lumen_lite');
    // The webhook payloads (OpenAPI 3.1 `webhooks`): one per event type, each the GenerationEvent.
    expect(doc.webhooks['generation.succeeded'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/GenerationEvent',
    });
    expect(Object.keys(doc.paths['/generations/{id}/events'].get.responses['200'].content).sort()).toEqual([
      'application/json',
      'text/event-stream',
    ]);
    expect(doc.components.schemas.GenerationRequest_lumen_lite.additionalProperties).toBe(false);
    expect(doc.components.schemas.Error.properties.error.properties.code.enum).toContain(
      'insufficient_credits',
    );
    expect(doc.paths['/generations'].post.responses['402'].description).toContain('insufficient_credits');
    expect(doc.components.schemas.Generation.required).toEqual(
      expect.arrayContaining([
        'id',
        'status',
        'credits',
        'credits_refunded',
        'content_expired',
        'expires_at',
      ]),
    );
  });

  it('openapi.json: every status an operation can answer is documented, a 400 with its issues', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).sort();
    const everyOperation = ['400', '401', '403', '429', '500', '503'];
    expect(statuses('/generations', 'post')).toEqual(
      [...everyOperation, '202', '402', '409', '413', '415'].sort(),
    );
    expect(statuses('/generations', 'get')).toEqual([...everyOperation, '200'].sort());
    expect(statuses('/generations/{id}/cancel', 'post')).toEqual(
      [...everyOperation, '200', '404', '409'].sort(),
    );
    expect(statuses('/generations/quote', 'post')).toEqual([...everyOperation, '200', '413', '415'].sort());
    expect(statuses('/generations/{id}', 'get')).toEqual([...everyOperation, '200', '304', '404'].sort());
    expect(statuses('/credits', 'get')).toEqual([...everyOperation, '200'].sort());
    expect(statuses('/events', 'get')).toEqual([...everyOperation, '200'].sort()); // 429 is in everyOperation
    expect(statuses('/models', 'get')).toEqual([...everyOperation, '200'].sort());
    expect(statuses('/openapi.json', 'get')).toEqual(['200', '400', '500', '503']);
    expect(doc.paths['/credits'].get.responses['400'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ValidationError',
    });
    expect(doc.components.schemas.ValidationError).toMatchObject({
      required: expect.arrayContaining(['error', 'issues']),
      properties: { issues: { type: 'array', minItems: 1 } },
    });
    expect(doc.components.schemas.Error.properties).toHaveProperty('issues');
    expect(doc.components.schemas.Error.properties.error.properties).not.toHaveProperty('issues');
  });

  it('openapi.json: the list parameters are what the server accepts', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const parameters: Array<{ name: string; required: boolean; schema: object }> =
      doc.paths['/generations'].get.parameters;
    expect(parameters.map((p) => [p.name, p.required])).toEqual([
      ['limit', false],
      ['cursor', false],
      ['status', false],
      ['model', false],
      ['idempotency_key', false],
    ]);
    expect(parameters[0]!.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 });
    const ajv = new Ajv2019.default({ strict: false, unicodeRegExp: true });
    const schemaOf = (name: string) => parameters.find((p) => p.name === name)!.schema;
    const cursor = Buffer.from(JSON.stringify(['2026-01-01T00:00:00.000Z', 'gen_abc'])).toString('base64url');
    for (const [name, raw, value] of [
      ['limit', '20', 20],
      ['limit', '100', 100],
      ['limit', '0', 0],
      ['limit', '101', 101],
      ['status', '', ''],
      ['status', 'queued', 'queued'],
      ['status', 'queued, failed', 'queued, failed'],
      ['status', 'queued,', 'queued,'],
      ['status', 'done', 'done'],
      ['cursor', '', ''],
      ['cursor', cursor, cursor],
      ['model', '', ''],
      ['model', 'lumen-lite', 'lumen-lite'],
      ['idempotency_key', 'order-1', 'order-1'],
      ['idempotency_key', 'has space', 'has space'],
      ['idempotency_key', 'x'.repeat(129), 'x'.repeat(129)],
      ['model', '%00', '\u0000'],
    ] as const) {
      const published = ajv.validate(schemaOf(name), value);
      const response = await api.app.inject({
        method: 'GET',
        url: `/v1/generations?${name}=${raw.includes('%') ? raw : encodeURIComponent(raw)}`,
        headers: bearer(account.key),
      });
      expect([name, raw, response.statusCode === 200], response.body).toEqual([name, raw, published]);
    }
  });

  it("openapi.json: a batch's results `after` and a line's `model` are described as the server reads them (issue 45, item 5)", async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const ajv = new Ajv2019.default({ strict: false, unicodeRegExp: true });
    const after = (
      doc.paths['/batches/{id}/results'].get.parameters as Array<{ name: string; schema: object }>
    ).find((p) => p.name === 'after')!.schema;
    expect(after).toMatchObject({ type: 'integer', minimum: 0 });
    // What the schema takes the server takes (an unknown batch: 404), what it refuses is a 400.
    for (const [raw, value] of [
      ['0', 0],
      ['7', 7],
      ['999999999', 999_999_999],
      ['-1', -1],
      ['1000000000', 1_000_000_000],
      ['1.5', 1.5],
    ] as const) {
      const response = await api.app.inject({
        method: 'GET',
        url: `/v1/batches/batch_none/results?after=${raw}`,
        headers: bearer(account.key),
      });
      expect([raw, response.statusCode === 404], response.body).toEqual([raw, ajv.validate(after, value)]);
    }
    const line = doc.components.schemas.BatchRequestLine;
    expect(line.properties.model).toMatchObject({ type: 'string', minLength: 1 });
    expect(ajv.validate(line, { custom_id: 'a', model: '' })).toBe(false);
    const quoted = await api.app.inject({
      method: 'POST',
      url: '/v1/batches/quote',
      headers: { ...bearer(account.key), 'content-type': 'application/json' },
      payload: JSON.stringify({ requests: [{ custom_id: 'a', model: '', prompt: 'x' }] }),
    });
    expect(quoted.statusCode, quoted.body).toBe(400);
  });

  it('openapi.json: webhook.url and Last-Event-ID are described as the server reads them (issue 35, item 6)', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const ajv = new Ajv2019.default({ strict: false, unicodeRegExp: true });
    const url = doc.components.schemas.WebhookSubscription.properties.url;
    expect(url).toMatchObject({ type: 'string', minLength: 1, maxLength: 2048 });
    expect(url.description).toMatch(/HTTPS/);
    expect(url.description).toMatch(/2,048 characters/);
    expect(url.description).toMatch(/public/);
    // At a public address (what no schema can say, and the description does), a URL the schema
    // takes is one the server takes (`true`); the schema may refuse what the server would still read
    // (`https:///host`, which URL parsers read as `https://host`), never the other way round.
    const base = 'https://93.184.215.14/';
    const fill = (n: number, unit: string) => base + unit.repeat(n - base.length);
    for (const [candidate, valid] of [
      [base, true],
      ['HTTPS://93.184.215.14/', true],
      ['https://93.184.215.14', true],
      ['https://93.184.215.14/a@b?c=d#e', true],
      [fill(2048, 'a'), true],
      [fill(2048, 'é'), true],
      [fill(2048, '\u{1F600}'), true],
      [fill(2049, 'a'), false],
      [fill(2049, '\u{1F600}'), false],
      ['', false],
      ['http://93.184.215.14/', false],
      ['ftp://93.184.215.14/', false],
      ['https://user:secret@93.184.215.14/', false],
      ['https://user@93.184.215.14/', false],
      ['https:///93.184.215.14/', false],
      ['https://', false],
      ['not a url', false],
    ] as const) {
      const label = `${candidate.slice(0, 40)} (${[...candidate].length})`;
      expect([label, ajv.validate(url, candidate)]).toEqual([label, valid]);
      if (!valid) continue;
      const response = await api.app.inject({
        method: 'POST',
        url: '/v1/generations/quote',
        headers: bearer(account.key),
        payload: { model: 'lumen-lite', prompt: 'a gate', webhook: { url: candidate } },
      });
      expect([label, response.statusCode], response.body).toEqual([label, 200]);
    }

    const lastEventId = doc.paths['/generations/{id}/events'].get.parameters.find(
      (p: { name: string }) => p.name === 'Last-Event-ID',
    );
    expect(lastEventId.description).toMatch(/[Ee]mpty/);
    // A header the schema takes is read (here: the unknown generation's 404), one it refuses is a 400.
    for (const value of ['', '0', '7', '999999999', '1000000000', 'x', '-1', '1.5']) {
      const published = ajv.validate(lastEventId.schema, value);
      const response = await api.app.inject({
        method: 'GET',
        url: '/v1/generations/gen_doesnotexist/events',
        headers: { ...bearer(account.key), 'last-event-id': value },
      });
      expect([value, response.statusCode === 404 ? 'read' : response.statusCode]).toEqual([
        value,
        published ? 'read' : 400,
      ]);
    }
  });
});
