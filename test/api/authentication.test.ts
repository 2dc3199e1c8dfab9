import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { API_KEY_LENGTH, API_KEY_PREFIX, generateApiKey } from '../../src/auth/api-key.js';
import { createAccount, recordPurchase } from '../../src/db/accounts-repository.js';
import { revokeApiKey } from '../../src/db/api-keys-repository.js';
import { grantCredits } from '../../src/db/credits-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { runAdminCli } from '../support/admin.js';

describe('authentication (spec: Authentication 1–12)', () => {
  let db: TestDatabase;
  let api: ApiService;
  let alice: TestAccount;
  let ipCounter = 0;
  /** A distinct client address per test, so the failed-auth budget of one test never leaks into another. */
  const nextIp = () => `10.0.0.${++ipCounter}`;
  const get = (headers: Record<string, string>, remoteAddress = nextIp(), url = '/v1/credits') =>
    api.app.inject({ method: 'GET', url, headers, remoteAddress });

  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db.url);
    alice = await createPaidAccount(db.pool, { oneTime: 40, subscription: 10 });
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('1. accepts Authorization: Bearer and x-api-key', async () => {
    const viaBearer = await get(bearer(alice.key));
    const viaHeader = await get({ 'x-api-key': alice.key });
    expect(viaBearer.statusCode).toBe(200);
    expect(viaHeader.statusCode).toBe(200);
    expect(viaBearer.json()).toEqual({ credits: 50, subscription_credits: 10, one_time_credits: 40 });
  });

  it('2. keys are 41 characters with the fixed live prefix', () => {
    const key = generateApiKey();
    expect(key).toHaveLength(API_KEY_LENGTH);
    expect(key.startsWith(API_KEY_PREFIX)).toBe(true);
    expect(alice.key).toMatch(/^gsk_live_[0-9A-Za-z]{32}$/);
  });

  it('2/7. a malformed key (wrong length, wrong prefix, bad characters) is 401 unauthorized', async () => {
    for (const bad of [
      alice.key.slice(0, -1),
      `gsk_test_${alice.key.slice(9)}`,
      `${alice.key.slice(0, -1)}!`,
      'Bearer',
      '',
    ]) {
      const response = await get({ authorization: `Bearer ${bad}` });
      expect(response.statusCode, bad).toBe(401);
      expect(response.json().error.code).toBe('unauthorized');
    }
    expect((await get({ authorization: `Basic ${alice.key}` })).statusCode).toBe(401);
  });

  it('2/7. a malformed key is told the form a key has; a key without "Bearer" in Authorization is refused', async () => {
    const malformed = await get({ authorization: `Bearer ${alice.key.slice(0, -1)}` });
    expect(malformed.statusCode).toBe(401);
    expect(malformed.headers['www-authenticate']).toBe('Bearer');
    expect(malformed.json().error.message).toBe(
      'Malformed API key: expected gsk_live_ followed by 32 letters and digits (41 characters).',
    );
    // The spec has two forms (Bearer, x-api-key); a bare key in Authorization is neither.
    const bare = await get({ authorization: alice.key });
    expect(bare.statusCode).toBe(401);
    expect(bare.json().error).toEqual({
      code: 'unauthorized',
      message: expect.stringContaining('"Bearer <API_KEY>"'),
    });
    expect((await get({ authorization: `bearer ${alice.key}` })).statusCode).toBe(200);
  });

  it('7. missing and unknown keys are 401 unauthorized in the envelope', async () => {
    const missing = await get({});
    expect(missing.statusCode).toBe(401);
    expect(missing.json()).toEqual({
      error: { code: 'unauthorized', message: expect.stringContaining('Missing API key') },
    });
    const unknown = await get(bearer(generateApiKey()));
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().error.code).toBe('unauthorized');
  });

  it('3. keys need a completed paid purchase and a positive balance', async () => {
    const account = await createAccount(db.pool, { email: 'nokey@example.test' });
    await expect(createApiKey(db.pool, { accountId: account.id })).rejects.toMatchObject({
      reason: 'payment_required',
    });
    await recordPurchase(db.pool, {
      accountId: account.id,
      kind: 'monthly_subscription',
      status: 'completed',
    });
    await expect(createApiKey(db.pool, { accountId: account.id })).rejects.toMatchObject({
      reason: 'insufficient_credits',
    });
    await grantCredits(db.pool, { accountId: account.id, pool: 'subscription', amount: 1, reason: 'test' });
    await expect(createApiKey(db.pool, { accountId: account.id })).resolves.toMatchObject({
      record: { account_id: account.id },
    });
  });

  it('4. an account has at most 5 active keys, whoever inserts them', async () => {
    const bob = await createPaidAccount(db.pool);
    const more = [];
    for (let i = 0; i < 4; i++) more.push(await createApiKey(db.pool, { accountId: bob.accountId }));
    await expect(createApiKey(db.pool, { accountId: bob.accountId })).rejects.toMatchObject({
      reason: 'too_many_keys',
    });
    // The database enforces it too, for writers other than this service (the web app).
    await expect(
      db.pool.query(sql.unsafe`INSERT INTO api_keys (id, account_id, key_sha256, display_prefix)
        VALUES ('key_direct', ${bob.accountId}, ${'a'.repeat(64)}, 'gsk_live_xxxx')`),
    ).rejects.toMatchObject({ constraint: 'api_keys_active_limit' });
    await revokeApiKey(db.pool, more[0]!.record.id);
    await expect(createApiKey(db.pool, { accountId: bob.accountId })).resolves.toBeTruthy();
  });

  it('5. revocation is immediate: a key used a moment ago fails on its very next request', async () => {
    const carol = await createPaidAccount(db.pool);
    expect((await get(bearer(carol.key))).statusCode).toBe(200); // now cached
    await runAdminCli(['revoke-key', '--key', carol.keyId], db.url);
    const after = await get(bearer(carol.key));
    expect(after.statusCode).toBe(401);
    expect(after.json().error).toEqual({ code: 'unauthorized', message: 'This API key has been revoked.' });
  });

  it('6. a key acts as its account and reads only that account', async () => {
    const dave = await createPaidAccount(db.pool, { oneTime: 7 });
    expect((await get(bearer(dave.key))).json()).toEqual({
      credits: 7,
      subscription_credits: 0,
      one_time_credits: 7,
    });
    expect((await get(bearer(alice.key))).json().credits).toBe(50);
  });

  it('8. disabled API access is 403 api_access_disabled; restored, unrevoked keys work and revoked stay invalid', async () => {
    const erin = await createPaidAccount(db.pool);
    const second = await createApiKey(db.pool, { accountId: erin.accountId });
    expect((await get(bearer(erin.key))).statusCode).toBe(200);
    await runAdminCli(['disable-access', '--account', erin.accountId], db.url);
    const disabled = await get(bearer(erin.key));
    expect(disabled.statusCode).toBe(403);
    expect(disabled.json().error.code).toBe('api_access_disabled');
    await revokeApiKey(db.pool, second.record.id);
    await runAdminCli(['enable-access', '--account', erin.accountId], db.url);
    expect((await get(bearer(erin.key))).statusCode).toBe(200);
    const revoked = await get(bearer(second.key));
    expect(revoked.statusCode).toBe(401);
  });

  it('9. a free account, even with gift credits, is 403 payment_required; pending purchases do not count', async () => {
    const account = await createAccount(db.pool, { email: 'gifted@example.test' });
    await recordPurchase(db.pool, { accountId: account.id, kind: 'credit_pack', status: 'completed' });
    await grantCredits(db.pool, { accountId: account.id, pool: 'one_time', amount: 5, reason: 'test' });
    const { key } = await createApiKey(db.pool, { accountId: account.id });
    // Turn it into a free account: the paid purchase is refunded; a gift and a pending pack remain.
    await db.pool.query(
      sql.unsafe`UPDATE purchases SET status = 'refunded' WHERE account_id = ${account.id}`,
    );
    await recordPurchase(db.pool, { accountId: account.id, kind: 'gift', status: 'completed', credits: 100 });
    await recordPurchase(db.pool, { accountId: account.id, kind: 'yearly_subscription', status: 'pending' });
    const response = await get(bearer(key));
    expect(response.statusCode).toBe(403);
    expect(response.json().error.code).toBe('payment_required');
    await recordPurchase(db.pool, {
      accountId: account.id,
      kind: 'yearly_subscription',
      status: 'completed',
    });
    expect((await get(bearer(key))).statusCode).toBe(200);
  });

  it('10. 20 failed authentications per minute per IP, then 429 rate_limited for every failed attempt from it', async () => {
    const ip = nextIp();
    for (let i = 0; i < 20; i++) expect((await get(bearer(generateApiKey()), ip)).statusCode).toBe(401);
    const limited = await get(bearer(generateApiKey()), ip);
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Every failed attempt from it, whatever its kind, is 429 until the window ends.
    expect((await get({}, ip)).statusCode).toBe(429);
    expect((await get(bearer('gsk_live_short'), ip)).statusCode).toBe(429);
    expect((await get({ authorization: alice.key }, ip)).statusCode).toBe(429);
    const revoked = await createPaidAccount(db.pool);
    await revokeApiKey(db.pool, revoked.keyId);
    expect((await get(bearer(revoked.key), ip)).statusCode).toBe(429);
  });

  it("10. a valid key is not locked out by others' failures from its address (a shared NAT)", async () => {
    const ip = nextIp();
    for (let i = 0; i < 21; i++) await get(bearer(generateApiKey()), ip);
    expect((await get(bearer(generateApiKey()), ip)).statusCode).toBe(429);
    const ok = await get(bearer(alice.key), ip);
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-ratelimit-remaining']).toBeDefined();
    expect((await get({ 'x-api-key': alice.key }, ip)).statusCode).toBe(200);
    // A recognised key refused for its account's state gets that answer, not the address's 429.
    const disabled = await createPaidAccount(db.pool);
    await db.pool.query(
      sql.unsafe`UPDATE accounts SET api_access_enabled = false WHERE id = ${disabled.accountId}`,
    );
    const refused = await get(bearer(disabled.key), ip);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('api_access_disabled');
    // Bad keys are still refused: the valid ones let through spent none of the window.
    expect((await get(bearer(generateApiKey()), ip)).statusCode).toBe(429);
  });

  it('11. with a zero balance, reading still works', async () => {
    const frank = await createPaidAccount(db.pool, { oneTime: 1 });
    await db.pool.query(
      sql.unsafe`UPDATE credit_balances SET one_time_credits = 0 WHERE account_id = ${frank.accountId}`,
    );
    const response = await get(bearer(frank.key));
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ credits: 0, subscription_credits: 0, one_time_credits: 0 });
  });
});
