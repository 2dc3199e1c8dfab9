import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { grantCredits } from '../../src/db/credits-repository.js';
import { useGenerationStack } from '../support/stack.js';
import { bearer, createPaidAccount } from '../support/api.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';

/** A real 1×1 PNG, followed by one byte that makes each of them different. */
const pngBytes = (last: number) =>
  Buffer.concat([
    Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
      'base64',
    ),
    Buffer.from([last]),
  ]).toString('base64');
const png = `data:image/png;base64,${pngBytes(3)}`;
const otherPng = `data:image/png;base64,${pngBytes(4)}`;

describe('POST /v1/generations: admission, charging and the Idempotency-Key rules', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 2 } });
  let n = 0;
  const key = () => `key-${Date.now()}-${++n}`;
  const generationCount = async (accountId: string) =>
    stack.db.pool.oneFirst(
      sql.type(
        z.object({ n: z.number() }),
      )`SELECT count(*)::int AS n FROM generations WHERE account_id = ${accountId}`,
    );

  it('rule 1: without a key every request is its own generation', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const body = { model: 'lumen-lite', prompt: 'twins' };
    const [a, b] = [
      await createGeneration(stack.api, account.key, body),
      await createGeneration(stack.api, account.key, body),
    ];
    expect(a.json().id).not.toBe(b.json().id);
    expect(await chargesOf(stack.db.pool, a.json().id)).toMatchObject({ debits: 1 });
    expect(await chargesOf(stack.db.pool, b.json().id)).toMatchObject({ debits: 1 });
  });

  it('rules 2 and 4: a repeat returns the original id and current state, with no second debit or submission', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const k = key();
    const body = { model: 'lumen-pro', prompt: 'a red kite', resolution: '2K' };
    const first = await createGeneration(stack.api, account.key, body, k);
    expect(first.statusCode).toBe(202);
    const id = first.json().id;
    await pollGeneration(stack.api, account.key, id);
    const again = await createGeneration(stack.api, account.key, body, k);
    expect(again.statusCode).toBe(202);
    expect(again.headers['x-request-id']).toBe(id);
    expect(again.json()).toMatchObject({ id, status: 'succeeded', credits: 6 }); // current state, not the state at admission
    expect(await chargesOf(stack.db.pool, id)).toEqual({ debits: 1, refunds: 0, net: -6, submissions: 1 });
  });

  it('rule 2: the key is 1–128 printable ASCII characters without spaces', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    for (const bad of ['has space', 'x'.repeat(129), 'tab\there', 'ü']) {
      const response = await createGeneration(
        stack.api,
        account.key,
        { model: 'lumen-lite', prompt: 'p' },
        bad,
      );
      expect(response.statusCode, bad).toBe(400);
      expect(response.json().issues).toContainEqual(expect.objectContaining({ field: 'Idempotency-Key' }));
    }
    expect(
      (await createGeneration(stack.api, account.key, { model: 'lumen-lite', prompt: 'p' }, '~'.repeat(128)))
        .statusCode,
    ).toBe(202);
  });

  it('rule 3: each API key has its own namespace', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const k = key();
    const other = await createApiKey(stack.db.pool, { accountId: account.accountId });
    const body = { model: 'lumen-lite', prompt: 'namespaces' };
    const a = await createGeneration(stack.api, account.key, body, k);
    const b = await createGeneration(stack.api, other.key, body, k);
    expect(a.json().id).not.toBe(b.json().id);
  });

  it('rule 5: another body under the same key is 409; key order does not matter, everything else does', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const k = key();
    const body = {
      model: 'lumen-pro',
      prompt: 'a  cat',
      images: ['https://x.example/a.png', png],
      resolution: '1K',
    };
    const first = await createGeneration(stack.api, account.key, body, k);
    expect(first.statusCode).toBe(202);
    const id = first.json().id;
    const reordered = { resolution: '1K', images: body.images, prompt: 'a  cat', model: 'lumen-pro' };
    expect((await createGeneration(stack.api, account.key, reordered, k)).json().id).toBe(id);
    const variants = [
      { ...body, images: [...body.images].reverse() }, // array order
      { ...body, prompt: 'a cat' }, // prompt whitespace
      { model: 'lumen-pro', prompt: 'a  cat', images: body.images }, // omitted versus explicit default
      { ...body, seed: 42 }, // a field the model ignores
      { ...body, images: [body.images[0], otherPng] }, // inline image bytes
    ];
    for (const variant of variants) {
      const response = await createGeneration(stack.api, account.key, variant, k);
      expect(response.statusCode, JSON.stringify(variant).slice(0, 80)).toBe(409);
      expect(response.json().error.code).toBe('idempotency_conflict');
      expect(response.headers['x-request-id']).toBe(id);
    }
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 1 });
  });

  it('inline images are stored first: the workflow and the record carry URLs, not bytes', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const response = await createGeneration(stack.api, account.key, {
      model: 'lumen-pro',
      prompt: 'edit this',
      images: [png],
    });
    const input = response.json().input;
    expect(input.images[0]).toMatch(
      new RegExp(`^${stack.worker.resultBaseUrl}/i[0-9A-Za-z]+/images-0\\.png$`),
    );
    const stored = await fetch(input.images[0]);
    expect(Buffer.from(await stored.arrayBuffer()).equals(Buffer.from(png.split(',')[1]!, 'base64'))).toBe(
      true,
    );
  });

  it('rule 6 and charging rule 1: insufficient credits is a recorded 402 that replays with its id; a new key after a top-up works', async () => {
    const poor = await createPaidAccount(stack.db.pool, { oneTime: 3 });
    const k = key();
    const body = { model: 'lumen-pro', prompt: 'expensive', resolution: '4K' };
    const refused = await createGeneration(stack.api, poor.key, body, k);
    expect(refused.statusCode).toBe(402);
    expect(refused.json().error).toMatchObject({
      code: 'insufficient_credits',
      message: expect.stringContaining('10 credits'),
    });
    const id = String(refused.headers['x-request-id']);
    expect(id).toMatch(/^gen_/);
    await grantCredits(stack.db.pool, {
      accountId: poor.accountId,
      pool: 'one_time',
      amount: 100,
      reason: 'top-up',
    });
    const replay = await createGeneration(stack.api, poor.key, body, k);
    expect(replay.statusCode).toBe(402);
    expect(replay.headers['x-request-id']).toBe(id);
    const listed = (
      await stack.api.app.inject({
        method: 'GET',
        url: '/v1/generations?status=rejected',
        headers: bearer(poor.key),
      })
    ).json();
    expect(listed.data).toEqual([
      expect.objectContaining({
        id,
        status: 'rejected',
        credits: 0,
        credits_refunded: false,
        error: expect.objectContaining({ code: 'insufficient_credits' }),
      }),
    ]);
    expect(await chargesOf(stack.db.pool, id)).toMatchObject({ debits: 0 });
    expect((await createGeneration(stack.api, poor.key, body, key())).statusCode).toBe(202);
  });

  it('rule 6: validation failures are recorded (listed, named by x-request-id) but do not claim the key', async () => {
    const account = await createPaidAccount(stack.db.pool, { oneTime: 500 });
    const k = key();
    const invalid = await createGeneration(
      stack.api,
      account.key,
      { model: 'lumen-lite', prompt: '', extra: true },
      k,
    );
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().issues).toEqual([
      expect.objectContaining({ field: 'prompt', code: 'too_small' }),
      expect.objectContaining({ field: 'extra', code: 'unknown_field' }),
    ]);
    const rejectedId = String(invalid.headers['x-request-id']);
    const record = (
      await stack.api.app.inject({
        method: 'GET',
        url: `/v1/generations/${rejectedId}`,
        headers: bearer(account.key),
      })
    ).json();
    expect(record).toMatchObject({
      id: rejectedId,
      status: 'rejected',
      credits: 0,
      error: { code: 'invalid_request' },
    });
    const valid = await createGeneration(stack.api, account.key, { model: 'lumen-lite', prompt: 'fixed' }, k);
    expect(valid.statusCode).toBe(202);
    expect(valid.json().id).not.toBe(rejectedId);
    const unknownModel = await createGeneration(stack.api, account.key, { model: 'nope', prompt: 'x' });
    expect(unknownModel.json().issues).toEqual([
      expect.objectContaining({ field: 'model', code: 'invalid_value' }),
    ]);
  });

  it('the concurrency limit rejects without claiming the key or charging; replays take no slot', async () => {
    const busy = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const slowKey = key();
    const slow = { model: 'lumen-lite', prompt: 'slow [sim:slow=3]' };
    const a = await createGeneration(stack.api, busy.key, slow, slowKey);
    const b = await createGeneration(stack.api, busy.key, { ...slow, prompt: 'slow too [sim:slow=3]' });
    expect([a.statusCode, b.statusCode]).toEqual([202, 202]);
    const k = key();
    const third = await createGeneration(
      stack.api,
      busy.key,
      { model: 'lumen-lite', prompt: 'one too many' },
      k,
    );
    expect(third.statusCode).toBe(429);
    expect(third.json().error.code).toBe('concurrency_limit_exceeded');
    expect(await chargesOf(stack.db.pool, String(third.headers['x-request-id']))).toMatchObject({
      debits: 0,
    });
    // A replay of an admitted generation needs no slot.
    expect((await createGeneration(stack.api, busy.key, slow, slowKey)).statusCode).toBe(202);
    await pollGeneration(stack.api, busy.key, a.json().id);
    await pollGeneration(stack.api, busy.key, b.json().id);
    // The key was not claimed: the same key and body now start a generation.
    await expect
      .poll(
        async () =>
          (await createGeneration(stack.api, busy.key, { model: 'lumen-lite', prompt: 'one too many' }, k))
            .statusCode,
        { timeout: 10_000 },
      )
      .toBe(202);
  });

  it('concurrent POSTs of one account: never more in progress than the limit, never more debited than the balance', async () => {
    // The limit is 2 here; 6 credits pay for 3 lumen-lite generations. Admissions of one account queue on
    // its row lock, and each must see what the one before it committed.
    const crowd = await createPaidAccount(stack.db.pool, { oneTime: 6 });
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        createGeneration(stack.api, crowd.key, { model: 'lumen-lite', prompt: `crowd ${i} [sim:slow=5]` }),
      ),
    );
    const codes = responses.map((r) => r.statusCode).sort();
    expect(codes).toEqual([202, 202, 429, 429, 429, 429, 429, 429]);
    expect(
      (await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(crowd.key) })).json(),
    ).toMatchObject({ credits: 2 });

    const rich = await createPaidAccount(stack.db.pool, { oneTime: 4 });
    const more = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        createGeneration(stack.api, rich.key, { model: 'lumen-lite', prompt: `spender ${i} [sim:slow=5]` }),
      ),
    );
    const outcomes = more.map((r) => (r.statusCode === 202 ? 202 : r.json().error.code)).sort();
    expect(outcomes).toEqual([
      202,
      202,
      'concurrency_limit_exceeded',
      'concurrency_limit_exceeded',
      'concurrency_limit_exceeded',
      'concurrency_limit_exceeded',
    ]);
  });

  it('50 concurrent identical POSTs with one key make one generation and one debit', async () => {
    const racer = await createPaidAccount(stack.db.pool, { oneTime: 50 });
    const k = key();
    const body = { model: 'prism-2', prompt: 'a stampede', resolution: '2K' };
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => createGeneration(stack.api, racer.key, body, k)),
    );
    const ids = new Set(responses.map((r) => r.json().id as string));
    expect(responses.map((r) => r.statusCode)).toEqual(Array(50).fill(202));
    expect(ids.size).toBe(1);
    expect(await generationCount(racer.accountId)).toBe(1);
    const [id] = [...ids];
    expect(await chargesOf(stack.db.pool, id!)).toMatchObject({ debits: 1, net: -4 });
    await pollGeneration(stack.api, racer.key, id!);
    expect(await chargesOf(stack.db.pool, id!)).toEqual({ debits: 1, refunds: 0, net: -4, submissions: 1 });
    expect(
      (await stack.api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(racer.key) })).json()
        .credits,
    ).toBe(46);
  });
});
