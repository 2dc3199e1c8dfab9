import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';
import { createApiService, type ApiService } from '../../src/api/service.js';
import { loadConfig } from '../../src/config.js';
import { createAccount, recordPurchase, type PurchaseKind } from '../../src/db/accounts-repository.js';
import { createApiKey } from '../../src/auth/api-key-issuer.js';
import { grantCredits } from '../../src/db/credits-repository.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { createLogger } from '../../src/logger.js';
import { randomBase62 } from '../../src/ids.js';

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

export interface TestAccount {
  accountId: string;
  keyId: string;
  key: string;
}

/** An account that may use the API: a completed purchase, credits, one key. */
export async function createPaidAccount(
  pool: DatabasePool,
  options: { subscription?: number; oneTime?: number; kind?: PurchaseKind } = {},
): Promise<TestAccount> {
  const account = await createAccount(pool, { email: `${randomBase62(10)}@example.test` });
  await recordPurchase(pool, {
    accountId: account.id,
    kind: options.kind ?? 'credit_pack',
    status: 'completed',
  });
  const oneTime = options.oneTime ?? (options.subscription === undefined ? 100 : 0);
  if (oneTime > 0)
    await grantCredits(pool, { accountId: account.id, pool: 'one_time', amount: oneTime, reason: 'test' });
  if (options.subscription) {
    await grantCredits(pool, {
      accountId: account.id,
      pool: 'subscription',
      amount: options.subscription,
      reason: 'test',
    });
  }
  const { key, record } = await createApiKey(pool, { accountId: account.id });
  return { accountId: account.id, keyId: record.id, key };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
