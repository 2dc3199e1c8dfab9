import { sql } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSecretSchema } from '../../src/api/schemas.js';
import type { ApiService } from '../../src/api/service.js';
import { webhookSecretOf, webhookSigningSecrets } from '../../src/db/webhook-secrets.js';
import { newWebhookSecret, signWebhook } from '../../src/net/webhook-signing.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('GET /v1/webhooks/secret and POST /v1/webhooks/secret/rotate', () => {
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
  const call = async (method: 'GET' | 'POST', url: string, key = account.key) => {
    const response = await api.app.inject({ method, url, headers: bearer(key) });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    return webhookSecretSchema.parse(response.json());
  };

  it('made on first read, the same on every read after; each account its own', async () => {
    expect(await webhookSigningSecrets(db.pool, account.accountId)).toEqual([]);
    const first = await call('GET', '/v1/webhooks/secret');
    expect(first.previous).toBeNull();
    expect(Buffer.from(first.secret.slice('whsec_'.length), 'base64').length).toBeGreaterThanOrEqual(24);
    expect(await call('GET', '/v1/webhooks/secret')).toEqual(first);
    // Stored as it is (it must sign): what the API shows is what deliveries are signed with.
    expect(await webhookSigningSecrets(db.pool, account.accountId)).toEqual([first.secret]);
    const other = await createPaidAccount(db.pool);
    expect((await call('GET', '/v1/webhooks/secret', other.key)).secret).not.toBe(first.secret);
  });

  it('a rotation makes a new secret and keeps the old one signing for 24 h; after that it is gone', async () => {
    const before = await call('GET', '/v1/webhooks/secret');
    const rotated = await call('POST', '/v1/webhooks/secret/rotate');
    expect(rotated.secret).not.toBe(before.secret);
    expect(rotated.previous?.secret).toBe(before.secret);
    const keptFor = Date.parse(rotated.previous!.expires_at) - Date.now();
    expect(keptFor).toBeGreaterThan(23.9 * 3600_000);
    expect(keptFor).toBeLessThanOrEqual(24 * 3600_000);
    expect(await call('GET', '/v1/webhooks/secret')).toEqual(rotated);
    // Deliveries meanwhile carry both signatures: a receiver on either secret verifies them.
    const secrets = await webhookSigningSecrets(db.pool, account.accountId);
    expect(secrets).toEqual([rotated.secret, before.secret]);
    const body = '{"id":1}';
    const headers = signWebhook({ id: 'msg_x', timestamp: Math.floor(Date.now() / 1000), body }, secrets);
    for (const secret of secrets) expect(new Webhook(secret).verify(body, { ...headers })).toEqual({ id: 1 });
    // Past the 24 h, the previous secret neither shows nor signs.
    await db.pool.query(
      sql.unsafe`UPDATE webhook_secrets SET previous_until = now() - interval '1 second' WHERE account_id = ${account.accountId}`,
    );
    expect((await call('GET', '/v1/webhooks/secret')).previous).toBeNull();
    expect(await webhookSigningSecrets(db.pool, account.accountId)).toEqual([rotated.secret]);
  });

  it('two first reads at once agree on one secret: the read that waited for the other insert returns its row', async () => {
    const { accountId } = await createPaidAccount(db.pool);
    const held = newWebhookSecret();
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let inserted!: () => void;
    const insertedYet = new Promise<void>((resolve) => (inserted = resolve));
    // The first read's insert, held open: the second read's insert waits on it (the same key).
    const first = db.pool.transaction(async (tx) => {
      await tx.query(
        sql.unsafe`INSERT INTO webhook_secrets (account_id, secret) VALUES (${accountId}, ${held})`,
      );
      inserted();
      await committed;
    });
    await insertedYet;
    const second = webhookSecretOf(db.pool, accountId, newWebhookSecret());
    await expect
      .poll(() =>
        db.pool.oneFirst(
          sql.unsafe`SELECT count(*)::int FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%webhook_secrets%'`,
        ),
      )
      .toBe(1);
    commit();
    await first;
    expect((await second).secret).toBe(held);
    expect(await webhookSigningSecrets(db.pool, accountId)).toEqual([held]);
  });

  it('needs a key like every route', async () => {
    const response = await api.app.inject({ method: 'GET', url: '/v1/webhooks/secret' });
    expect(response.statusCode).toBe(401);
  });
});
