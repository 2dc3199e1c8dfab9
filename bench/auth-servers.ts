import Fastify from 'fastify';
import { createApiService } from '../src/api/service.js';
import { loadConfig } from '../src/config.js';
import { freePort } from '../src/dev/free-port.js';
import { createFundedAccount } from '../src/dev/funded-account.js';
import { createLogger } from '../src/logger.js';
import { randomBase62 } from '../src/ids.js';

/**
 * The two servers bench/auth.ts loads, in one process of their own: our API
 * (authenticated GET /v1/credits, request log on) and a bare Fastify route
 * answering the same body. Sends its parent (bench/auth.ts) their ports and the key once they listen.
 */
/** What bench/auth.ts is told once both servers listen. */
export interface AuthServers {
  apiPort: number;
  barePort: number;
  key: string;
  accountId: string;
}

const config = loadConfig({
  ...process.env,
  TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233', // not used by these routes
  RATE_LIMIT_PER_MINUTE: String(1_000_000_000), // measure the limiter's cost, not its refusals
  LOG_LEVEL: 'warn',
});
const service = await createApiService(config, createLogger('bench-api', 'warn'));
const { accountId, key } = await createFundedAccount(service.pool, {
  email: `bench-${randomBase62(8)}@example.test`,
  oneTime: 1000,
  reason: 'bench',
});
const apiPort = await freePort();
await service.app.listen({ host: '127.0.0.1', port: apiPort });

const bare = Fastify({ logger: false });
bare.get('/bare', () => ({ credits: 1000, subscription_credits: 0, one_time_credits: 1000 }));
const barePort = await freePort();
await bare.listen({ host: '127.0.0.1', port: barePort });

const servers: AuthServers = { apiPort, barePort, key, accountId };
process.send?.(servers);
process.on('SIGTERM', () => {
  void Promise.all([service.close(), bare.close()]).then(() => process.exit(0));
});
