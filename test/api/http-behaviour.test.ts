import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import { errorBodySchema, validationErrorBodySchema } from '../../src/api/schemas.js';
import { ApiError } from '../../src/vocabulary/errors.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { waitFor } from '../support/wait.js';

describe('HTTP behaviour: the error envelope, limits, request ids, CORS', () => {
  let db: TestDatabase;
  let api: ApiService;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { BODY_LIMIT_BYTES: '2048', RATE_LIMIT_PER_MINUTE: '1000' }, (app) => {
      // Probe routes: a body-accepting route and a route that fails, to observe the envelope.
      app.post('/v1/probe', (request) => ({ received: request.body }));
      app.get('/v1/probe/boom', () => {
        throw new Error('secret internal detail: relation "x" at 10.1.2.3');
      });
      // An error a plugin or Node raises with a client status of its own.
      app.get('/v1/probe/status/:status', (request) => {
        const status = Number((request.params as { status: string }).status);
        throw Object.assign(new Error(`probe ${status}`), { statusCode: status });
      });
      app.get('/v1/probe/api-error', () => {
        throw new ApiError('idempotency_conflict', 'That key was used with another body.');
      });
    });
    account = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  const post = (payload: string, headers: Record<string, string>) =>
    api.app.inject({
      method: 'POST',
      url: '/v1/probe',
      payload,
      headers: { ...bearer(account.key), ...headers },
    });
  const envelope = (body: string) => errorBodySchema.parse(JSON.parse(body)).error;

  it('malformed JSON is 400 invalid_request with an issue for the body, issues beside error', async () => {
    const response = await post('{"model": ', { 'content-type': 'application/json' });
    expect(response.statusCode).toBe(400);
    const body = JSON.parse(response.body);
    expect(body).toEqual({
      error: { code: 'invalid_request', message: expect.any(String) },
      issues: [{ field: '', code: 'invalid_json', message: expect.any(String) }],
    });
    validationErrorBodySchema.strict().parse(body);
  });

  it('an empty JSON body is 400 invalid_request', async () => {
    const response = await post('', { 'content-type': 'application/json' });
    expect(response.statusCode).toBe(400);
    expect(envelope(response.body).code).toBe('invalid_request');
  });

  it('a client error keeps its status and gets its own code, in the envelope', async () => {
    for (const [status, code] of [
      [406, 'not_acceptable'],
      [408, 'request_timeout'],
      [411, 'length_required'],
      [413, 'payload_too_large'],
      [415, 'unsupported_media_type'],
    ] as const) {
      const response = await api.app.inject({
        method: 'GET',
        url: `/v1/probe/status/${status}`,
        headers: bearer(account.key),
      });
      expect(response.statusCode).toBe(status);
      expect(errorBodySchema.parse(response.json()).error.code).toBe(code);
    }
  });

  it('a 401 names the scheme that works (WWW-Authenticate: Bearer); other answers do not', async () => {
    const refused = await api.app.inject({ method: 'GET', url: '/v1/credits' });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    const fine = await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) });
    expect(fine.headers['www-authenticate']).toBeUndefined();
  });

  it('an oversized body is 413 payload_too_large', async () => {
    const response = await post(JSON.stringify({ prompt: 'x'.repeat(4096) }), {
      'content-type': 'application/json',
    });
    expect(response.statusCode).toBe(413);
    expect(envelope(response.body).code).toBe('payload_too_large');
  });

  it('a body that is not JSON is 415 unsupported_media_type', async () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const response = await post('prompt=hi', { 'content-type': type });
      expect(response.statusCode, type).toBe(415);
      expect(envelope(response.body).code).toBe('unsupported_media_type');
    }
    expect((await post('{"a":1}', { 'content-type': 'application/json; charset=utf-8' })).statusCode).toBe(
      200,
    );
  });

  it('unknown routes are 404 not_found in the envelope', async () => {
    for (const url of ['/v1/nope', '/v2/credits', '/']) {
      const response = await api.app.inject({ method: 'GET', url, headers: bearer(account.key) });
      expect(response.statusCode, url).toBe(404);
      expect(envelope(response.body).code).toBe('not_found');
    }
  });

  it('methods a path does not have are 405 method_not_allowed with Allow, after authentication', async () => {
    for (const [method, url, allow] of [
      ['TRACE', '/v1/credits', 'GET, HEAD'],
      ['PUT', '/v1/credits', 'GET, HEAD'],
      ['OPTIONS', '/v1/models', 'GET, HEAD'],
      ['DELETE', '/v1/generations', 'GET, HEAD, POST'],
      ['DELETE', '/v1/generations?status=queued', 'GET, HEAD, POST'],
      ['PATCH', '/v1/generations/gen_abc', 'GET, HEAD'],
      ['POST', '/v1/openapi.json', 'GET, HEAD'],
    ] as const) {
      // TRACE is a method Node serves though light-my-request's types do not list it.
      const response = await api.app.inject({ method: method as 'GET', url, headers: bearer(account.key) });
      expect(response.statusCode, `${method} ${url}`).toBe(405);
      expect(response.headers.allow).toBe(allow);
      expect(envelope(response.body).code).toBe('method_not_allowed');
      expect(response.headers['x-request-id']).toMatch(/^req_/);
    }
    // Authenticated first, like an unknown route; the public document needs no key.
    expect((await api.app.inject({ method: 'PUT', url: '/v1/credits' })).statusCode).toBe(401);
    expect((await api.app.inject({ method: 'POST', url: '/v1/openapi.json' })).statusCode).toBe(405);
    // Unknown paths stay 404, whatever the method.
    for (const method of ['GET', 'PUT', 'TRACE'] as const) {
      const response = await api.app.inject({
        method: method as 'GET',
        url: '/v1/nope',
        headers: bearer(account.key),
      });
      expect(response.statusCode, method).toBe(404);
      expect(response.headers.allow).toBeUndefined();
    }
  });

  it('paths Fastify cannot route are answered in the envelope too, after authentication', async () => {
    for (const [url, status, code] of [
      ['/v1/generations/%zz', 400, 'invalid_request'],
      ['/v1/generations/gen_%ED%A1%A9', 400, 'invalid_request'],
      [`/v1/generations/gen_${'a'.repeat(200)}`, 404, 'not_found'],
    ] as const) {
      const response = await api.app.inject({ method: 'GET', url, headers: bearer(account.key) });
      expect(response.statusCode, url).toBe(status);
      expect(envelope(response.body).code).toBe(code);
      expect(response.headers['x-request-id']).toMatch(/^req_/);
      expect((await api.app.inject({ method: 'GET', url })).statusCode, url).toBe(401);
    }
  });

  it('405s, unknown routes and unroutable paths made with a key are in the request log', async () => {
    const logged = await createPaidAccount(db.pool);
    for (const [method, url] of [
      ['PUT', '/v1/credits'],
      ['POST', '/v1/nope'],
      ['GET', '/v1/generations/%zz'],
    ] as const)
      await api.app.inject({ method, url, headers: bearer(logged.key) });
    const rows = await waitFor(async () => {
      const found = await db.pool.any(
        sql.type(z.object({ method: z.string(), path: z.string(), status_code: z.number() }))`
          SELECT method, path, status_code FROM api_request_log WHERE api_key_id = ${logged.keyId} ORDER BY id`,
      );
      return found.length === 3 ? found : null;
    });
    expect(rows.map((r) => [r.method, r.path, r.status_code])).toEqual([
      ['PUT', '/v1/credits', 405],
      ['POST', '/v1/nope', 404],
      ['GET', '/v1/generations/%zz', 400],
    ]);
  });

  it('a 5xx says nothing of internals', async () => {
    const response = await api.app.inject({
      method: 'GET',
      url: '/v1/probe/boom',
      headers: bearer(account.key),
    });
    expect(response.statusCode).toBe(500);
    const error = envelope(response.body);
    expect(error.code).toBe('internal_error');
    expect(response.body).not.toMatch(/secret|relation|10\.1\.2\.3|stack/);
  });

  it('errors raised by routes keep their code and status', async () => {
    const response = await api.app.inject({
      method: 'GET',
      url: '/v1/probe/api-error',
      headers: bearer(account.key),
    });
    expect(response.statusCode).toBe(409);
    expect(envelope(response.body)).toEqual({
      code: 'idempotency_conflict',
      message: 'That key was used with another body.',
    });
  });

  it('every response carries x-request-id, errors included', async () => {
    const responses = await Promise.all([
      api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) }),
      api.app.inject({ method: 'GET', url: '/v1/credits' }),
      api.app.inject({ method: 'GET', url: '/v1/nope', headers: bearer(account.key) }),
      api.app.inject({ method: 'GET', url: '/v1/openapi.json' }),
      post('{', { 'content-type': 'application/json' }),
    ]);
    const ids = responses.map((r) => r.headers['x-request-id']);
    for (const id of ids) expect(id).toMatch(/^req_[0-9A-Za-z]{22}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sends no CORS headers, not even to a browser origin or a preflight', async () => {
    const origin = { origin: 'https://evil.example', 'access-control-request-method': 'GET' };
    const responses = [
      await api.app.inject({
        method: 'GET',
        url: '/v1/credits',
        headers: { ...bearer(account.key), ...origin },
      }),
      await api.app.inject({ method: 'OPTIONS', url: '/v1/credits', headers: origin }),
    ];
    for (const response of responses) {
      expect(Object.keys(response.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
    expect(responses[1]!.statusCode).toBeGreaterThanOrEqual(400);
  });

  it('PostgreSQL unreachable is 503 service_unavailable, not a 500', async () => {
    const broken = await createTestDatabase();
    const brokenApi = await startTestApi(broken.url);
    const brokenAccount = await createPaidAccount(broken.pool);
    await broken.drop(); // the database disappears under the running API
    const response = await brokenApi.app.inject({
      method: 'GET',
      url: '/v1/credits',
      headers: bearer(brokenAccount.key),
    });
    expect(response.statusCode).toBe(503);
    expect(envelope(response.body).code).toBe('service_unavailable');
    await brokenApi.close().catch(() => undefined);
  });
});

describe('per-key rate limit and the request log', () => {
  let db: TestDatabase;
  let api: ApiService;

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { RATE_LIMIT_PER_MINUTE: '3' });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('answers 429 rate_limited with Retry-After past the per-key limit; other keys are unaffected', async () => {
    const a = await createPaidAccount(db.pool);
    const b = await createPaidAccount(db.pool);
    const responses = [];
    for (let i = 0; i < 5; i++)
      responses.push(await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(a.key) }));
    expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 429, 429]);
    const last = responses[4];
    if (!last) throw new Error('no response');
    expect(last.json().error.code).toBe('rate_limited');
    expect(Number(last.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(last.headers['x-ratelimit-limit']).toBe('3');
    expect(last.headers['x-ratelimit-remaining']).toBe('0');
    expect(
      (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(b.key) })).statusCode,
    ).toBe(200);
  });

  it('logs every request made with a recognised key, rejected ones included, and none with unknown keys', async () => {
    const c = await createPaidAccount(db.pool);
    await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(c.key) });
    await api.app.inject({
      method: 'GET',
      url: '/v1/models?x=1',
      headers: { 'x-api-key': c.key, 'user-agent': 'test-agent/1' },
    });
    await api.app.inject({ method: 'GET', url: '/v1/nope', headers: bearer(c.key) });
    await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(c.key) }); // 4th: over the limit of 3
    await db.pool.query(sql.unsafe`UPDATE api_keys SET revoked_at = now() WHERE id = ${c.keyId}`);
    await waitFor(
      async () =>
        (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(c.key) })).statusCode ===
        401,
    );

    const rows = await waitFor(async () => {
      const found = await db.pool.any(
        sql.type(
          z.object({
            path: z.string(),
            status_code: z.number(),
            error_code: z.string().nullable(),
            user_agent: z.string().nullable(),
            request_id: z.string(),
          }),
        )`
          SELECT path, status_code, error_code, user_agent, request_id FROM api_request_log WHERE api_key_id = ${c.keyId} ORDER BY id`,
      );
      return found.some((r) => r.status_code === 401) ? found : null;
    });
    expect(rows.slice(0, 4).map((r) => [r.path, r.status_code, r.error_code])).toEqual([
      ['/v1/credits', 200, null],
      ['/v1/models?x=1', 200, null],
      ['/v1/nope', 404, 'not_found'],
      ['/v1/credits', 429, 'rate_limited'],
    ]);
    expect(rows.at(-1)).toMatchObject({ status_code: 401, error_code: 'unauthorized' });
    expect(rows[1]!.user_agent).toBe('test-agent/1');
    for (const row of rows) expect(row.request_id).toMatch(/^req_/);
  });
});
