import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UsageError } from '../../src/admin/command.js';
import { runAdminCommand } from '../../src/admin/commands.js';
import { compileModel } from '../../src/catalog/catalog-cache.js';
import { modelDefinitionSchema } from '../../src/catalog/catalog-entry.js';
import { CatalogFileRefused } from '../../src/catalog/catalog-file.js';
import { defaultCatalog } from '../../src/catalog/default-catalog.js';
import { runAdminCli } from '../support/admin.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';

const examplesDir = 'catalog/examples';
/** Whatever example files there are: each provider's engineer adds one. */
const examples = readdirSync(examplesDir).filter((name) => name.endsWith('.json'));

interface FileEntry {
  id: string;
  sort_order: number;
  active?: boolean;
  definition: Record<string, any>;
}

/** The example simulated model, to vary or break. */
async function sketch(): Promise<FileEntry> {
  const file = JSON.parse(await readFile(join(examplesDir, 'simulated.json'), 'utf8')) as {
    models: FileEntry[];
  };
  return structuredClone(file.models[0]!);
}

const storedRow = z.object({
  id: z.string(),
  media_type: z.string(),
  definition: z.unknown(),
  sort_order: z.number(),
  active: z.boolean(),
  updated_at: z.string(),
});

describe('npm run admin -- import-catalog FILE', () => {
  let db: TestDatabase;
  let dir: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
  });
  afterAll(async () => {
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const admin = (...argv: string[]) => runAdminCommand(argv, db.pool);
  const models = () => db.pool.any(sql.type(storedRow)`SELECT * FROM models ORDER BY id`);
  let written = 0;
  /** Writes `content` (JSON unless a string) to a file of its own and returns its path. */
  const fileWith = async (content: unknown) => {
    const path = join(dir, `catalog-${++written}.json`);
    await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  };
  /** The import is refused; returns its problems after checking the models table did not change. */
  const refusedProblems = async (path: string) => {
    const before = await models();
    const error: unknown = await admin('import-catalog', path).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CatalogFileRefused);
    expect((error as Error).message).toContain(`${path}: nothing was imported`);
    expect(await models()).toEqual(before);
    return (error as CatalogFileRefused).problems;
  };

  it('has an example file on the simulated provider', () => {
    expect(examples).toContain('simulated.json');
  });

  it.each(examples)(
    'accepts catalog/examples/%s, stores every entry as checked, and again changes nothing',
    async (name) => {
      const path = join(examplesDir, name);
      const file = JSON.parse(await readFile(path, 'utf8')) as { models: FileEntry[] };
      const ids = file.models.map((m) => m.id);
      const first = (await admin('import-catalog', path)).json as Record<string, string[]>;
      expect([...first.added!, ...first.updated!, ...first.unchanged!].sort()).toEqual([...ids].sort());
      const stored = new Map((await models()).map((row) => [row.id, row]));
      for (const entry of file.models) {
        const row = stored.get(entry.id)!;
        const definition = modelDefinitionSchema.parse(entry.definition);
        expect(row).toMatchObject({
          media_type: definition.media_type,
          sort_order: entry.sort_order,
          active: entry.active ?? true,
        });
        expect(row.definition).toEqual(JSON.parse(JSON.stringify(definition)));
        // What the API builds from it (request schema, JSON Schema, price) builds.
        expect(() => compileModel({ id: entry.id, ...definition })).not.toThrow();
      }
      const again = await admin('import-catalog', path);
      expect(again.json).toEqual({ added: [], updated: [], unchanged: ids });
      // Not written again: updated_at has not moved.
      for (const row of await models()) if (ids.includes(row.id)) expect(row).toEqual(stored.get(row.id));
    },
  );

  it('adds new models, updates changed ones, and leaves the rest (and models not in the file) alone', async () => {
    const lumenLite = (await models()).find((row) => row.id === 'lumen-lite')!;
    const one = await sketch();
    const two = { ...(await sketch()), id: 'sketch-2', sort_order: 61, active: false };
    await admin('import-catalog', await fileWith({ models: [one] }));
    const before = (await models()).find((row) => row.id === 'sketch-1')!;
    one.definition.pricing.credits.large = 3;
    one.sort_order = 65;
    const result = await admin('import-catalog', await fileWith({ models: [one, two] }));
    expect(result.json).toEqual({ added: ['sketch-2'], updated: ['sketch-1'], unchanged: [] });
    expect(result.text[0]).toMatch(/: 1 added, 1 updated, 0 unchanged\.$/);
    expect(result.text).toContain(
      'Models not in the file are left as they are. Running API processes pick up the change at once.',
    );
    const after = new Map((await models()).map((row) => [row.id, row]));
    expect(after.get('sketch-1')).toMatchObject({
      sort_order: 65,
      definition: { pricing: { credits: { large: 3 } } },
    });
    expect(Date.parse(after.get('sketch-1')!.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    expect(after.get('sketch-2')).toMatchObject({ active: false, sort_order: 61 });
    expect(after.get('lumen-lite')).toEqual(lumenLite);
    expect([...after.keys()]).toEqual(expect.arrayContaining(defaultCatalog.map((m) => m.id)));
  });

  it('refuses an unknown provider, an unmapped option, a missing price, a duplicate and a bad id, all at once', async () => {
    const unknownProvider = { ...(await sketch()), id: 'fal-flux-dev' };
    unknownProvider.definition.provider = { name: 'midjourney', model: 'v7', input: {} };
    const unmapped = { ...(await sketch()), id: 'sketch-3' };
    unmapped.definition.provider = {
      name: 'fal',
      model: 'fal-ai/flux/dev',
      input: { prompt: { from: 'prompt' }, image_size: { from: 'speed' } },
    };
    const unpriced = { ...(await sketch()), id: 'sketch-4' };
    delete unpriced.definition.pricing.credits.large;
    const duplicate = { ...(await sketch()), id: 'sketch-3' };
    const badId = { ...(await sketch()), id: 'Sketch_5' };
    const fine = { ...(await sketch()), id: 'sketch-6' };
    const problems = await refusedProblems(
      await fileWith({ models: [fine, unknownProvider, unmapped, unpriced, duplicate, badId] }),
    );
    expect(problems).toEqual([
      'models[1] "fal-flux-dev": definition.provider.name: unknown provider "midjourney" (one of simulated, fal, replicate, openai)',
      'models[2] "sketch-3": definition.provider.input.image_size.from: speed is not an option of this model (nor prompt or images)',
      'models[3] "sketch-4": definition.pricing.credits.large: no price',
      'models[4] "sketch-3": id: the same id as models[2]; each model appears once',
      'models[5] "Sketch_5": id: "Sketch_5" is not a model id (lower-case letters, digits, dots and hyphens, starting with a letter or digit)',
    ]);
    // The good entry was not applied either.
    expect((await models()).map((row) => row.id)).not.toContain('sketch-6');
  });

  it('refuses to change the media type of a stored model, and says why', async () => {
    const motion = defaultCatalog.find((m) => m.id === 'motion-1')!;
    const video = { id: 'lumen-lite', sort_order: 10, definition: motion.definition };
    const fine = { ...(await sketch()), id: 'sketch-7' };
    expect(await refusedProblems(await fileWith({ models: [fine, video] }))).toEqual([
      `models[1] "lumen-lite": definition.media_type: is video, but the stored model is image; a model's media type never changes under its clients (give the new model a new id)`,
    ]);
  });

  it('refuses a file that is not JSON, not a catalog, or not there, naming it', async () => {
    const notJson = await fileWith('{ "models": [ { "id": "sketch-1", } ] }');
    expect(await refusedProblems(notJson)).toEqual([expect.stringMatching(/^not JSON: /)]);
    const notCatalog = await fileWith([await sketch()]);
    expect(await refusedProblems(notCatalog)).toEqual([
      'not a catalog file: expected { "models": [ … ] }; expected an object, got a list',
    ]);
    expect(await refusedProblems(join(dir, 'absent.json'))).toEqual(['cannot read the file: no such file']);
    await expect(admin('import-catalog')).rejects.toBeInstanceOf(UsageError);
    await expect(admin('import-catalog', notJson, notCatalog)).rejects.toThrow(/takes one argument, FILE/);
  });

  it('runs as a command: a summary and exit 0, or every problem and exit 1', async () => {
    const entry = { ...(await sketch()), id: 'sketch-cli' };
    const good = await runAdminCli(['import-catalog', await fileWith({ models: [entry] })], db.url);
    expect(good).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('1 added, 0 updated, 0 unchanged'),
    });
    delete entry.definition.pricing.credits.small;
    entry.id = 'Sketch_CLI';
    const path = await fileWith({ models: [entry] });
    const bad = await runAdminCli(['import-catalog', path], db.url);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`${path}: nothing was imported; 2 problems:`);
    expect(bad.stderr).toContain('models[0] "Sketch_CLI": id: "Sketch_CLI" is not a model id');
    expect(bad.stderr).toContain('models[0] "Sketch_CLI": definition.pricing.credits.small: no price');
    const json = await runAdminCli(['import-catalog', path, '--json'], db.url);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      error: {
        code: 'invalid_catalog',
        message: expect.stringContaining('nothing was imported'),
        problems: [expect.stringContaining('is not a model id'), expect.stringContaining('no price')],
      },
    });
  }, 90_000); // spawns the CLI three times, each a fresh tsx start
});
