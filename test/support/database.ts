import pg from 'pg';
import { inject } from 'vitest';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { createDatabasePool, type DatabasePool } from '../../src/db/pool.js';

export interface TestDatabase {
  url: string;
  pool: DatabasePool;
  drop(): Promise<void>;
}

/** A fresh database for one test file, cloned from the migrated template. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `test_${randomBase62(12).toLowerCase()}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name} TEMPLATE ${inject('pgTemplate')}`);
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  const pool = await createDatabasePool(url, { maximumPoolSize: 5 });
  return {
    url,
    pool,
    async drop() {
      await pool.end();
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function adminQuery(adminUrl: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    // Two files cloning the template at the same moment collide ("source database is being accessed"); retry.
    for (let attempt = 0; ; attempt++) {
      try {
        await client.query(text);
        return;
      } catch (error) {
        if (attempt >= 20 || !String(error).includes('is being accessed by other users')) throw error;
        await new Promise((r) => setTimeout(r, 100 + attempt * 50));
      }
    }
  } finally {
    await client.end();
  }
}
