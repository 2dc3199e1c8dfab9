import { readdir } from 'node:fs/promises';
import pg from 'pg';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { z } from 'zod';
import { migrate } from '../../src/admin/migrate.js';
import { createDatabasePool } from '../../src/db/pool.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createAccount } from '../../src/db/accounts-repository.js';
import { grantCredits } from '../../src/db/credits-repository.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('migrations', () => {
  const name = `migrate_${randomBase62(10).toLowerCase()}`;
  const adminUrl = () => inject('pgAdminUrl');
  const url = () => adminUrl().replace(/\/postgres$/, `/${name}`);
  const admin = async (text: string) => {
    const client = new pg.Client({ connectionString: adminUrl() });
    await client.connect();
    await client.query(text).finally(() => client.end());
  };
  beforeAll(() => admin(`CREATE DATABASE ${name}`));
  afterAll(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

  it('apply to an empty database, then a second run (and concurrent runs) change nothing', async () => {
    const files = (await readdir(new URL('../../src/db/migrations/', import.meta.url)))
      .filter((f) => f.endsWith('.sql'))
      .sort();
    expect(files.length).toBeGreaterThanOrEqual(2);
    const first = await migrate(url());
    expect(first.applied).toEqual(files);
    expect(first.seededModels).toHaveLength(5);
    const again = await Promise.all([migrate(url()), migrate(url()), migrate(url())]);
    for (const run of again) expect(run).toEqual({ applied: [], skipped: files, seededModels: [] });
  });

  it('keep catalog rows edited since seeding', async () => {
    const pool = await createDatabasePool(url(), { maximumPoolSize: 1 });
    await pool.query(
      sql.unsafe`UPDATE models SET definition = jsonb_set(definition, '{name}', '"Renamed"') WHERE id = 'lumen-pro'`,
    );
    await migrate(url());
    const definition = await pool.oneFirst(
      sql.type(
        z.object({ name: z.string() }),
      )`SELECT definition->>'name' AS name FROM models WHERE id = 'lumen-pro'`,
    );
    expect(definition).toBe('Renamed');
    await pool.end();
  });

  it('refuse to run when an applied migration file was edited', async () => {
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    await client.query(
      `UPDATE schema_migrations SET sha256 = repeat('0', 64) WHERE name = '0001_foundation.sql'`,
    );
    await client.end();
    await expect(migrate(url())).rejects.toThrow(/changed after it was applied/);
  });
});

describe('ledger constraints', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => db?.drop());

  it('make a second debit or a second refund of one generation impossible, and the ledger append-only', async () => {
    const account = await createAccount(db.pool, { email: 'ledger@example.test' });
    await grantCredits(db.pool, { accountId: account.id, pool: 'one_time', amount: 10, reason: 'test' });
    const debit = (gen: string) =>
      db.pool.oneFirst(sql.type(z.object({ id: z.number() }))`
        INSERT INTO credit_ledger (account_id, kind, generation_id, subscription_delta, one_time_delta)
        VALUES (${account.id}, 'debit', ${gen}, 0, -4) RETURNING id`);
    const refund = (gen: string, of: number) =>
      db.pool.query(sql.unsafe`
        INSERT INTO credit_ledger (account_id, kind, generation_id, refund_of, subscription_delta, one_time_delta)
        VALUES (${account.id}, 'refund', ${gen}, ${of}, 0, 4)`);
    const first = await debit('gen_a');
    await expect(debit('gen_a')).rejects.toMatchObject({ constraint: 'credit_ledger_one_debit' });
    await refund('gen_a', first);
    await expect(refund('gen_a', first)).rejects.toThrow();
    await expect(db.pool.query(sql.unsafe`DELETE FROM credit_ledger WHERE id = ${first}`)).rejects.toThrow(
      /append-only/,
    );
    await expect(
      db.pool.query(sql.unsafe`UPDATE credit_ledger SET one_time_delta = 0 WHERE id = ${first}`),
    ).rejects.toThrow(/append-only/);
    await expect(
      db.pool.query(
        sql.unsafe`UPDATE credit_balances SET one_time_credits = -1 WHERE account_id = ${account.id}`,
      ),
    ).rejects.toThrow();
  });
});
