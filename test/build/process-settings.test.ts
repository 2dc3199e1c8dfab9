import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jemallocOptions } from '../../src/dev/native-allocator.js';
import { projectRoot } from '../../src/config/project-root.js';
import { workerNodeOptions } from '../../src/worker/node-options.js';

const read = (file: string) => readFile(path.join(projectRoot, file), 'utf8');

/**
 * The worker's memory at rest (bench:idle) depends on settings given outside our code: Node's options
 * on its command line and jemalloc's in the environment. The benches and `npm start` take them from
 * src/; production takes them from the Dockerfile, docker-compose.yml and `npm run worker`. Each copy
 * must say the same, or production runs a worker nobody measured.
 */
describe('the worker’s process settings, wherever it is started', () => {
  it('Node’s options: `npm run worker` and docker-compose’s worker give workerNodeOptions', async () => {
    const pkg = JSON.parse(await read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.worker).toBe(['node', ...workerNodeOptions, 'dist/worker/main.js'].join(' '));
    // The worker service's command line in docker-compose.yml (a flow sequence of quoted strings).
    const compose = await read('docker-compose.yml');
    const service = compose.slice(compose.indexOf('\n  worker:\n'));
    const command = /^ {4}command: \[(.*)\]$/m.exec(service)?.[1];
    expect(command?.split(', ').map((word) => word.replace(/^'|'$/g, ''))).toEqual([
      'node',
      ...workerNodeOptions,
      'dist/worker/main.js',
    ]);
  });

  it('jemalloc’s options: the Dockerfile sets the MALLOC_CONF the benches and `npm start` use', async () => {
    const settings = [...(await read('Dockerfile')).matchAll(/^ENV MALLOC_CONF=(\S+)$/gm)].map((m) => m[1]);
    expect(settings).toEqual([jemallocOptions]);
    expect((await read('Dockerfile')).match(/^ENV LD_PRELOAD=.*libjemalloc\.so\.2$/m)).not.toBeNull();
  });
});
