import type { CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { eventsAfter, type EventsAfterOptions } from './events-after.js';
import { generationRow, type GenerationRow } from './generation-reads.js';

/**
 * A generation's event log (migration 0016): written by a trigger on `generations` in the
 * transaction of each change a customer can see, read here. Each event carries the generation's
 * public columns as they were, so it renders with the API's own view (toGeneration).
 */

/** Every type the trigger writes, in the order a generation usually meets them. */
export const generationEventTypes = [
  'generation.created',
  'generation.processing',
  'generation.succeeded',
  'generation.failed',
  'generation.rejected',
  'generation.refunded',
  'generation.requeued',
  'generation.updated',
  'generation.content_expired',
] as const;
export type GenerationEventType = (typeof generationEventTypes)[number];

export interface GenerationEventRow {
  /** Unique within the generation, increasing from 1 with each event. */
  seq: number;
  type: GenerationEventType;
  created_at: string;
  /** The generation's row as it was right after the change. */
  generation: GenerationRow;
}

// jsonb holds PostgreSQL's own timestamp text (microseconds, +00:00): shown the way columns are.
const timestamp = z.string().transform((value) => new Date(value).toISOString());
const resource = generationRow.extend({
  created_at: timestamp,
  completed_at: timestamp.nullable(),
  expires_at: timestamp.nullable(),
  // Events recorded before 0019 carry no `provider`: they show null.
  provider: z.string().nullable().default(null),
  // Events recorded before 0026 carry no batch fields: ordinary generations, null.
  batch_id: z.string().nullable().default(null),
  custom_id: z.string().nullable().default(null),
  // Events recorded before 0028 carry no deadline: null.
  cancel_after: timestamp.nullable().default(null),
});
/** An event row as selected (seq, type, created_at, resource): shared with the account log's reads. */
export const generationEventRow = z.object({
  seq: z.number(),
  type: z.enum(generationEventTypes),
  created_at: z.string(),
  resource,
});

/**
 * The events of generation `generationId` after `afterSeq` (0: all of them), oldest first
 * (eventsAfter; with `withNewest`, whether the generation is terminal is known from one read).
 */
export async function generationEventsAfter(
  db: CommonQueryMethods,
  generationId: string,
  afterSeq: number,
  options: EventsAfterOptions = {},
): Promise<GenerationEventRow[]> {
  const rows = await eventsAfter(db, 'generation', generationId, afterSeq, generationEventRow, options);
  return rows.map(toGenerationEventRow);
}

/** A selected row as an event: the resource is the generation as it was. */
export function toGenerationEventRow({
  seq,
  type,
  created_at,
  resource,
}: z.infer<typeof generationEventRow>): GenerationEventRow {
  return { seq, type, created_at, generation: resource };
}
