import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';

const run = promisify(execFile);

/** The majors package.json's `engines` names (`^22.19.0 || ^24.0.0`): what we build, test and run on. */
async function supportedMajors(): Promise<number[]> {
  const pkg = JSON.parse(await readFile(path.join(projectRoot, 'package.json'), 'utf8')) as {
    engines: { node: string };
  };
  return [...pkg.engines.node.matchAll(/\^(\d+)\./g)].map((match) => Number(match[1]));
}

const major = (version: string) => Number(/^v?(\d+)\./.exec(version)![1]);

/**
 * The tests run on a supported Node even where the system's is older (this kind of machine has
 * Node 20): npm puts the `node` dev dependency first on PATH for every script, so `npm test`,
 * `npx vitest` and the processes the tests start (with process.execPath, or `node` from PATH) get it.
 */
describe('the Node the tests run on', () => {
  it('is one that engines names, with 24 among them', async () => {
    const majors = await supportedMajors();
    expect(majors).toContain(24);
    expect(majors).toContain(major(process.version));
  });

  it('is the one child processes get, by process.execPath and by `node` on PATH', async () => {
    const majors = await supportedMajors();
    const byExecPath = await run(process.execPath, ['-p', 'process.version']);
    const byPath = await run('node', ['-p', 'process.version']);
    expect(byExecPath.stdout.trim()).toBe(process.version);
    expect(majors).toContain(major(byPath.stdout.trim()));
  });
});
