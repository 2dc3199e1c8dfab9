import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const modelRow = z.object({ id: z.string(), definition: z.unknown() });
/** A stored model: its id and its definition as stored JSON, unchecked (src/catalog reads it). */
type ModelRow = z.infer<typeof modelRow>;

/** The active models, in catalog order. */
export async function listActiveModels(db: CommonQueryMethods): Promise<readonly ModelRow[]> {
  return db.any(sql.type(modelRow)`SELECT id, definition FROM models WHERE active ORDER BY sort_order, id`);
}
