import Fastify from 'fastify';
import { createApiService } from '../src/api/service.js';
import { loadConfig } from '../src/config/service-config.js';
import { freePort } from '../src/dev/free-port.js';
import { createFundedAccount } from '../src/dev/funded-account.js';
import { createLogger } from '../src/process/logger.js';
import { randomBase62 } from '../src/vocabulary/ids.js';

/**
 * The servers bench/auth.ts loads, in one process of their own: our API twice
 * (authenticated GET /v1/credits, request log on), its limits counted in memory
 * and in Redis (BENCH_REDIS_URL), and a bare Fastify route answering the same
 * body. Only one of them is loaded at a time. Sends its parent (bench/auth.ts)
 * their ports and the key once they listen.
 */
/** What bench/auth.ts is told once the servers listen. */
export interface AuthServers {
  /** Limits counted in this process's memory (no REDIS_URL). */
  apiPort: number;
  /** Limits counted in Redis (REDIS_URL). */
  redisApiPort: number;
  barePort: number;
  key: string;
  keyId: string;
  accountId: string;
}

const redisUrl = process.env.BENCH_REDIS_URL;
if (!redisUrl) throw new Error('BENCH_REDIS_URL is required (bench/auth.ts sets it)');
const env = {
  ...process.env,
  TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233', // not used by these routes
  RATE_LIMIT_PER_MINUTE: String(1_000_000_000), // measure the limiter's cost, not its refusals
  LOG_LEVEL: 'warn',
};
const service = await createApiService(
  loadConfig({ ...env, REDIS_URL: '' }),
  createLogger('bench-api', 'warn'),
);
const redisService = await createApiService(
  loadConfig({ ...env, REDIS_URL: redisUrl }),
  createLogger('bench-api-redis', 'warn'),
);
const { accountId, key, keyId } = await createFundedAccount(service.pool, {
  email: `bench-${randomBase62(8)}@example.test`,
  oneTime: 1000,
  reason: 'bench',
});
const apiPort = await freePort();
await service.app.listen({ host: '127.0.0.1', port: apiPort });
const redisApiPort = await freePort();
await redisService.app.listen({ host: '127.0.0.1', port: redisApiPort });

const bare = Fastify({ logger: false });
bare.get('/bare', () => ({ credits: 1000, subscription_credits: 0, one_time_credits: 1000 }));
const barePort = await freePort();
await bare.listen({ host: '127.0.0.1', port: barePort });

const servers: AuthServers = { apiPort, redisApiPort, barePort, key, keyId, accountId };
process.send?.(servers);
process.on('SIGTERM', () => {
  void Promise.all([service.close(), redisService.close(), bare.close()]).then(() => process.exit(0));
});
