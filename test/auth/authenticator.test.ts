import { sql, type CommonQueryMethods } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/auth/api-key.js';
import { Authenticator, type AuthOutcome } from '../../src/auth/authenticator.js';
import { RecentHashes } from '../../src/auth/recent-hashes.js';
import { ApiError } from '../../src/vocabulary/errors.js';
import { createPaidAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('Authenticator against a real database', () => {
  let db: TestDatabase;
  /** The real pool, with its key lookups counted (every other call goes straight through). */
  let counted: CommonQueryMethods;
  let lookups = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    counted = new Proxy(db.pool, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          lookups += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  });
  afterAll(async () => {
    await db?.drop();
  });
  const settle = async (outcome: AuthOutcome | Promise<AuthOutcome>) => outcome;

  it('asks PostgreSQL once about an unknown key while it is remembered, and again after', async () => {
    const auth = new Authenticator(counted, {
      ttlMs: 60_000,
      cacheEnabled: () => true,
      unknownKeyTtlMs: 200,
    });
    const guess = generateApiKey();
    const before = lookups;
    for (let i = 0; i < 5; i++)
      expect(await settle(auth.authenticate({ key: guess }))).toMatchObject({
        ok: false,
        error: { code: 'unauthorized', message: 'Unknown API key.' },
      });
    expect(lookups - before).toBe(1);
    await new Promise((r) => setTimeout(r, 250));
    await settle(auth.authenticate({ key: guess }));
    expect(lookups - before).toBe(2);
    // A change to keys forgets it at once: the key may have just been created.
    auth.invalidateAll();
    await settle(auth.authenticate({ key: guess }));
    expect(lookups - before).toBe(3);
  });

  it('with the budget spent, refuses lookups of keys it has not seen work, and looks up those it has', async () => {
    const account = await createPaidAccount(db.pool);
    const auth = new Authenticator(counted, { ttlMs: 60_000, cacheEnabled: () => true, unknownKeyTtlMs: 0 });
    const spent = new ApiError('rate_limited', 'spent', { retryAfterSeconds: 7 });
    expect(await settle(auth.authenticate({ key: account.key }))).toMatchObject({ ok: true });
    auth.invalidateAll(); // as after any change to keys: nothing cached
    const before = lookups;
    expect(auth.authenticate({ key: generateApiKey() }, spent)).toMatchObject({
      ok: false,
      error: spent,
      countsAsFailedAuth: false,
      lookedUp: false,
    });
    expect(lookups).toBe(before);
    expect(await settle(auth.authenticate({ key: account.key }, spent))).toMatchObject({ ok: true });
    expect(lookups - before).toBe(1);
    // Revoked meanwhile: still looked up, and refused for what it is.
    await db.pool.query(sql.unsafe`UPDATE api_keys SET revoked_at = now() WHERE id = ${account.keyId}`);
    auth.invalidateAll();
    expect(await settle(auth.authenticate({ key: account.key }, spent))).toMatchObject({
      ok: false,
      error: { code: 'unauthorized', message: 'This API key has been revoked.' },
    });
  });
});

describe('RecentHashes', () => {
  it('forgets after its TTL and never holds more than its bound', () => {
    let now = 0;
    const hashes = new RecentHashes(1_000, 100, () => now);
    for (let i = 0; i < 10_000; i++) hashes.add(`h${i}`);
    expect(hashes.size).toBe(100);
    expect(hashes.has('h9999')).toBe(true);
    expect(hashes.has('h0')).toBe(false);
    now = 1_000;
    expect(hashes.has('h9999')).toBe(false);
    hashes.add('fresh');
    expect(hashes.size).toBe(1); // the ended ones at the front went with the new one
  });
});
