import type { CommonQueryMethods } from 'slonik';
import { lockModelsForImport, storedMediaTypes, upsertModel } from '../db/catalog-repository.js';
import { CatalogFileRefused, type CatalogFileModel } from './catalog-file.js';

/** What an import did, by model id. */
interface CatalogImportSummary {
  added: string[];
  updated: string[];
  unchanged: string[];
}

/**
 * Applies a checked catalog file in one transaction: new models are inserted, stored ones updated
 * where they differ, and models the file does not name are left as they are. A model whose stored
 * media type differs from the file's refuses the whole file (`file` names it in the message): a
 * client that has images from a model must not start receiving videos from it.
 */
export async function importCatalog(
  db: CommonQueryMethods,
  file: string,
  models: readonly CatalogFileModel[],
): Promise<CatalogImportSummary> {
  return db.transaction(async (tx) => {
    await lockModelsForImport(tx);
    const stored = await storedMediaTypes(
      tx,
      models.map((model) => model.id),
    );
    const problems = models.flatMap((model) => {
      const before = stored.get(model.id);
      return before === undefined || before === model.definition.media_type
        ? []
        : [
            `${model.label}: definition.media_type: is ${model.definition.media_type}, but the stored model is ${before}; a model's media type never changes under its clients (give the new model a new id)`,
          ];
    });
    if (problems.length > 0) throw new CatalogFileRefused(file, problems);
    const summary: CatalogImportSummary = { added: [], updated: [], unchanged: [] };
    for (const model of models) {
      const written = await upsertModel(tx, {
        id: model.id,
        media_type: model.definition.media_type,
        definition: model.definition,
        sort_order: model.sort_order,
        active: model.active,
      });
      const outcome = !written ? 'unchanged' : stored.has(model.id) ? 'updated' : 'added';
      summary[outcome].push(model.id);
    }
    return summary;
  });
}
