import { spawn } from 'node:child_process';
import { cp, mkdir, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { projectRoot } from '../config/project-root.js';
import type * as WorkflowBundleModule from '../worker/workflow-bundle.js';

/**
 * `npm run build`: the production build in dist/ (or `--out DIR`, inside the project so that
 * node_modules is found from it). tsc emits src/ file by file, so the build keeps src's layout:
 * what a module finds beside itself at run time (SQL migrations, the renderer's child module, the
 * workflows webpack bundles) is where it was, and dependencies stay in node_modules, native ones
 * included (sharp, the Temporal core bridge). Then the workflows are bundled once, here, instead
 * of at every worker start.
 */

const { values } = parseArgs({ options: { out: { type: 'string', default: 'dist' } } });
const out = path.resolve(projectRoot, values.out);
if (path.relative(projectRoot, out).startsWith('..'))
  throw new Error(`--out ${values.out}: the build must sit inside ${projectRoot} to find node_modules`);

const started = performance.now();
await rm(out, { recursive: true, force: true });
await run(createRequire(import.meta.url).resolve('typescript/bin/tsc'), [
  '-p',
  path.join(projectRoot, 'tsconfig.build.json'),
  '--outDir',
  out,
]);
await copyMigrations();
await copyConsoleAssets();
// The build's own bundler module, so the bundle holds the build's workflows (dist/workflows/*.js).
const bundler = (await import(
  pathToFileURL(path.join(out, 'worker', 'workflow-bundle.js')).href
)) as typeof WorkflowBundleModule;
await bundler.buildWorkflowBundle(path.join(out, 'worker', bundler.prebuiltBundleName));
process.stdout.write(
  `Built ${path.relative(projectRoot, out)}/ in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
);

/** The console's templates and browser files, read from beside the compiled console modules. */
async function copyConsoleAssets(): Promise<void> {
  for (const folder of ['views', 'static'])
    await cp(path.join(projectRoot, 'src', 'console', folder), path.join(out, 'console', folder), {
      recursive: true,
    });
}

/** tsc emits only TypeScript; the migrations are read from beside the compiled migrate.js. */
async function copyMigrations(): Promise<void> {
  const from = path.join(projectRoot, 'src', 'db', 'migrations');
  const to = path.join(out, 'db', 'migrations');
  await mkdir(to, { recursive: true });
  for (const file of await readdir(from))
    if (file.endsWith('.sql')) await cp(path.join(from, file), path.join(to, file));
}

function run(script: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: 'inherit', cwd: projectRoot });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(script)} exited with ${code}`)),
    );
  });
}
