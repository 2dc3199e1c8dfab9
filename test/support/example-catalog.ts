import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'slonik';
import { z } from 'zod';
import { modelDefinitionSchema, type ModelDefinition } from '../../src/catalog/catalog-entry.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { projectRoot } from '../../src/project-root.js';

export interface ExampleModel {
  id: string;
  sort_order: number;
  definition: ModelDefinition;
}

const catalogFile = z.object({
  models: z.array(
    z.object({
      id: z.string().regex(/^[a-z0-9][a-z0-9.-]*$/),
      sort_order: z.number().int(),
      definition: modelDefinitionSchema,
    }),
  ),
});

/** The models of `catalog/examples/<name>.json`, each definition checked as the catalog would. */
export async function exampleCatalog(name: string): Promise<ExampleModel[]> {
  const text = await readFile(path.join(projectRoot, 'catalog', 'examples', `${name}.json`), 'utf8');
  return catalogFile.parse(JSON.parse(text)).models;
}

/** Adds the models to a test database's catalog, as an import would (the API hears of it by NOTIFY). */
export async function insertModels(pool: DatabasePool, models: readonly ExampleModel[]): Promise<void> {
  for (const model of models) {
    await pool.query(sql.unsafe`
      INSERT INTO models (id, media_type, definition, sort_order)
      VALUES (${model.id}, ${model.definition.media_type}, ${sql.jsonb(model.definition as never)}, ${model.sort_order})`);
  }
}
