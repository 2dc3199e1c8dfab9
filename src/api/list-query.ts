import { z } from 'zod';
import { storableString } from '../storable-text.js';
import { generationStatuses as statuses, type GenerationStatus } from '../generation.js';

/** What a generation id can look like; anything else is no generation of ours. */
export const generationIdPattern = /^gen_[A-Za-z0-9]{1,64}$/;

const oneStatus = `(?:${statuses.join('|')})`;

/** A position in the list: the last item of the previous page. */
export interface ListPosition {
  createdAt: string;
  id: string;
}

export function encodeCursor(position: ListPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt, position.id])).toString('base64url');
}

/** The latest instant a cursor can name: created_at as the list shows it, in years 1970 to 9999. */
const lastInstant = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** The position a cursor names; undefined when it is not one this API gave out. */
export function decodeCursor(cursor: string): ListPosition | undefined {
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(decoded) || decoded.length !== 2) return undefined;
    const [createdAt, id] = decoded as unknown[];
    // Exactly what the list gives out, so PostgreSQL never sees a value it would refuse (a 500).
    if (typeof id !== 'string' || !generationIdPattern.test(id) || typeof createdAt !== 'string')
      return undefined;
    const instant = Date.parse(createdAt);
    if (!(instant >= 0 && instant <= lastInstant) || new Date(instant).toISOString() !== createdAt)
      return undefined;
    return { createdAt, id };
  } catch {
    return undefined;
  }
}

/**
 * The query of GET /v1/generations. It parses the query as Fastify gives it (a repeated parameter
 * is an array: 400), and its JSON Schema is what the OpenAPI description publishes for each
 * parameter (`openApiQueryParameters`), so the two cannot disagree.
 */
export const listGenerationsQuerySchema = z.object({
  limit: z
    .string()
    .regex(/^[0-9]+$/, 'Must be a whole number from 1 to 100.')
    .pipe(z.coerce.number().int().min(1).max(100))
    .optional()
    .describe('Page size, 1 to 100; 20 when absent.'),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'Not a cursor this API gave out.')
    .transform((value, ctx) => {
      const position = decodeCursor(value);
      if (!position) ctx.addIssue({ code: 'custom', message: 'Not a cursor this API gave out.' });
      return position ?? z.NEVER;
    })
    .optional()
    .describe('The next_cursor of the previous page, as it was given.'),
  status: z
    .string()
    .regex(
      new RegExp(`^ *${oneStatus} *(?:, *${oneStatus} *)*$`),
      `A comma-separated subset of ${statuses.join(', ')}.`,
    )
    .transform((value) => [...new Set(value.split(',').map((s) => s.trim() as GenerationStatus))])
    .optional()
    .describe(`Comma-separated subset of ${statuses.join(', ')}.`),
  model: storableString(z.string().min(1, 'Must not be empty.'))
    .optional()
    .describe('Only generations of this model id.'),
});

export type ListGenerationsQuery = z.infer<typeof listGenerationsQuerySchema>;
