import { execFile } from 'node:child_process';
import { stat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'slonik';
import { z } from 'zod';
import { beforeAll } from 'vitest';
import { fetchOnce } from '../../src/dev/fetch-once.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { projectRoot } from '../../src/config/project-root.js';
import { useBatchStack } from '../support/batches.js';
import { useGenerationStack, type GenerationStackOptions } from '../support/stack.js';

/** The generation stack with the API listening on loopback: what the client and gen talk to. */
export function useListeningStack(options: GenerationStackOptions = {}) {
  const stack = useGenerationStack(options);
  const listening = { origin: '', port: 0, baseURL: '' };
  beforeAll(async () => {
    await stack.api.app.listen({ host: '127.0.0.1', port: 0 });
    const address = stack.api.app.server.address() as { port: number };
    listening.port = address.port;
    listening.origin = `http://127.0.0.1:${address.port}`;
    listening.baseURL = `${listening.origin}/v1`;
  });
  return Object.assign(stack, { listening });
}

/** Generations (projection rows, one per workflow) an account has. */
export async function generationCount(pool: DatabasePool, accountId: string): Promise<number> {
  return pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    SELECT count(*)::int AS count FROM generations WHERE account_id = ${accountId}`);
}

export const clientDir = path.join(projectRoot, 'clients', 'typescript');

async function newestMtime(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile())
      newest = Math.max(newest, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
  return newest;
}

/**
 * Builds clients/typescript/dist (npm run build in the package) unless it is newer than every source file;
 * under a lock, so test files starting together build it once.
 */
export async function ensureClientBuilt(): Promise<void> {
  const built = async () => {
    const dist = await newestMtime(path.join(clientDir, 'dist')).catch(() => 0);
    return dist > 0 && dist >= (await newestMtime(path.join(clientDir, 'src')));
  };
  await fetchOnce(
    path.join(projectRoot, '.data', 'client-build.lock'),
    built,
    async () => {
      await promisify(execFile)(process.execPath, ['scripts/build.mjs'], { cwd: clientDir });
    },
    120_000,
  );
}

/** The batch stack (batches wired in its worker) with the API listening on loopback. */
export function useListeningBatchStack(options: Parameters<typeof useBatchStack>[0] = {}) {
  const stack = useBatchStack(options);
  const listening = { origin: '', port: 0, baseURL: '' };
  beforeAll(async () => {
    await stack.api.app.listen({ host: '127.0.0.1', port: 0 });
    const address = stack.api.app.server.address() as { port: number };
    listening.port = address.port;
    listening.origin = `http://127.0.0.1:${address.port}`;
    listening.baseURL = `${listening.origin}/v1`;
  });
  return Object.assign(stack, { listening });
}
