import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { projectRoot } from '../../src/config/project-root.js';

/**
 * `npm run test:durations`: writes test/file-seconds.json (the order slow-first-sequencer.ts starts
 * the files in) from the durations vitest kept of its last run here. Run it after a full `npm test`
 * on a quiet machine.
 */
const cacheDir = path.join(projectRoot, 'node_modules', '.vite', 'vitest');
const seconds: Record<string, number> = {};
for (const entry of await readdir(cacheDir, { withFileTypes: true })) {
  if (!entry.isDirectory()) continue;
  const results = JSON.parse(await readFile(path.join(cacheDir, entry.name, 'results.json'), 'utf8')) as {
    projects: Record<string, { files: Record<string, { duration: number }> }>;
  };
  for (const project of Object.values(results.projects))
    for (const [file, { duration }] of Object.entries(project.files))
      if (duration > 0) seconds[file] = Math.round(duration / 100) / 10;
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([, a], [, b]) => b - a));
await writeFile(path.join(projectRoot, 'test', 'file-seconds.json'), `${JSON.stringify(sorted, null, 2)}\n`);
process.stdout.write(`test/file-seconds.json: ${Object.keys(sorted).length} files\n`);
