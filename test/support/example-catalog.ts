import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseCatalogFile, type CatalogFileModel } from '../../src/catalog/catalog-file.js';
import { importCatalog } from '../../src/catalog/catalog-import.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { projectRoot } from '../../src/config/project-root.js';

const fileOf = (name: string) => path.join(projectRoot, 'catalog', 'examples', `${name}.json`);

/** The models of `catalog/examples/<name>.json`, checked as `import-catalog` checks them. */
export async function exampleCatalog(name: string): Promise<CatalogFileModel[]> {
  return parseCatalogFile(await readFile(fileOf(name), 'utf8'), fileOf(name));
}

/** Imports `catalog/examples/<name>.json` into a test database, as `import-catalog` does (the API hears of it by NOTIFY). */
export async function importExampleCatalog(pool: DatabasePool, name: string): Promise<void> {
  await importCatalog(pool, fileOf(name), await exampleCatalog(name));
}
