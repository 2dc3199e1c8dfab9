import { freePort } from '../../src/dev/free-port.js';
import { startValkeyServer, valkeyServerPath, type RunningValkey } from '../../src/dev/valkey-server.js';

/**
 * A Redis-compatible server of the test file's own (valkey-server, fetched once per checkout by the first
 * file that starts one, so runs of files that need none fetch nothing),
 * on a free loopback port unless told one (to start it again where clients expect it). Stop it in
 * afterAll.
 */
export async function startTestRedis(port?: number): Promise<RunningValkey> {
  return startValkeyServer({ binary: await valkeyServerPath(), port: port ?? (await freePort()) });
}
