import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const modelRow = z.object({ id: z.string(), definition: z.unknown() });
/** A stored model: its id and its definition as stored JSON, unchecked (src/catalog reads it). */
type ModelRow = z.infer<typeof modelRow>;

/** The active models, in catalog order. */
export async function listActiveModels(db: CommonQueryMethods): Promise<readonly ModelRow[]> {
  return db.any(sql.type(modelRow)`SELECT id, definition FROM models WHERE active ORDER BY sort_order, id`);
}

/** A model's stored definition (active or retired), unchecked; null when there is no such model. */
export async function storedDefinition(db: CommonQueryMethods, id: string): Promise<unknown> {
  return (
    (await db.maybeOne(sql.type(modelRow)`SELECT id, definition FROM models WHERE id = ${id}`))?.definition ??
    null
  );
}

/** A model as an import writes it: the definition already checked by the caller. */
interface ModelImportRow {
  id: string;
  media_type: string;
  definition: unknown;
  sort_order: number;
  active: boolean;
}

/**
 * Serializes catalog imports against each other and against other writers of `models` until the
 * transaction ends, so that what an import compared is what it writes. Reads (the API, admission)
 * are not blocked.
 */
export async function lockModelsForImport(tx: CommonQueryMethods): Promise<void> {
  await tx.query(sql.unsafe`LOCK TABLE models IN SHARE ROW EXCLUSIVE MODE`);
}

const storedMediaTypesRow = z.object({ id: z.string(), media_type: z.string() });

/** The stored media type of each of `ids` that exists. */
export async function storedMediaTypes(
  db: CommonQueryMethods,
  ids: readonly string[],
): Promise<Map<string, string>> {
  const rows = await db.any(
    sql.type(storedMediaTypesRow)`
      SELECT id, media_type FROM models WHERE id = ANY(${sql.array(ids, 'text')})`,
  );
  return new Map(rows.map((row) => [row.id, row.media_type]));
}

const upsertModelRow = z.object({ id: z.string() });

/**
 * Inserts the model, or updates the stored one when any of its fields differ (`updated_at` moves
 * only then); false when it was stored as given already. Every write fires `catalog_changed`
 * (0001_foundation.sql), which API processes reload their catalog on.
 */
export async function upsertModel(db: CommonQueryMethods, model: ModelImportRow): Promise<boolean> {
  const definition = sql.jsonb(model.definition as Parameters<typeof sql.jsonb>[0]);
  const written = await db.maybeOne(
    sql.type(upsertModelRow)`
      INSERT INTO models AS m (id, media_type, definition, sort_order, active)
      VALUES (${model.id}, ${model.media_type}, ${definition}, ${model.sort_order}, ${model.active})
      ON CONFLICT (id) DO UPDATE SET
        media_type = excluded.media_type, definition = excluded.definition,
        sort_order = excluded.sort_order, active = excluded.active, updated_at = now()
      WHERE (m.media_type, m.definition, m.sort_order, m.active)
        IS DISTINCT FROM (excluded.media_type, excluded.definition, excluded.sort_order, excluded.active)
      RETURNING id`,
  );
  return written !== null;
}
