import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { generateApiKey } from '../../src/auth/api-key.js';
import type { ModelDefinition } from '../../src/catalog/catalog-entry.js';
import { defaultCatalog } from '../../src/catalog/default-catalog.js';
import { upsertModel } from '../../src/db/catalog-repository.js';
import { recordProviderFailure, recordProviderSuccess } from '../../src/db/provider-health.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { waitFor } from '../support/wait.js';

/**
 * Attacks from outside, each against the real API (and, where a generation is involved, a real
 * worker and Temporal): a client that means harm, or one that retries at the worst moment, gets a
 * clear 4xx (or the answer it is owed), never a 500, never a second charge, never a free result.
 * Add new attacks here, one describe per kind.
 */

const credits = async (api: ApiService, key: string) =>
  (await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(key) })).json()
    .credits as number;

describe('a retry of a charged request while its provider is down (issue 19, item 3)', () => {
  const stack = useGenerationStack();

  afterAll(async () => {
    if (stack.db) await recordProviderSuccess(stack.db.pool, 'simulated');
  });

  it('is answered with the generation (same id, nothing charged again); only new generations are refused', async () => {
    const { api, account, db } = stack;
    const done = { model: 'lumen-lite', prompt: 'charged before the outage' };
    const running = { model: 'lumen-lite', prompt: 'still running [sim:slow=8]' };
    const first = await createGeneration(api, account.key, done, 'hostile-done');
    const second = await createGeneration(api, account.key, running, 'hostile-running');
    expect(first.statusCode, first.body).toBe(202);
    expect(second.statusCode, second.body).toBe(202);
    const doneId = first.json().id as string;
    const runningId = second.json().id as string;
    expect((await pollGeneration(api, account.key, doneId)).status).toBe('succeeded');

    await recordProviderFailure(db.pool, 'simulated', 'hostile-client test outage', {
      downAfter: 1,
      probeAfterMs: 120_000,
    });
    await waitFor(() => Promise.resolve(api.providers.retryAfterSeconds('simulated') !== null), 10_000);
    const before = await credits(api, account.key);

    // Answered from the key's record (the generation has ended)...
    const retriedDone = await createGeneration(api, account.key, done, 'hostile-done');
    expect(retriedDone.statusCode, retriedDone.body).toBe(202);
    expect(retriedDone.headers['x-request-id']).toBe(doneId);
    expect(retriedDone.json()).toMatchObject({ id: doneId, status: 'succeeded', credits: 2 });
    // ...and from its workflow (still queued).
    const retriedRunning = await createGeneration(api, account.key, running, 'hostile-running');
    expect(retriedRunning.statusCode, retriedRunning.body).toBe(202);
    expect(retriedRunning.json()).toMatchObject({ id: runningId, credits: 2 });
    // Another body under a used key is still a conflict, not a 503.
    const conflict = await createGeneration(api, account.key, { ...done, prompt: 'other' }, 'hostile-done');
    expect(conflict.statusCode).toBe(409);

    // A new generation is refused before anything is charged.
    for (const key of ['hostile-new', undefined]) {
      const refused = await createGeneration(api, account.key, { ...done, prompt: 'new' }, key);
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json().error.code).toBe('service_unavailable');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(api.providers.retryAfterSeconds('simulated')).not.toBeNull();
    expect(await credits(api, account.key)).toBe(before);
    expect(await chargesOf(db.pool, doneId)).toMatchObject({ debits: 1, refunds: 0, submissions: 1 });
    expect(await chargesOf(db.pool, runningId)).toMatchObject({ debits: 1, refunds: 0, submissions: 1 });
  }, 60_000);
});

describe('failed authentications from rotating addresses (issue 19, item 7)', () => {
  let db: TestDatabase;
  let api: ApiService;
  let alice: TestAccount;
  const get = (key: string, remoteAddress: string) =>
    api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(key), remoteAddress });

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url, { FAILED_AUTH_PROCESS_PER_MINUTE: '60' });
    alice = await createPaidAccount(db.pool);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('an IPv6 client rotating through its /64 is blocked like one address; the next /64 is not', async () => {
    for (let i = 1; i <= 20; i++)
      expect((await get(generateApiKey(), `2001:db8:aa:1::${i.toString(16)}`)).statusCode).toBe(401);
    const blocked = await get(generateApiKey(), '2001:db8:aa:1:ffff:ffff:ffff:fffe');
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().error.code).toBe('rate_limited');
    expect((await get(generateApiKey(), '2001:db8:aa:1:1234::1')).statusCode).toBe(429);
    expect((await get(generateApiKey(), '2001:db8:aa:2::1')).statusCode).toBe(401);
    // A key that works is let through from the blocked /64 all the same.
    expect((await get(alice.key, '2001:db8:aa:1:1234::1')).statusCode).toBe(200);
  });

  it('addresses spread over many networks meet the per-process budget; keys known to work still do', async () => {
    expect((await get(alice.key, '198.51.100.200')).statusCode).toBe(200);
    // 23 failed lookups were counted above (a blocked address's key is still looked up, for the
    // request log); 37 more from 37 networks reach the budget of 60.
    for (let i = 1; i <= 37; i++)
      expect((await get(generateApiKey(), `2001:db8:bb:${i.toString(16)}::1`)).statusCode).toBe(401);
    const refused = await get(generateApiKey(), '2001:db8:cc::1');
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('rate_limited');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await get(alice.key, '2001:db8:dd::1')).statusCode).toBe(200);
  });
});

describe('catalog enum values named like Object.prototype members (issue 19, item 7)', () => {
  const stack = useGenerationStack();
  const base = defaultCatalog.find((m) => m.id === 'lumen-pro')!.definition;

  /** The prices of `values`, given as pairs: keys such as `toString` are then plain data. */
  const prices = (...pairs: Array<[string, number]>): Record<string, number> => Object.fromEntries(pairs);
  const values = ['1K', 'constructor', 'toString'];

  /**
   * lumen-pro with these resolutions, prices and surcharges: what the web app could write straight
   * into `models`, where no import checks it.
   */
  const definitionWith = (
    credits: Record<string, number>,
    surcharges: Record<string, Record<string, number>> = {},
  ): ModelDefinition => ({
    ...base,
    options: {
      ...base.options,
      resolution: { type: 'enum', values, default: '1K', description: 'Output size; sets the price.' },
      aspect_ratio: {
        type: 'enum',
        values: ['1:1', '16:9', 'constructor', 'toString'],
        default: '1:1',
        description: 'Width:height.',
      },
    },
    output_size: undefined,
    pricing: { unit: 'generation', by: 'resolution', credits, surcharges },
  });

  beforeAll(async () => {
    const { db } = stack;
    const write = (id: string, definition: ModelDefinition, sort_order: number) =>
      upsertModel(db.pool, { id, media_type: 'image', definition, sort_order, active: true });
    await write('proto-unpriced', definitionWith(prices(['1K', 4])), 900);
    await write(
      'proto-surcharged',
      definitionWith(prices(['1K', 4], ['constructor', 5], ['toString', 6]), {
        aspect_ratio: prices(['16:9', 1]),
      }),
      901,
    );
    await waitFor(async () => {
      const models = await stack.api.app.inject({
        method: 'GET',
        url: '/v1/models',
        headers: bearer(stack.account.key),
      });
      return models.body.includes('proto-surcharged');
    }, 10_000);
  });

  it("'constructor' and 'toString' never pass for a price: a model without one for them is refused with a 400", async () => {
    const { api, account } = stack;
    const before = await credits(api, account.key);
    for (const resolution of ['constructor', 'toString', '1K']) {
      const response = await createGeneration(api, account.key, {
        model: 'proto-unpriced',
        prompt: 'a hostile value',
        resolution,
      });
      expect(response.statusCode, response.body).toBe(400);
      expect(response.json().error.code).toBe('invalid_request');
    }
    expect(await credits(api, account.key)).toBe(before);
  });

  it('values that are own keys are priced as written, surcharges included, and a surcharge they lack is none', async () => {
    const { api, account } = stack;
    for (const [resolution, aspect_ratio, price] of [
      ['constructor', 'toString', 5],
      ['toString', 'constructor', 6],
      ['toString', '16:9', 7],
    ] as const) {
      const response = await createGeneration(api, account.key, {
        model: 'proto-surcharged',
        prompt: 'priced by own keys',
        resolution,
        aspect_ratio,
      });
      expect(response.statusCode, response.body).toBe(202);
      expect(response.json().credits).toBe(price);
    }
  });
});
