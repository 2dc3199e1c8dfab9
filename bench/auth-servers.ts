import Fastify from 'fastify';
import { createApiService } from '../src/api/service.js';
import { loadConfig } from '../src/config.js';
import { createAccount, recordPurchase } from '../src/db/accounts-repository.js';
import { createApiKey } from '../src/auth/api-key-issuer.js';
import { grantCredits } from '../src/db/credits-repository.js';
import { freePort } from '../src/dev/free-port.js';
import { createLogger } from '../src/logger.js';
import { randomBase62 } from '../src/ids.js';

/**
 * The two servers bench/auth.ts loads, in one process of their own: our API
 * (authenticated GET /v1/credits, request log on) and a bare Fastify route
 * answering the same body. Prints one JSON line with their ports and the key.
 */
const config = loadConfig({
  ...process.env,
  TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233', // not used by these routes
  RATE_LIMIT_PER_MINUTE: String(1_000_000_000), // measure the limiter's cost, not its refusals
  LOG_LEVEL: 'warn',
});
const service = await createApiService(config, createLogger('bench-api', 'warn'));
const account = await createAccount(service.pool, { email: `bench-${randomBase62(8)}@example.test` });
await recordPurchase(service.pool, { accountId: account.id, kind: 'credit_pack', status: 'completed' });
await grantCredits(service.pool, { accountId: account.id, pool: 'one_time', amount: 1000, reason: 'bench' });
const { key } = await createApiKey(service.pool, { accountId: account.id });
const apiPort = await freePort();
await service.app.listen({ host: '127.0.0.1', port: apiPort });

const bare = Fastify({ logger: false });
bare.get('/bare', () => ({ credits: 1000, subscription_credits: 0, one_time_credits: 1000 }));
const barePort = await freePort();
await bare.listen({ host: '127.0.0.1', port: barePort });

console.log(JSON.stringify({ apiPort, barePort, key, accountId: account.id }));
process.on('SIGTERM', () => {
  void Promise.all([service.close(), bare.close()]).then(() => process.exit(0));
});
