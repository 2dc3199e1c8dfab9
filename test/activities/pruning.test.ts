import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPruningActivities } from '../../src/activities/pruning-activities.js';
import { recordGrant } from '../../src/db/oauth-grants-repository.js';
import { newId, randomBase62 } from '../../src/vocabulary/ids.js';
import { ensurePruningSchedule, pruningScheduleId } from '../../src/temporal/pruning-schedule.js';
import type { PruningOptions } from '../../src/workflows/contracts/pruning.js';
import { createPaidAccount, type TestAccount } from '../support/api.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { startTestWorker, type TestWorker } from '../support/worker.js';

const DAY = 24 * 3600 * 1000;
const keepNothingLonger: PruningOptions = {
  batchSize: 1000,
  maxBatches: 10,
  requestLogRetentionMs: 90 * DAY,
  rejectedRetentionMs: 180 * DAY,
  simProviderJobRetentionMs: 7 * DAY,
};

/** What grows without end is pruned on a schedule, in bounded batches, against real PostgreSQL. */
describe('pruning', () => {
  let db: TestDatabase;
  let account: TestAccount;
  beforeAll(async () => {
    db = await createTestDatabase();
    account = await createPaidAccount(db.pool, { oneTime: 10 });
  });
  afterAll(async () => {
    await db?.drop();
  });

  const prune = (options: Partial<PruningOptions> = {}) =>
    new MockActivityEnvironment().run(createPruningActivities({ db: db.pool }).pruneRecords, {
      ...keepNothingLonger,
      ...options,
    });
  const ago = (days: number) => new Date(Date.now() - days * DAY).toISOString();
  const ids = async (query: ReturnType<typeof sql.unsafe>) =>
    (await db.pool.anyFirst(query)) as readonly unknown[] as string[];

  async function logRequest(path: string, createdAt: string) {
    await db.pool.query(sql.unsafe`
      INSERT INTO api_request_log (account_id, api_key_id, request_id, method, path, status_code, duration_ms, created_at)
      VALUES (${account.accountId}, ${account.keyId}, ${newId('req')}, 'GET', ${path}, 200, 1, ${createdAt})`);
  }
  async function generation(id: string, status: string, createdAt: string) {
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, created_at)
      VALUES (${id}, ${account.accountId}, ${account.keyId}, ${status}, 'lumen-lite', 'image', ${createdAt})`);
  }
  async function keyRecord(key: string, generationId: string, heldUntil: string) {
    await db.pool.query(sql.unsafe`
      INSERT INTO idempotency_keys (api_key_id, idempotency_key, generation_id, fingerprint, held_until)
      VALUES (${account.keyId}, ${key}, ${generationId}, 'f', ${heldUntil})`);
  }
  async function simJob(token: string, submittedAt: string) {
    await db.pool.query(sql.unsafe`
      INSERT INTO sim_provider_jobs (token, job_id, model, media_type, prompt, options, images, long_edge_px,
                                     directives, submitted_at, ready_at)
      VALUES (${token}, ${`job_${token}`}, 'lumen-lite', 'image', 'p', '{}', '[]', 64, '{}', ${submittedAt}, ${submittedAt})`);
  }

  it('deletes what is past its retention, at most batchSize × maxBatches rows per table and run', async () => {
    // Oldest first, as they are written.
    for (const [i, days] of [120, 110, 100, 95, 91, 89, 1].entries())
      await logRequest(`/v1/r${i}`, ago(days));
    for (const [i, days] of [400, 300, 181, 179].entries())
      await generation(`gen_rejected${i}`, 'rejected', ago(days));
    await generation('gen_oldsuccess', 'succeeded', ago(400));
    for (const [i, days] of [3, 2, 1].entries()) await keyRecord(`past-${i}`, 'gen_oldsuccess', ago(days));
    await keyRecord('held', 'gen_oldsuccess', ago(-1));
    for (const [i, days] of [30, 9, 8, 6].entries()) await simJob(`tok_${i}`, ago(days));

    expect(await prune({ batchSize: 2, maxBatches: 1 })).toEqual({
      requestLog: 2,
      rejectedGenerations: 2,
      keyRecords: 2,
      simProviderJobs: 2,
      consoleRecords: 0,
      unfinished: ['keyRecords', 'requestLog', 'rejectedGenerations', 'simProviderJobs'],
    });
    expect(await prune({ batchSize: 2, maxBatches: 5 })).toEqual({
      requestLog: 3,
      rejectedGenerations: 1,
      keyRecords: 1,
      simProviderJobs: 1,
      consoleRecords: 0,
      unfinished: [],
    });
    expect(await prune()).toEqual({
      requestLog: 0,
      rejectedGenerations: 0,
      keyRecords: 0,
      simProviderJobs: 0,
      consoleRecords: 0,
      unfinished: [],
    });

    expect(await ids(sql.unsafe`SELECT path AS id FROM api_request_log ORDER BY id`)).toEqual([
      '/v1/r5',
      '/v1/r6',
    ]);
    // Rejected rows within the key horizon stay; other generations are never pruned.
    expect(await ids(sql.unsafe`SELECT id FROM generations ORDER BY id`)).toEqual([
      'gen_oldsuccess',
      'gen_rejected3',
    ]);
    expect(await ids(sql.unsafe`SELECT idempotency_key AS id FROM idempotency_keys`)).toEqual(['held']);
    expect(await ids(sql.unsafe`SELECT token AS id FROM sim_provider_jobs ORDER BY token`)).toEqual([
      'tok_3',
    ]);
  });

  it('keeps a rejected generation past its retention while an Idempotency-Key still names it', async () => {
    await db.pool.query(sql.unsafe`
      INSERT INTO generations (id, account_id, api_key_id, status, model, media_type, created_at, idempotency_key)
      VALUES ('gen_refusedheld', ${account.accountId}, ${account.keyId}, 'rejected', 'lumen-lite', 'image',
              ${ago(400)}, 'still-held')`);
    // The horizon was set when the retention was longer than the one pruning is given now.
    await keyRecord('still-held', 'gen_refusedheld', ago(-30));
    const stillThere = async () =>
      (await ids(sql.unsafe`SELECT id FROM generations WHERE id = 'gen_refusedheld'`)).length === 1;
    await prune({ rejectedRetentionMs: 10 * DAY });
    expect(await stillThere()).toBe(true);
    await db.pool.query(
      sql.unsafe`UPDATE idempotency_keys SET held_until = ${ago(1)} WHERE idempotency_key = 'still-held'`,
    );
    await prune({ rejectedRetentionMs: 10 * DAY });
    expect(await stillThere()).toBe(false);
  });

  it('a retention of 0 keeps its table whole', async () => {
    await logRequest('/v1/ancient', ago(1000));
    await generation('gen_ancientrejection', 'rejected', ago(1000));
    await simJob('tok_ancient', ago(1000));
    expect(
      await prune({ requestLogRetentionMs: 0, rejectedRetentionMs: 0, simProviderJobRetentionMs: 0 }),
    ).toMatchObject({ requestLog: 0, rejectedGenerations: 0, simProviderJobs: 0 });
    expect(await ids(sql.unsafe`SELECT path AS id FROM api_request_log WHERE path = '/v1/ancient'`)).toEqual([
      '/v1/ancient',
    ]);
    expect(await prune()).toMatchObject({ requestLog: 1, rejectedGenerations: 1, simProviderJobs: 1 });
  });

  it('deletes console sessions idle past 12 hours, expired sign-in links, day-old form marks and expired OAuth rows', async () => {
    const hours = (h: number) => new Date(Date.now() - h * 3600 * 1000).toISOString();
    const hex = (n: number) => n.toString(16).padStart(64, '0');
    for (const [i, idle] of [13, 11].entries())
      await db.pool.query(sql.unsafe`
        INSERT INTO console_sessions (id_sha256, account_id, api_key_id, last_seen_at)
        VALUES (${hex(i + 1)}, ${account.accountId}, ${account.keyId}, ${hours(idle)})`);
    for (const [i, expiresIn] of [-1, 0.2].entries())
      await db.pool.query(sql.unsafe`
        INSERT INTO console_sign_in_links (token_sha256, account_id, api_key_id, expires_at)
        VALUES (${hex(i + 11)}, ${account.accountId}, ${account.keyId}, ${hours(-expiresIn)})`);
    for (const [i, age] of [25, 23].entries())
      await db.pool.query(sql.unsafe`
        INSERT INTO console_form_uses (form_sha256, account_id, used_at)
        VALUES (${hex(i + 21)}, ${account.accountId}, ${hours(age)})`);
    // The authorization server's rows: an expired token goes, a live one and one without expiry stay.
    for (const [i, expiresIn] of [-1, 1, null].entries())
      await db.pool.query(sql.unsafe`
        INSERT INTO oauth_store (model, id_sha256, payload, expires_at)
        VALUES ('AccessToken', ${hex(i + 31)}, '{}', ${expiresIn === null ? null : hours(-expiresIn)})`);
    // Registered clients: one a week old that no grant uses goes; a newer one, and one in use, stay.
    for (const [i, age] of [24 * 8, 24 * 6, 24 * 8].entries())
      await db.pool.query(sql.unsafe`
        INSERT INTO oauth_store (model, id_sha256, payload, created_at)
        VALUES ('Client', ${hex(i + 41)}, ${sql.jsonb({ client_id: `client-${i}` })}, ${hours(age)})`);
    await recordGrant(db.pool, {
      grantId: 'grant-in-use',
      accountId: account.accountId,
      clientId: 'client-2',
      clientName: null,
      displayName: 'In use',
      resource: 'http://127.0.0.1:8080/v1/mcp',
      scope: 'mcp',
    });
    expect(await prune()).toMatchObject({ consoleRecords: 5, unfinished: [] });
    expect(await ids(sql.unsafe`SELECT id_sha256 AS id FROM oauth_store ORDER BY id_sha256`)).toEqual([
      hex(32),
      hex(33),
      hex(42),
      hex(43),
    ]);
    expect(await ids(sql.unsafe`SELECT id_sha256 AS id FROM console_sessions`)).toEqual([hex(2)]);
    expect(await ids(sql.unsafe`SELECT token_sha256 AS id FROM console_sign_in_links`)).toEqual([hex(12)]);
    expect(await ids(sql.unsafe`SELECT form_sha256 AS id FROM console_form_uses`)).toEqual([hex(22)]);
    expect(await prune()).toMatchObject({ consoleRecords: 0 });
  });

  describe('the schedule', () => {
    let worker: TestWorker;
    let connection: Connection;
    let client: Client;
    beforeAll(async () => {
      worker = await startTestWorker(db.pool);
      connection = await Connection.connect({ address: inject('temporalAddress') });
      client = new Client({ connection });
    });
    afterAll(async () => {
      await connection?.close();
      await worker?.close();
    });

    it('is created or brought up to date by the worker, runs the pruning, and goes when the interval is 0', async () => {
      const settings = { taskQueue: worker.taskQueue, intervalMs: 3_600_000, options: keepNothingLonger };
      const handle = client.schedule.getHandle(pruningScheduleId(worker.taskQueue));
      try {
        expect(await ensurePruningSchedule(client, settings)).toMatch(/created|updated/);
        expect(await ensurePruningSchedule(client, { ...settings, intervalMs: 600_000 })).toBe('updated');
        const described = await handle.describe();
        expect(described.spec.intervals?.[0]?.every).toBe(600_000);
        expect(described.action).toMatchObject({ taskQueue: worker.taskQueue, args: [keepNothingLonger] });

        await logRequest(`/v1/${randomBase62(6)}`, ago(365));
        await handle.trigger();
        await expect
          .poll(async () => (await handle.describe()).info.recentActions.length, { timeout: 10_000 })
          .toBeGreaterThan(0);
        const run = (await handle.describe()).info.recentActions[0]!.action.workflow;
        const report = await client.workflow.getHandle(run.workflowId, run.firstExecutionRunId).result();
        expect(report).toMatchObject({ requestLog: 1, unfinished: [] });
      } finally {
        expect(await ensurePruningSchedule(client, { ...settings, intervalMs: 0 })).toBe('removed');
      }
      expect(await ensurePruningSchedule(client, { ...settings, intervalMs: 0 })).toBe('off');
    });
  });
});
