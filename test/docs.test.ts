import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandNames } from '../src/admin/commands.js';

/**
 * The documentation as a new user meets it: every relative link goes somewhere (the file, and the
 * heading its #anchor names), and every command it tells them to type names something that exists.
 */
const root = path.resolve(import.meta.dirname, '..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return markdownFiles(full);
    return name.endsWith('.md') ? [full] : [];
  });
}
const pages = [path.join(root, 'README.md'), ...markdownFiles(path.join(root, 'docs'))];
const read = (file: string) => readFileSync(file, 'utf8');

/** The text outside fenced code blocks, and the blocks themselves with their info strings. */
function split(markdown: string): { prose: string; blocks: Array<{ info: string; body: string }> } {
  const blocks: Array<{ info: string; body: string }> = [];
  const prose = markdown.replace(/^```([^\n]*)\n([\s\S]*?)^```$/gm, (_, info: string, body: string) => {
    blocks.push({ info: info.trim(), body });
    return '';
  });
  return { prose, blocks };
}

/** GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of split(markdown).prose.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every `npm run …` a reader is told to type: in shell blocks, and in inline code in the text. */
function commandsIn(markdown: string): string[] {
  const { prose, blocks } = split(markdown);
  const shell = blocks.filter((b) => ['sh', 'bash', 'shell'].includes(b.info.split(/\s/)[0]!));
  const inline = [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
  return [...shell.flatMap((b) => b.body.split('\n')), ...inline].filter((line) =>
    /\bnpm run |\bnpx vitest run /.test(line),
  );
}

/**
 * Scripts the docs describe that another branch (i18-runtime: production builds, `npm run temporal`)
 * brings. Until it is merged they may be missing; once a script exists it must leave this list
 * (the test says so), so the list empties itself and cannot hide a real mistake for long.
 */
describe('documentation', () => {
  it('is README.md and docs/, with the v1 contract in the repository', () => {
    expect(pages.map((p) => path.relative(root, p))).toEqual(
      expect.arrayContaining(['README.md', 'docs/api/spec.md', 'docs/configuration.md', 'docs/support.md']),
    );
    expect(read(path.join(root, 'README.md')).split('\n').length).toBeLessThanOrEqual(200);
    for (const page of pages) expect(read(page), path.relative(root, page)).not.toContain('../shared/');
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      const { prose } = split(read(page));
      for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue; // https:, mailto:
        const [file, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = file === '' ? page : path.resolve(path.dirname(page), decodeURIComponent(file));
        const where = `${path.relative(root, page)} → ${target}`;
        if (!existsSync(resolved)) broken.push(`${where}: no such file`);
        else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(read(resolved)).has(anchor))
          broken.push(`${where}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('tells readers to run only scripts, admin commands and test files that exist', () => {
    const scripts = Object.keys(
      (JSON.parse(read(path.join(root, 'package.json'))) as { scripts: Record<string, string> }).scripts,
    );
    const admin = commandNames();
    const wrong: string[] = [];
    let checked = 0;
    for (const page of pages) {
      for (const line of commandsIn(read(page))) {
        const where = `${path.relative(root, page)}: ${line.trim()}`;
        for (const [, script] of line.matchAll(/\bnpm run (?:--silent )?([\w:.-]+)/g)) {
          checked++;
          if (!scripts.includes(script!)) wrong.push(`${where}: no script ${script}`);
        }
        for (const [, command] of line.matchAll(/\bnpm run (?:dev:)?admin -- ([a-z][\w-]*)/g))
          if (!admin.includes(command!)) wrong.push(`${where}: no admin command ${command}`);
        for (const [, file] of line.matchAll(/\bnpx vitest run (test\/\S+\.test\.ts)/g))
          if (!existsSync(path.join(root, file!))) wrong.push(`${where}: no test file ${file}`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(wrong).toEqual([]);
  });
});
