import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generationSchema } from '../../src/api/schemas.js';
import type { ApiService } from '../../src/api/service.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';
import { bearer, startTestApi } from '../support/api.js';
import { getGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';

/**
 * Once a POST's generation is admitted it may be charged, so whatever fails after that, the answer
 * is its 202 with the generation: a client without an Idempotency-Key that got an error would post
 * again and pay twice. The failures are PostgreSQL's own: the API under test connects as a role
 * that may not read `generations` (REVOKE), or whose reads of a generation fail once it is no
 * longer queued (a row-level security policy that raises), while the worker writes as the owner.
 */
describe('a charged POST is answered with its generation, never an error', () => {
  const stack = useGenerationStack({ worker: { concurrencyLimit: 20 }, account: { oneTime: 1_000 } });
  const role = `api_${randomBase62(10).toLowerCase()}`;
  let api: ApiService;
  /** DDL as the database's owner (identifiers and a password are no bind parameters). */
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    await admin(`CREATE ROLE ${role} LOGIN PASSWORD '${role}'`);
    await admin(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
    await admin(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
    const url = new URL(stack.db.url);
    url.username = role;
    url.password = role;
    api = await startTestApi(url.toString(), stack.worker.apiEnv);
  });
  afterAll(async () => {
    await api?.close();
    await admin(`DROP OWNED BY ${role}`);
    await admin(`DROP ROLE ${role}`);
  });

  const post = (prompt: string, prefer?: string) =>
    api.app.inject({
      method: 'POST',
      url: '/v1/generations',
      headers: {
        ...bearer(stack.account.key),
        'content-type': 'application/json',
        ...(prefer ? { prefer } : {}),
      },
      payload: JSON.stringify({ model: 'lumen-lite', prompt }),
    });

  /** The POST's answer is the generation, debited once, and the account's list shows it. */
  const expectCharged = async (response: Awaited<ReturnType<typeof post>>) => {
    expect(response.statusCode, response.body).toBe(202);
    const generation = generationSchema.parse(response.json());
    expect(response.headers['x-request-id']).toBe(generation.id);
    expect(await chargesOf(stack.db.pool, generation.id)).toMatchObject({ debits: 1, refunds: 0 });
    const listed = await stack.api.app.inject({
      method: 'GET',
      url: '/v1/generations?limit=100',
      headers: bearer(stack.account.key),
    });
    expect(listed.json().data.map((g: { id: string }) => g.id)).toContain(generation.id);
    return generation;
  };

  it('when the generation cannot be read after its start, the 202 carries it as admitted', async () => {
    await admin(`REVOKE SELECT ON generations FROM ${role}`);
    try {
      for (const prefer of [undefined, 'wait=30']) {
        const response = await post('unreadable [sim:slow=60]', prefer);
        const generation = await expectCharged(response);
        // Nothing that could be read to wait on: answered at once, and no Preference-Applied says otherwise.
        expect(response.headers['preference-applied']).toBeUndefined();
        expect(response.headers['retry-after']).toBe('2');
        // As admission wrote it: the same generation a read shows, but for the provider, which the
        // submit writes once its create leaves (after admission).
        const read = await getGeneration(stack.api, stack.account.key, generation.id);
        expect(read.provider).toBe('simulated');
        expect(generation).toEqual({ ...read, provider: null });
      }
    } finally {
      await admin(`GRANT SELECT ON generations TO ${role}`);
    }
  });

  it('when the generation cannot be read after the wait, the 202 carries it as last seen', async () => {
    await admin(`CREATE FUNCTION ${role}_refuse() RETURNS boolean LANGUAGE plpgsql
      AS $$ BEGIN RAISE EXCEPTION 'the test refuses this read'; END $$`);
    await admin(`ALTER TABLE generations ENABLE ROW LEVEL SECURITY`);
    await admin(`CREATE POLICY ${role}_queued_only ON generations FOR SELECT TO ${role}
      USING (CASE WHEN status = 'queued' THEN true ELSE ${role}_refuse() END)`);
    try {
      // Read (queued) when admitted; done in about 2 s, after which each read raises.
      const response = await post('read, then refused [sim:slow=2]', 'wait=5');
      const generation = await expectCharged(response);
      expect(response.headers['preference-applied']).toBe('wait=5');
      expect(generation.status).toBe('queued');
      const now = await getGeneration(stack.api, stack.account.key, generation.id);
      expect(now.status).toBe('succeeded');
    } finally {
      await admin(`DROP POLICY ${role}_queued_only ON generations`);
      await admin(`ALTER TABLE generations DISABLE ROW LEVEL SECURITY`);
      await admin(`DROP FUNCTION ${role}_refuse()`);
    }
  });
});
