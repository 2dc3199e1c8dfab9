import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';
import { startFaultyFront, type FaultyFront } from '../support/faulty-front.js';
import { clientDir, ensureClientBuilt, useListeningStack } from './client-stack.js';

const run = promisify(execFile);

/** npm, offline: the client has no runtime dependency, so its tarball installs from nothing but itself. */
const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

/** Packs the package in `dir` into `into` (prepack checks dist/); the tarball's path and the files it holds. */
async function pack(dir: string, into: string) {
  const { stdout } = await npm(['pack', '--json', '--pack-destination', into], dir);
  const [report] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  return { tarball: path.join(into, report!.filename), files: report!.files.map((f) => f.path) };
}

/** A project of its own in a temporary folder, with the tarball installed as a user would. */
async function scratchProject(tarball: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'client-scratch-'));
  await writeFile(path.join(dir, 'package.json'), '{ "name": "scratch", "private": true }\n');
  await npm(['install', tarball, '--ignore-scripts'], dir);
  return dir;
}

const esmScript = `
import { Client, clientVersion } from '@generation-service/client';
import { downloadAll } from '@generation-service/client/node';
const generation = await new Client().generations.run({ model: 'lumen-pro', prompt: 'packed, as ESM', aspect_ratio: '16:9' });
const files = await downloadAll(generation, 'out-esm');
console.log(JSON.stringify({ status: generation.status, clientVersion, files: files.map((f) => [f.size, f.width, f.height]), from: import.meta.resolve('@generation-service/client') }));
`;

const cjsScript = `
const { Client, clientVersion } = require('@generation-service/client');
const { downloadAll } = require('@generation-service/client/node');
(async () => {
  const generation = await new Client().generations.run({ model: 'lumen-pro', prompt: 'packed, as CommonJS', aspect_ratio: '16:9' });
  const files = await downloadAll(generation, 'out-cjs');
  console.log(JSON.stringify({ status: generation.status, clientVersion, files: files.map((f) => [f.size, f.width, f.height]), from: require.resolve('@generation-service/client') }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

describe('the client as people install it: npm pack, then the tarball in a project of its own (real stack)', () => {
  const stack = useListeningStack({ account: { oneTime: 200 }, worker: { simDelayMs: 200 } });
  let work: string;
  let front: FaultyFront;
  const scratches: string[] = [];
  beforeAll(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'client-pack-'));
    await ensureClientBuilt();
    // A front with no faults: it only records what the API receives (the User-Agent).
    front = await startFaultyFront({ host: '127.0.0.1', port: stack.listening.port }, []);
  }, 180_000);
  afterAll(async () => {
    await front?.close();
    for (const dir of [work, ...scratches]) await rm(dir, { recursive: true, force: true });
  });

  it('the workspace packs and installs offline; a generation runs through it as ESM, as CommonJS and with its gen', async () => {
    const manifest = JSON.parse(await readFile(path.join(clientDir, 'package.json'), 'utf8'));
    expect(manifest).toMatchObject({ license: 'Apache-2.0' });
    expect(manifest).not.toHaveProperty('private');

    const { tarball, files } = await pack(clientDir, work);
    for (const file of ['LICENSE', 'README.md', 'package.json', 'bin/gen.js', 'node/package.json'])
      expect(files).toContain(file);
    for (const file of ['index.js', 'index.d.ts', 'node/index.js', 'cli/main.js'])
      expect(files).toContain(`dist/esm/${file}`);
    for (const file of ['index.js', 'index.d.ts', 'node/index.js', 'package.json'])
      expect(files).toContain(`dist/cjs/${file}`);
    expect(files.filter((f) => f.startsWith('src/') || f.startsWith('scripts/'))).toEqual([]);
    expect(await readFile(path.join(clientDir, 'LICENSE'), 'utf8')).toContain(
      'Apache License\n                           Version 2.0, January 2004',
    );

    const scratch = await scratchProject(tarball);
    scratches.push(scratch);
    await writeFile(path.join(scratch, 'run.mjs'), esmScript);
    await writeFile(path.join(scratch, 'run.cjs'), cjsScript);
    const env = {
      PATH: process.env.PATH!,
      HOME: scratch,
      GENERATION_API_KEY: stack.account.key,
      GENERATION_BASE_URL: `${front.origin}/v1`,
    };
    const installed = path.join(scratch, 'node_modules', '@generation-service', 'client');
    for (const script of ['run.mjs', 'run.cjs']) {
      const { stdout } = await run(process.execPath, [script], { cwd: scratch, env });
      const result = JSON.parse(stdout);
      expect(result, script).toMatchObject({
        status: 'succeeded',
        clientVersion: manifest.version,
        files: [[expect.any(Number), 1024, 576]],
      });
      expect(result.from.replace(/^file:\/\//, '').startsWith(installed), result.from).toBe(true);
    }
    expect(
      front.requests
        .filter((r) => r.line.startsWith('POST /v1/generations '))
        .map((r) => /user-agent: (.*)/.exec(r.head)?.[1]),
    ).toEqual([
      `generation-service-client/${manifest.version}`,
      `generation-service-client/${manifest.version}`,
    ]);

    const { stdout: credits } = await run(path.join(scratch, 'node_modules', '.bin', 'gen'), ['credits'], {
      cwd: scratch,
      env,
    });
    expect(JSON.parse(credits)).toMatchObject({ credits: expect.any(Number) });
  }, 60_000);

  it('the version is set in one place: a copy with another version in package.json packs a client that says so', async () => {
    const copy = path.join(work, 'bumped');
    await mkdir(copy);
    for (const entry of await readdir(clientDir))
      if (!['dist', 'node_modules'].includes(entry))
        await cp(path.join(clientDir, entry), path.join(copy, entry), { recursive: true });
    await symlink(path.join(projectRoot, 'node_modules'), path.join(copy, 'node_modules'));
    const manifest = JSON.parse(await readFile(path.join(copy, 'package.json'), 'utf8'));
    await writeFile(
      path.join(copy, 'package.json'),
      JSON.stringify({ ...manifest, version: '9.8.7-test.1' }, null, 2),
    );

    // Not built yet: packing is refused rather than shipping no dist/ or another version's.
    await expect(pack(copy, work)).rejects.toThrow(
      /is not built for version 9\.8\.7-test\.1[^]*npm run build/,
    );
    await run(process.execPath, ['scripts/build.mjs'], { cwd: copy });
    const { tarball } = await pack(copy, work);
    const scratch = await scratchProject(tarball);
    scratches.push(scratch);
    const script = `
      const { Client, clientVersion } = require('@generation-service/client');
      new Client({ apiKey: 'k', fetch: async (_url, init) => { console.log(JSON.stringify({ clientVersion, userAgent: new Headers(init.headers).get('user-agent') })); return new Response('{"credits":1,"subscription_credits":0,"one_time_credits":1}', { headers: { 'content-type': 'application/json' } }); } }).credits.get();`;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: scratch });
    expect(JSON.parse(stdout)).toEqual({
      clientVersion: '9.8.7-test.1',
      userAgent: 'generation-service-client/9.8.7-test.1',
    });
  }, 60_000);
});
