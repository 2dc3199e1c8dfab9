import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Runs the admin CLI from src (`npm run dev:admin -- …`) as a person would, in its own process, against
 * `databaseUrl`, on the Node that runs the tests.
 */
export async function runAdminCli(
  args: string[],
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/admin/cli.ts', ...args], {
      env: { ...process.env, DATABASE_URL: databaseUrl, ...env },
    });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const e = error as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}
