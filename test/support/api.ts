import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import { createApiService, type ApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config/service-config.js';
import type { PurchaseKind } from '../../src/db/accounts-repository.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { createFundedAccount, type FundedAccount } from '../../src/dev/funded-account.js';
import { createLogger } from '../../src/process/logger.js';
import { randomBase62 } from '../../src/vocabulary/ids.js';

/** The real API service (pool, change feed, caches, request log) on a test database. */
export async function startTestApi(
  databaseUrl: string,
  env: Record<string, string> = {},
  configure?: (app: FastifyInstance) => void,
): Promise<ApiService> {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    DATABASE_POOL_SIZE: '5',
    // Tests poll fast; the per-key limit is tested where a test sets it.
    RATE_LIMIT_PER_MINUTE: '1000000',
    ...env,
  });
  return createApiService(config, createLogger('api-test', 'silent'), configure);
}

export type TestAccount = FundedAccount;

/** An account that may use the API: a completed purchase, credits (100 one-time unless told), one key. */
export async function createPaidAccount(
  pool: DatabasePool,
  options: { subscription?: number; oneTime?: number; kind?: PurchaseKind } = {},
): Promise<TestAccount> {
  return createFundedAccount(pool, {
    email: `${randomBase62(10)}@example.test`,
    kind: options.kind,
    oneTime: options.oneTime ?? (options.subscription === undefined ? 100 : 0),
    subscription: options.subscription,
    reason: 'test',
  });
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
