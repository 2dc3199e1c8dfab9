import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createDatabasePool, type DatabasePool } from '../../src/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

describe('the database pool', () => {
  let db: TestDatabase;
  let pool: DatabasePool;
  beforeAll(async () => {
    db = await createTestDatabase();
    pool = await createDatabasePool(db.url, { maximumPoolSize: 2 });
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('hands a released connection on without a reset round trip (session state survives)', async () => {
    const single = await createDatabasePool(db.url, { maximumPoolSize: 1 });
    try {
      const pid = () =>
        single.oneFirst(sql.type(z.object({ pid: z.number() }))`SELECT pg_backend_pid() AS pid`);
      const first = await pid();
      await single.query(sql.unsafe`SELECT set_config('app.marker', 'kept', false)`);
      expect(await pid()).toBe(first);
      // DISCARD ALL on release would have reset it to ''.
      const marker = await single.oneFirst(
        sql.type(z.object({ marker: z.string() }))`SELECT current_setting('app.marker', true) AS marker`,
      );
      expect(marker).toBe('kept');
    } finally {
      await single.end();
    }
  });

  it('serves many more concurrent queries and transactions than it has connections', async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, async (_, i) => {
        if (i % 2 === 0) return pool.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT ${i}::int AS n`);
        return pool.transaction(async (tx) => {
          await tx.query(sql.unsafe`SELECT 1`);
          return tx.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT ${i}::int AS n`);
        });
      }),
    );
    const failures = results.filter((r) => r.status === 'rejected');
    expect(failures).toEqual([]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : null))).toEqual(
      Array.from({ length: 40 }, (_, i) => i),
    );
  });
});
