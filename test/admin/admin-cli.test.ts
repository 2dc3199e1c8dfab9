import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/auth/api-key.js';
import { UsageError } from '../../src/admin/command.js';
import { runAdminCommand } from '../../src/admin/commands.js';
import { sql } from 'slonik';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { runAdminCli } from '../support/admin.js';

describe('admin command line', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db?.drop());
  const admin = (...argv: string[]) => runAdminCommand(argv, db.pool);

  it('takes an account from creation through purchase, credits, keys, access and display', async () => {
    const created = await admin('create-account', '--email', 'ops@example.test', '--name', 'Ops');
    const account = (created.json as { id: string }).id;
    expect(account).toMatch(/^acct_/);
    expect(created.text[0]).toContain(account);

    await expect(admin('create-key', '--account', account)).rejects.toMatchObject({
      reason: 'payment_required',
    });
    const gift = await admin('record-purchase', '--account', account, '--kind', 'gift', '--credits', '50');
    expect(gift.json).toMatchObject({
      purchase: { kind: 'gift', status: 'completed' },
      balance: { one_time_credits: 50 },
    });
    await expect(admin('create-key', '--account', account)).rejects.toMatchObject({
      reason: 'payment_required',
    });

    const sub = await admin(
      'record-purchase',
      '--account',
      'ops@example.test',
      '--kind',
      'monthly_subscription',
      '--credits',
      '100',
    );
    expect(sub.json).toMatchObject({
      balance: { credits: 150, subscription_credits: 100, one_time_credits: 50 },
    });
    const pending = await admin(
      'record-purchase',
      '--account',
      account,
      '--kind',
      'credit_pack',
      '--status',
      'pending',
      '--credits',
      '999',
    );
    expect(pending.json).toMatchObject({ balance: { credits: 150 } });
    const granted = await admin(
      'grant-credits',
      '--account',
      account,
      '--pool',
      'one_time',
      '--amount',
      '5',
      '--reason',
      'goodwill',
    );
    expect(granted.json).toEqual({ credits: 155, subscription_credits: 100, one_time_credits: 55 });

    const keys: Array<{ id: string; key: string }> = [];
    for (let i = 0; i < 5; i++)
      keys.push(
        (await admin('create-key', '--account', account, '--name', `k${i}`)).json as {
          id: string;
          key: string;
        },
      );
    expect(keys[0]!.key).toMatch(/^gsk_live_[0-9A-Za-z]{32}$/);
    await expect(admin('create-key', '--account', account)).rejects.toMatchObject({
      reason: 'too_many_keys',
    });
    // Only the hash is stored.
    const stored = await db.pool.any(
      sql.type(
        z.object({ key_sha256: z.string() }),
      )`SELECT key_sha256 FROM api_keys WHERE account_id = ${account}`,
    );
    expect(stored.map((r) => r.key_sha256).sort()).toEqual(keys.map((k) => hashApiKey(k.key)).sort());
    const dump = JSON.stringify(await db.pool.any(sql.unsafe`SELECT * FROM api_keys`));
    for (const k of keys) expect(dump).not.toContain(k.key);

    const revoked = await admin('revoke-key', '--key', keys[0]!.id);
    expect(revoked.json).toMatchObject({ id: keys[0]!.id, revoked_at: expect.any(String) });
    await admin('disable-access', '--account', account);
    const shown = await admin('show-account', '--account', account);
    expect(shown.json).toMatchObject({
      account: { api_access_enabled: false, has_paid_purchase: true },
      balance: { credits: 155 },
    });
    expect((shown.json as { keys: unknown[] }).keys).toHaveLength(5);
    expect(shown.text.join('\n')).toMatch(/API access: DISABLED/);
    await admin('enable-access', '--account', account);
    expect(
      (
        (await admin('show-account', '--account', account)).json as {
          account: { api_access_enabled: boolean };
        }
      ).account.api_access_enabled,
    ).toBe(true);
  });

  it('explains bad usage', async () => {
    await expect(admin('nope')).rejects.toBeInstanceOf(UsageError);
    await expect(admin('grant-credits', '--account', 'x', '--pool', 'gold', '--amount', '1')).rejects.toThrow(
      /--pool must be one of/,
    );
    await expect(admin('create-account')).rejects.toThrow(/--email is required/);
    // A value may start with a dash (a grant id is random base64url); a value forgotten is still refused.
    await expect(admin('revoke-app', '--grant', '-wzM6PhhcOum7iuSczhMIdJ6W')).rejects.toMatchObject({
      code: 'not_found',
      message: 'No connected app -wzM6PhhcOum7iuSczhMIdJ6W (see apps --account).',
    });
    await expect(admin('revoke-app', '--grant', '--json')).rejects.toBeInstanceOf(UsageError);
    await expect(
      admin('grant-credits', '--account', 'x', '--pool', 'one_time', '--amount', '0'),
    ).rejects.toThrow(/positive whole number/);
  });

  it('runs as a command with --json output and meaningful exit codes', async () => {
    const created = await runAdminCli(['create-account', '--email', 'cli@example.test', '--json'], db.url);
    expect(created.code).toBe(0);
    const account = JSON.parse(created.stdout) as { id: string };
    expect(account.id).toMatch(/^acct_/);
    const refused = await runAdminCli(['create-key', '--account', account.id, '--json'], db.url);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout)).toEqual({
      error: { code: 'payment_required', message: expect.any(String) },
    });
    const unknown = await runAdminCli(['show-account', '--account', 'nobody@example.test'], db.url);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no account nobody@example.test');
    expect((await runAdminCli(['frobnicate'], db.url)).code).toBe(2);
  }, 90_000); // spawns the CLI several times, each a fresh tsx start
});
