// Run by `npm pack` and `npm publish` (prepack): refuses to pack a dist/ that is missing, older than
// a source file, or built for another version than package.json's. It only reads: a build here would
// delete dist/ under whatever else is using it (the tests run gen from it while packing).
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

async function newest(dir) {
  let mtime = 0;
  for (const entry of await readdir(path.join(root, dir), { withFileTypes: true, recursive: true }))
    if (entry.isFile())
      mtime = Math.max(mtime, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
  return mtime;
}

async function oldest(dir) {
  let mtime = Infinity;
  for (const entry of await readdir(path.join(root, dir), { withFileTypes: true, recursive: true }))
    if (entry.isFile())
      mtime = Math.min(mtime, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
  return mtime;
}

const { version } = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));
const problems = [];
for (const format of ['esm', 'cjs']) {
  const built = await readFile(path.join(root, 'dist', format, 'version.js'), 'utf8').catch(() => '');
  if (!built.includes(`'${version}'`) && !built.includes(`"${version}"`))
    problems.push(`dist/${format} is not built for version ${version}`);
}
if (problems.length === 0 && (await oldest('dist')) < (await newest('src')))
  problems.push('dist/ is older than src/');
if (problems.length > 0) {
  process.stderr.write(`${problems.join('; ')}: run \`npm run build\` in this package first.\n`);
  process.exit(1);
}
