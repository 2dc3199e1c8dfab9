import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Runs `fetch` unless `done()` already holds, holding the folder `lock` meanwhile (mkdir is atomic),
 * so that two processes starting at once (two test runs, the tests and `npm start`, two checkouts
 * sharing `.tools/`) fetch a tool once: the second waits, then finds it in place. A lock older than
 * `staleMs` was left by a process that died while fetching, and is taken over.
 */
export async function fetchOnce(
  lock: string,
  done: () => Promise<boolean>,
  fetch: () => Promise<void>,
  staleMs: number,
): Promise<void> {
  await mkdir(path.dirname(lock), { recursive: true });
  for (;;) {
    if (await done()) return;
    try {
      await mkdir(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const info = await stat(lock).catch(() => null);
    if (info && Date.now() - info.mtimeMs > staleMs) await rm(lock, { recursive: true, force: true });
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
  try {
    if (!(await done())) await fetch();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}
