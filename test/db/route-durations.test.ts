import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recentRouteDurations, routeDurationsQuery } from '../../src/db/route-durations.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The `fastest` policy's read (issue 29 §1): each route's p50 over a model's successes of the last
 * hour, read through the partial index on successes by (model, completed_at): on a table where the
 * read's rows are a small part of many, the plan names it (without it the planner walks another
 * index of generations and filters each of the model's rows, whatever its status or age).
 */
describe('recent route durations', () => {
  let db: TestDatabase;
  let account: TestAccount;
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 10 });
    // 20,000 generations over four models, mostly older or not succeeded; of the 'fast-model'
    // successes of the last hour there are 50 (i % 400 = 0 and 7), served by fal or replicate.
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, status, model, media_type, credits, provider, submit_sent_at, completed_at, created_at)
      SELECT 'gen_' || lpad(i::text, 20, '0'), ${account.accountId},
        CASE WHEN i % 400 IN (0, 7) THEN 'succeeded' WHEN i % 3 = 0 THEN 'failed' ELSE 'succeeded' END,
        CASE WHEN i % 400 IN (0, 7) THEN 'fast-model' ELSE 'model-' || (i % 4) END,
        'image', 1, CASE WHEN i % 2 = 0 THEN 'fal' ELSE 'replicate' END,
        done - make_interval(secs => (1 + i % 400 / 7)::float8), done, done - interval '10 seconds'
      FROM generate_series(1, 20000) AS i,
        LATERAL (SELECT CASE WHEN i % 400 IN (0, 7) THEN now() - interval '5 minutes'
                        ELSE now() - make_interval(days => 1 + i % 30) END AS done) AS t`);
    await db.pool.query(sql.unsafe`ANALYZE generations`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('reads each route’s p50 of the last hour’s successes', async () => {
    expect(await recentRouteDurations(db.pool, ['fast-model'], 60)).toEqual(
      expect.arrayContaining([
        // i % 400 = 0 (even: fal) took 1 s; i % 400 = 7 (odd: replicate) took 2 s.
        { model: 'fast-model', provider: 'fal', p50_ms: 1000, samples: 50 },
        { model: 'fast-model', provider: 'replicate', p50_ms: 2000, samples: 50 },
      ]),
    );
  });

  it('plans an index scan of generations_succeeded_model_completed, not a scan of the table', async () => {
    const query = routeDurationsQuery(['fast-model'], 60);
    const plan = await db.pool.transaction(async (tx) => {
      const rows = await tx.query({ ...sql.unsafe``, sql: `EXPLAIN ${query.sql}`, values: query.values });
      return rows.rows.map((row) => Object.values(row as Record<string, string>)[0]).join('\n');
    });
    expect(plan).toContain('generations_succeeded_model_completed');
    expect(plan).not.toContain('Seq Scan on generations');
  });
});
