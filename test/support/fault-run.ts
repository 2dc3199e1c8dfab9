import type { ApiService } from '../../src/api/service.js';
import { sql } from 'slonik';
import { z } from 'zod';
import { bearer, type TestAccount } from './api.js';
import type { TestDatabase } from './database.js';
import { workerProcesses } from './worker-process.js';
import { workerRotation } from './worker-rotation.js';

/**
 * The settings a fault run (mixed-chaos, routed-pause) gives its API and workers besides the
 * providers': its own task queue and results folder, quick provider polls, room for every POST.
 */
export function faultRunEnv(taskQueue: string, storageDir: string): Record<string, string> {
  return {
    TEMPORAL_TASK_QUEUE: taskQueue,
    STORAGE_DIR: storageDir,
    RESULT_BASE_URL: 'http://127.0.0.1:9',
    PROVIDER_POLL_INTERVAL_MS: '250',
    // The faults are the run's doing, not an outage that should turn requests away; and every
    // fault must reach the generations of its time, which a breaker opened by them would skip on
    // its own probe's timing.
    PROVIDER_DOWN_AFTER_FAILURES: '100000',
    CONCURRENT_GENERATIONS_PER_ACCOUNT: '1000',
  };
}

/**
 * A fault run's worker processes on `env` (faultRunEnv and the providers'), reaching the
 * loopback fakes, and the rotation that kills and replaces them.
 */
export function faultRunWorkers(env: () => Record<string, string>, db: () => TestDatabase) {
  const workers = workerProcesses(() => ({
    ...env(),
    DATABASE_URL: db().url,
    OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
    LOG_LEVEL: 'warn',
  }));
  return { workers, rotation: workerRotation(workers) };
}

/**
 * The account's credits as GET /v1/credits answers them, and the sum of its ledger rows: after a
 * fault run both equal the initial credits less what its generations' ledgers spent.
 */
export async function creditsAndLedger(
  api: ApiService,
  db: TestDatabase,
  account: TestAccount,
): Promise<{ credits: number; ledger: number }> {
  const answer = await api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(account.key) });
  const ledger = await db.pool.oneFirst(sql.type(z.object({ total: z.number() }))`
    SELECT coalesce(sum(subscription_delta + one_time_delta), 0)::int AS total FROM credit_ledger
    WHERE account_id = ${account.accountId}`);
  return { credits: z.object({ credits: z.number() }).parse(answer.json()).credits, ledger };
}

/** A fault run's generations (its account's): what the checks read of each. */
export function generationsOf(db: TestDatabase, account: TestAccount) {
  return db.pool.any(
    sql.type(
      z.object({
        id: z.string(),
        key: z.string(),
        status: z.string(),
        needs_review: z.boolean(),
        provider: z.string().nullable(),
        output_prefix: z.string().nullable(),
        input_prefix: z.string().nullable(),
        content_expired: z.boolean(),
      }),
    )`SELECT id, idempotency_key AS key, status, needs_review, provider, output_prefix, input_prefix,
        content_expired
      FROM generations WHERE account_id = ${account.accountId}`,
  );
}
