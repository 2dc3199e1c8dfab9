import { inject } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';
import { startValkeyServer, type RunningValkey } from '../../src/dev/valkey-server.js';

/**
 * A Redis-compatible server of the test file's own (valkey-server, fetched once by the global setup),
 * on a free loopback port unless told one (to start it again where clients expect it). Stop it in
 * afterAll.
 */
export async function startTestRedis(port?: number): Promise<RunningValkey> {
  return startValkeyServer({ binary: inject('redisServerPath'), port: port ?? (await freePort()) });
}
