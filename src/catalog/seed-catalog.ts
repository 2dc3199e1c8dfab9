import type { ModelSeed } from '../db/migrate.js';
import { modelDefinitionSchema } from './catalog-entry.js';
import { defaultCatalog } from './default-catalog.js';

/** The default catalog as models to seed: each definition checked, and stored as parsed (defaults filled in). */
export function defaultCatalogSeeds(): ModelSeed[] {
  return defaultCatalog.map((model) => {
    const definition = modelDefinitionSchema.parse(model.definition);
    return { id: model.id, media_type: definition.media_type, definition, sort_order: model.sort_order };
  });
}
