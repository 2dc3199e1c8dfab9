import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';
import { clientDir, ensureClientBuilt } from './client-stack.js';

const run = promisify(execFile);
const bin = (name: string) => path.join(projectRoot, 'node_modules/.bin', name);

describe('the client package: ESM and CJS through exports, no runtime dependencies', () => {
  beforeAll(async () => {
    await ensureClientBuilt();
  }, 180_000);

  it("the version is package.json's: src/version.ts (written by every build) and the built client say it", async () => {
    const { version } = JSON.parse(await readFile(path.join(clientDir, 'package.json'), 'utf8'));
    expect(await readFile(path.join(clientDir, 'src/version.ts'), 'utf8')).toContain(
      `export const clientVersion = '${version}';`,
    );
    const require = createRequire(path.join(projectRoot, 'package.json'));
    expect(require('@generation-service/client').clientVersion).toBe(version);
    expect((await import('@generation-service/client')).clientVersion).toBe(version);
  });

  it('publint finds nothing to fix', async () => {
    const { stdout } = await run(bin('publint'), ['--strict'], { cwd: clientDir });
    expect(stdout).toContain('All good!');
  });

  it('are-the-types-wrong: types resolve for ESM and CJS importers (node10, node16) and bundlers', async () => {
    // node10 (no `exports`) finds ./node through node/package.json.
    const { stdout } = await run(bin('attw'), ['--pack', '.', '--format', 'json'], {
      cwd: clientDir,
    });
    const report = JSON.parse(stdout);
    expect(report.analysis.problems).toEqual([]);
    expect(Object.keys(report.analysis.entrypoints)).toEqual(['.', './node', './package.json']);
  });

  it('require() and import give the same API; the core has no dependency and imports no Node built-in', async () => {
    const require = createRequire(path.join(projectRoot, 'package.json'));
    const cjs = require('@generation-service/client');
    const esm = await import('@generation-service/client');
    expect(Object.keys(cjs).sort()).toEqual(Object.keys(esm).sort());
    expect(typeof cjs.Client).toBe('function');
    expect(typeof require('@generation-service/client/node').downloadAll).toBe('function');

    const manifest = JSON.parse(await readFile(path.join(clientDir, 'package.json'), 'utf8'));
    expect(manifest.dependencies ?? {}).toEqual({});
    const core = (await readdir(path.join(clientDir, 'dist/esm'), { recursive: true })).filter(
      (f) => f.endsWith('.js') && !f.startsWith('node') && !f.startsWith('cli'),
    );
    expect(core.length).toBeGreaterThan(5);
    for (const file of core)
      expect(await readFile(path.join(clientDir, 'dist/esm', file), 'utf8'), file).not.toMatch(
        /from ['"]node:/,
      );
  });
});
