import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, inject } from 'vitest';
import type { ApiService } from '../../src/api/service.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { createPaidAccount, startTestApi, type TestAccount } from './api.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { startTestWorker, type TestWorker } from './worker.js';

export interface GenerationStack {
  db: TestDatabase;
  worker: TestWorker;
  api: ApiService;
  /** A paid account with one API key. */
  account: TestAccount;
  /** A Temporal client on the shared dev server, for describing workflows and support updates. */
  client: Client;
}

export interface GenerationStackOptions {
  worker?: Parameters<typeof startTestWorker>[1];
  /** Added to the API's configuration (the worker's task queue and storage are already in it). */
  apiEnv?: Record<string, string>;
  account?: Parameters<typeof createPaidAccount>[1];
  /** Stands between the worker's activities and the database (a query counter). */
  workerPool?: (pool: DatabasePool) => DatabasePool;
}

/**
 * What most generation tests stand on, set up once for the file and torn down after it: a fresh
 * database, a real worker on a task queue of its own, the real API, a paid account and a Temporal
 * client. Call it inside describe(); the fields are set by the time the tests (and any later
 * beforeAll) run.
 */
export function useGenerationStack(options: GenerationStackOptions = {}): GenerationStack {
  const stack = {} as GenerationStack;
  let connection: Connection | undefined;
  beforeAll(async () => {
    stack.db = await createTestDatabase();
    stack.worker = await startTestWorker(
      options.workerPool?.(stack.db.pool) ?? stack.db.pool,
      options.worker,
    );
    stack.api = await startTestApi(stack.db.url, { ...stack.worker.apiEnv, ...options.apiEnv });
    stack.account = await createPaidAccount(stack.db.pool, options.account ?? { oneTime: 1000 });
    connection = await Connection.connect({ address: inject('temporalAddress') });
    stack.client = new Client({ connection });
  });
  afterAll(async () => {
    await connection?.close();
    await stack.api?.close();
    await stack.worker?.close();
    await stack.db?.drop();
  });
  return stack;
}
