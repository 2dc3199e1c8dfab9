import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/project-root.js';

/** Every TypeScript file under `dir`, recursively. */
async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return sources(full);
      return Promise.resolve(entry.name.endsWith('.ts') ? [full] : []);
    }),
  );
  return nested.flat();
}

/**
 * A row schema is a module constant, named in `sql.type(name)`: zod 4 compiles a schema on its
 * first parse, so one built where the query runs (`sql.type(z.object({…}))`, or `.extend(…)`) is
 * built and compiled on every call, 0.1–0.4 ms of CPU per statement (see src/db/pool.ts).
 */
describe('row schemas', () => {
  it('are never built in the call that queries', async () => {
    const built: string[] = [];
    for (const file of await sources(path.join(projectRoot, 'src'))) {
      const text = await readFile(file, 'utf8');
      for (const match of text.matchAll(/sql\.type\(\s*/g)) {
        const argument = text.slice(match.index + match[0].length);
        if (/^[A-Za-z_$][\w$]*\s*,?\s*\)/.test(argument)) continue;
        const line = text.slice(0, match.index).split('\n').length;
        built.push(`${path.relative(projectRoot, file)}:${line}: sql.type(${argument.slice(0, 40)}…`);
      }
    }
    expect(built).toEqual([]);
  });
});
