import type { z } from 'zod';
import type { GenerationRow } from '../db/generation-reads.js';
import { toGeneration as generationOf } from '../db/generation-view.js';
import type { generationSchema } from './schemas.js';

/** The spec's Generation object, the same at every stage (create, get, list item, replay). */
type Generation = z.infer<typeof generationSchema>;

/** A generation's projection row as the API shows it (src/db/generation-view.ts, typed by the API's schema). */
export function toGeneration(row: GenerationRow): Generation {
  return generationOf(row);
}
