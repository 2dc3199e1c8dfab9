import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { modelDefinitionSchema, type CatalogEntry } from '../catalog/catalog-entry.js';

const modelRow = z.object({ id: z.string(), definition: z.unknown() });

/**
 * The active models, in catalog order. A row whose definition does not parse
 * is reported through `onInvalid` and left out, so one bad edit in the web app
 * cannot take the whole catalog down.
 */
export async function listCatalog(
  db: CommonQueryMethods,
  onInvalid: (id: string, error: z.ZodError) => void = () => undefined,
): Promise<CatalogEntry[]> {
  const rows = await db.any(sql.type(modelRow)`
    SELECT id, definition FROM models WHERE active ORDER BY sort_order, id`);
  const entries: CatalogEntry[] = [];
  for (const row of rows) {
    const parsed = modelDefinitionSchema.safeParse(row.definition);
    if (parsed.success) entries.push({ id: row.id, ...parsed.data });
    else onInvalid(row.id, parsed.error);
  }
  return entries;
}

/** A model's stored definition as a catalog entry; null when there is none or it does not parse. */
export function catalogEntryOf(id: string, definition: unknown): CatalogEntry | null {
  const parsed = modelDefinitionSchema.safeParse(definition);
  return parsed.success ? { id, ...parsed.data } : null;
}
