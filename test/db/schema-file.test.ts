import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderSchema, schemaCommand, schemaFilePath } from '../../src/dev/schema-file.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('src/db/schema.sql', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    // Cloned from the run's template database: every migration applied, as `npm run db:schema` does.
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('is what the migrations make today', async () => {
    const fresh = await renderSchema(db.url);
    // Not an empty rendering: the tables, their parts and the functions are all there.
    expect(fresh).toContain('CREATE TABLE generations (');
    expect(fresh).toContain('CREATE INDEX generations_account_created ON public.generations');
    expect(fresh).toContain('CREATE TRIGGER generations_changed AFTER UPDATE ON generations');
    expect(fresh).toContain('CREATE OR REPLACE FUNCTION public.admit_generation(');
    const committed = await readFile(schemaFilePath, 'utf8');
    expect(
      committed,
      `src/db/schema.sql differs from what the migrations make: run \`${schemaCommand}\` and commit it`,
    ).toBe(fresh);
  });

  it('refuses to leave out a kind of object it cannot show', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`CREATE DOMAIN positive_credits AS integer CHECK (VALUE > 0)`);
      await expect(renderSchema(db.url)).rejects.toThrow(/cannot show type positive_credits \(d\)/);
    } finally {
      await client.query(`DROP DOMAIN positive_credits`);
      await client.end();
    }
  });
});
