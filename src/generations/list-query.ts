import type { CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { listGenerations, type GenerationRow, type ListFilter } from '../db/generation-reads.js';
import { storableString } from '../storable-text.js';
import { generationStatuses as statuses, type GenerationStatus } from '../generation.js';
import { idempotencyKeySchema } from './idempotency-key.js';

/** What a generation id can look like; anything else is no generation of ours. */
export const generationIdPattern = /^gen_[A-Za-z0-9]{1,64}$/;

const oneStatus = `(?:${statuses.join('|')})`;

/** A position in the list: the last item of the previous page. */
interface ListPosition {
  createdAt: string;
  id: string;
}

/** A cursor is the position as base64url JSON, `[created_at, id]`: opaque to clients. */
export function encodeCursor(position: ListPosition): string {
  return Buffer.from(JSON.stringify([position.createdAt, position.id])).toString('base64url');
}

/**
 * One page of the account's generations, newest first, and the cursor of the next page (null on
 * the last): GET /v1/generations and the console's list page alike.
 */
export async function pageOfGenerations(
  db: CommonQueryMethods,
  filter: ListFilter,
): Promise<{ rows: readonly GenerationRow[]; nextCursor: string | null }> {
  const rows = await listGenerations(db, { ...filter, limit: filter.limit + 1 });
  const page = rows.slice(0, filter.limit);
  const last = page.at(-1);
  return {
    rows: page,
    nextCursor:
      rows.length > filter.limit && last ? encodeCursor({ createdAt: last.created_at, id: last.id }) : null,
  };
}

/** The latest instant a cursor can name: created_at as the list shows it, in years 1970 to 9999. */
const lastInstant = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * created_at exactly as the list gives it out (ISO 8601, milliseconds, Z; years 1970 to 9999), so
 * PostgreSQL never sees a value it would refuse (a 500).
 */
const listedInstant = z.string().refine((value) => {
  const instant = Date.parse(value);
  return instant >= 0 && instant <= lastInstant && new Date(instant).toISOString() === value;
});

/** The position a cursor names, from its text: exactly what encodeCursor gives out, nothing else. */
const cursorPositionSchema = z
  .string()
  .transform((cursor, ctx): unknown => {
    try {
      return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    } catch {
      ctx.addIssue({ code: 'custom', message: 'Not JSON.' });
      return z.NEVER;
    }
  })
  .pipe(z.tuple([listedInstant, z.string().regex(generationIdPattern)]))
  .transform(([createdAt, id]): ListPosition => ({ createdAt, id }));

const notACursor = 'Not a cursor this API gave out.';

/** The most items a page of a list holds (every list: generations, batches, events, the MCP tool's). */
export const maxPageSize = 100;

/** A page's size when the query does not say (generations, batches). */
export const defaultPageSize = 20;

/**
 * A list's page-size parameter, `limit`: a whole number from 1 to maxPageSize, as a query sends it
 * (text; a repeated parameter is an array: 400), published as the number it is read as.
 * `description`: what the page is, and its size when absent.
 */
export function pageSizeQuery(
  description = `Page size, 1 to ${maxPageSize}; ${defaultPageSize} when absent.`,
) {
  return z
    .string()
    .regex(/^[0-9]+$/, `Must be a whole number from 1 to ${maxPageSize}.`)
    .pipe(z.coerce.number<string>().int().min(1).max(maxPageSize))
    .optional()
    .describe(description);
}

/**
 * The query of GET /v1/generations, which Fastify validates it with (src/api/route-schemas.ts).
 * It parses the query as Fastify gives it (a repeated parameter is an array: 400), and its JSON
 * Schema is what the OpenAPI description publishes for each parameter, so the two cannot disagree.
 */
export const listGenerationsQuerySchema = z.object({
  limit: pageSizeQuery(),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, notACursor)
    // One issue for the field whatever is wrong inside; a pipe would name the cursor's parts, and
    // the published parameter (the schema's output side) would become the decoded tuple.
    .transform((value, ctx) => {
      const position = cursorPositionSchema.safeParse(value);
      if (!position.success) ctx.addIssue({ code: 'custom', message: notACursor });
      return position.success ? position.data : z.NEVER;
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
  idempotency_key: idempotencyKeySchema
    .optional()
    .describe(
      "Only the generation that holds this Idempotency-Key in the calling API key's namespace, within the key horizon: a client that lost the 202 finds what it paid for. An empty list when none does.",
    ),
});
