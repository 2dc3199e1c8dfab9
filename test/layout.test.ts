import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The house as a newcomer reads it (issue 48 §2, §3): folders that say what they hold, one word per
 * concept, and the Layout section of docs/developing.md that names every room. Reads files only.
 */
const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'src');

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}
const relative = (file: string) => path.relative(root, file);
const layout = (() => {
  const page = readFileSync(path.join(root, 'docs/developing.md'), 'utf8');
  return page.slice(page.indexOf('## Layout'), page.indexOf('## Migrations and the schema file'));
})();

describe('the layout of src/', () => {
  it('names every folder and file directly in src/, and those of src/generations/, in docs/developing.md', () => {
    const top = readdirSync(src).map((name) => `src/${name}`);
    const generations = readdirSync(path.join(src, 'generations'))
      .filter((name) => statSync(path.join(src, 'generations', name)).isDirectory())
      .map((name) => `${name}/`);
    const named = (name: string) =>
      new RegExp(`(^|\\s)${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=[\\s),.;:]|$)`, 'm').test(layout);
    const missing = [...top, ...generations].filter((name) => !named(name));
    expect(missing, 'not in the Layout section of docs/developing.md').toEqual([]);
  });

  it('keeps no file beside a folder of nearly its name (src/generation.ts beside src/generations/)', () => {
    const crowded = tsFiles(src).filter((file) => {
      const stem = file.slice(0, -'.ts'.length);
      return [stem, `${stem}s`].some((folder) => statSync(folder, { throwIfNoEntry: false })?.isDirectory());
    });
    expect(crowded.map(relative)).toEqual([]);
  });

  it("calls the workflow's step the debit: no file or export of src/workflows or src/db is named for admission", () => {
    const named = tsFiles(path.join(src, 'workflows'))
      .concat(tsFiles(path.join(src, 'db')))
      .flatMap((file) => {
        const exports = [
          ...readFileSync(file, 'utf8').matchAll(/^export (?:async )?\w+ (\w*[Aa]dmission\w*)/gm),
        ];
        return [
          ...(/admission/i.test(path.basename(file)) ? [relative(file)] : []),
          ...exports.map((found) => `${relative(file)}: ${found[1]}`),
        ];
      });
    expect(named).toEqual([]);
  });

  it('names only HTTP route modules *-routes.ts (a provider route is failover, catalog or plan)', () => {
    const httpRoutes = ['src/api/routes/', 'src/console/routes/'];
    const strays = tsFiles(src)
      .map(relative)
      .filter((file) => file.endsWith('-routes.ts') && !httpRoutes.some((folder) => file.startsWith(folder)));
    expect(strays).toEqual([]);
  });

  it('declares every activity contract in src/workflows/contracts/', () => {
    const contracts = path.join(src, 'workflows', 'contracts');
    const elsewhere = tsFiles(path.join(src, 'workflows'))
      .filter((file) => !file.startsWith(contracts))
      .flatMap((file) =>
        [...readFileSync(file, 'utf8').matchAll(/^export interface (\w+Activities)\b/gm)].map(
          (found) => `${relative(file)}: ${found[1]}`,
        ),
      );
    expect(elsewhere).toEqual([]);
  });
});
