import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, createPaidAccount, startTestApi, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { exampleCatalog } from '../support/example-catalog.js';

const model = 'flux-schnell-fastest';

/**
 * The `fastest` policy (issue 29 §1): routes ordered by their measured p50 duration, from the
 * model's generations that succeeded in the last hour (real rows in PostgreSQL), as the API reads
 * them when it starts and every minute after; an unmeasured route keeps its file order after the
 * measured ones. The route chosen is what the quote answers, over 100 requests.
 */
describe('routing policy fastest', () => {
  let db: TestDatabase;
  let account: TestAccount;

  beforeAll(async () => {
    db = await createTestDatabase();
    const [routed] = await exampleCatalog('routed');
    // flux-schnell of routed.json (fal first, Replicate second) under `fastest`.
    const definition = { ...routed!.definition, routing: { policy: 'fastest' as const } };
    await importCatalog(db.pool, 'fastest.json', [
      { label: 'fastest', id: model, sort_order: 52, active: true, definition },
    ]);
    account = await createPaidAccount(db.pool, { oneTime: 10 });
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Succeeded generations served by `provider`, each `ms` from its create to its stored result, `ago` minutes ago. */
  const served = async (provider: string, durationsMs: number[], agoMinutes = 5) => {
    for (const ms of durationsMs)
      await db.pool.query(sql.unsafe`
        INSERT INTO generations (id, account_id, status, model, media_type, credits, provider, submit_sent_at, completed_at, created_at)
        VALUES (${`gen_${randomBase62(20)}`}, ${account.accountId}, 'succeeded', ${model}, 'image', 1, ${provider},
          now() - make_interval(mins => ${agoMinutes}) - make_interval(secs => ${ms / 1000}),
          now() - make_interval(mins => ${agoMinutes}),
          now() - make_interval(mins => ${agoMinutes}) - make_interval(secs => ${ms / 1000 + 1}))`);
  };

  /** The provider each of 100 quotes would try first, counted, on an API started now (it reads the measures then). */
  const firstRoutes = async (): Promise<Record<string, number>> => {
    const api: ApiService = await startTestApi(db.url, {
      FAL_KEY: 'fal-test-key',
      REPLICATE_API_TOKEN: 'r8_test',
    });
    try {
      const counts: Record<string, number> = {};
      for (let i = 0; i < 100; i++) {
        const quote = await api.app.inject({
          method: 'POST',
          url: '/v1/generations/quote',
          headers: { ...bearer(account.key), 'content-type': 'application/json' },
          payload: JSON.stringify({ model, prompt: `request ${i}` }),
        });
        expect(quote.statusCode, quote.body).toBe(200);
        const provider = quote.json<{ provider: string }>().provider;
        counts[provider] = (counts[provider] ?? 0) + 1;
      }
      return counts;
    } finally {
      await api.close();
    }
  };

  it('with nothing measured, file order (fal); a measured route before an unmeasured one; then the lower p50', async () => {
    expect(await firstRoutes()).toEqual({ fal: 100 });

    // Replicate measured (p50 2 s), fal not: Replicate first. A fast fal success two hours ago is out of the window.
    await served('replicate', [1500, 2000, 2500]);
    await served('fal', [100, 100, 100], 120);
    expect(await firstRoutes()).toEqual({ replicate: 100 });

    // fal measured too: its p50 (0.8 s) is below Replicate's, whatever its one slow run (9 s).
    await served('fal', [500, 800, 9000]);
    expect(await firstRoutes()).toEqual({ fal: 100 });

    // Replicate gets faster (p50 of 1500, 2000, 2500, 300, 300, 400, 400: 400 ms): first again, once read.
    await served('replicate', [300, 300, 400, 400]);
    expect(await firstRoutes()).toEqual({ replicate: 100 });
  });
});
