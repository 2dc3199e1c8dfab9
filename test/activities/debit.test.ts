import { sql, type CommonQueryMethods } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { grantCredits } from '../../src/db/credits-repository.js';
import { settleDebit } from '../../src/activities/debit.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { generationStart } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';

/**
 * settleDebit against PostgreSQL, without a workflow: the price is quoted from the entry the
 * worker last saw, and admit_generation() checks it is still the model's under the account's lock.
 */
describe('admission quotes from the catalog entry current at the debit', () => {
  let db: TestDatabase;
  let account: TestAccount;
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { subscription: 1, oneTime: 20 });
  });
  afterAll(() => db?.drop());

  const startFor = (owner = account) => generationStart(owner, 'a quiet harbour');
  const setModel = (change: ReturnType<typeof sql.unsafe>) => db.pool.query(change);
  const statusOf = (id: string) =>
    db.pool.oneFirst(
      sql.type(z.object({ status: z.string() }))`SELECT status FROM generations WHERE id = ${id}`,
    );

  it('debits subscription credits first, and a retry returns the decision without a second debit', async () => {
    const start = startFor();
    expect(await settleDebit(db.pool, start, 10)).toEqual({ outcome: 'accepted', credits: 2 });
    expect(await settleDebit(db.pool, start, 10)).toEqual({ outcome: 'accepted', credits: 2 });
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, net: -2 });
    const pools = await db.pool.one(sql.type(
      z.object({ subscription_delta: z.number(), one_time_delta: z.number() }),
    )`
      SELECT subscription_delta, one_time_delta FROM credit_ledger WHERE generation_id = ${start.generationId}`);
    expect(pools).toEqual({ subscription_delta: -1, one_time_delta: -1 });
    expect(await statusOf(start.generationId)).toBe('queued');
  });

  it('a price changed since the last admission is the one charged', async () => {
    await setModel(sql.unsafe`
      UPDATE models SET definition = jsonb_set(definition, '{pricing,credits,basic}', '5') WHERE id = 'lumen-lite'`);
    const start = startFor();
    expect(await settleDebit(db.pool, start, 10)).toEqual({ outcome: 'accepted', credits: 5 });
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, net: -5 });
  });

  it('a model retired since the last admission is refused as unavailable, recorded, and not charged', async () => {
    await setModel(sql.unsafe`UPDATE models SET active = false WHERE id = 'lumen-lite'`);
    try {
      const start = startFor();
      const refused = {
        outcome: 'rejected',
        error: { code: 'invalid_request', message: 'Model lumen-lite is not available.' },
        claimsKey: false,
      };
      expect(await settleDebit(db.pool, start, 10)).toEqual(refused);
      expect(await statusOf(start.generationId)).toBe('rejected');
      expect(await settleDebit(db.pool, start, 10)).toEqual(refused);
      expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 0, net: 0 });
    } finally {
      await setModel(sql.unsafe`UPDATE models SET active = true WHERE id = 'lumen-lite'`);
    }
  });

  it('a balance below the quoted price is refused with both figures, claims the key, and replays', async () => {
    const poor = await createPaidAccount(db.pool, { oneTime: 4 });
    const start = { ...startFor(poor), input: { prompt: 'a quiet harbour', quality: 'ultra' } };
    const refused = {
      outcome: 'rejected',
      error: { code: 'insufficient_credits', message: 'This generation costs 6 credits; the balance is 4.' },
      claimsKey: true,
    };
    expect(await settleDebit(db.pool, start, 10)).toEqual(refused);
    expect(await statusOf(start.generationId)).toBe('rejected');
    expect(await settleDebit(db.pool, start, 10)).toEqual(refused);
  });

  it('the concurrency limit counts the account’s generations in progress', async () => {
    // Two of this account's generations are queued (the first two tests).
    const start = startFor();
    expect(await settleDebit(db.pool, start, 2)).toMatchObject({
      outcome: 'rejected',
      error: { code: 'concurrency_limit_exceeded' },
      claimsKey: false,
    });
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 0 });
  });

  it('a price added since this process last saw the model is quoted from the current entry', async () => {
    await settleDebit(db.pool, startFor(), 100); // remembers the entry as it is now
    await setModel(sql.unsafe`
      UPDATE models SET definition = jsonb_set(jsonb_set(jsonb_set(definition,
          '{options,quality,values}', definition->'options'->'quality'->'values' || '["max"]'),
          '{pricing,credits,max}', '9'),
        '{output_size,long_edge_px,max}', '4096')
      WHERE id = 'lumen-lite'`);
    const start = { ...startFor(), input: { prompt: 'a quiet harbour', quality: 'max' } };
    expect(await settleDebit(db.pool, start, 100)).toEqual({ outcome: 'accepted', credits: 9 });
  });

  it('when another attempt accepts the generation between a refusal and its record, the acceptance stands', async () => {
    const broke = await createPaidAccount(db.pool, { oneTime: 1 }); // below the price of 5
    const start = startFor(broke);
    let raced = false;
    // The real database, with one interleaving forced: just before the refusal is recorded (the
    // only maybeOneFirst), the account is topped up and a second attempt admits the generation.
    const interleaved = new Proxy(db.pool, {
      get(target, property, receiver) {
        if (property === 'maybeOneFirst')
          return async (...args: Parameters<CommonQueryMethods['maybeOneFirst']>) => {
            if (!raced) {
              raced = true;
              await grantCredits(db.pool, {
                accountId: broke.accountId,
                pool: 'one_time',
                amount: 50,
                reason: 'test',
              });
              expect(await settleDebit(db.pool, start, 100)).toEqual({ outcome: 'accepted', credits: 5 });
            }
            return target.maybeOneFirst(...args);
          };
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    expect(await settleDebit(interleaved, start, 100)).toEqual({ outcome: 'accepted', credits: 5 });
    expect(raced).toBe(true);
    expect(await statusOf(start.generationId)).toBe('queued');
    expect(await chargesOf(db.pool, start.generationId)).toMatchObject({ debits: 1, net: -5 });
  });

  it('an account that does not exist is an error, not a decision', async () => {
    const start = { ...startFor(), accountId: 'acct_doesNotExist' };
    await expect(settleDebit(db.pool, start, 100)).rejects.toThrow(/no account acct_doesNotExist/);
  });
});
