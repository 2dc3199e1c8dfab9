// Builds dist/esm (ES modules, the CLI included) and dist/cjs (CommonJS, marked by its own
// package.json) with tsc: a library without dependencies needs no bundler, and tsc writes the
// declarations of both.
import { execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { writeVersion } from './version.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

export async function build() {
  await writeVersion();
  await rm(new URL('../dist', import.meta.url), { recursive: true, force: true });
  for (const project of ['tsconfig.json', 'tsconfig.cjs.json'])
    execFileSync(process.execPath, [tsc, '-p', project], { cwd: root, stdio: ['ignore', 2, 2] });
  await mkdir(new URL('../dist/cjs', import.meta.url), { recursive: true });
  await writeFile(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await build();
