import { z } from 'zod';
import { batchStatuses } from '../db/batches.js';
import { generationSchema } from './schemas.js';

/** What the batch routes validate and answer with (their OpenAPI description is built from them). */

const timestamp = z.string().datetime({ precision: 3 }).describe('UTC, ISO 8601 with milliseconds and Z.');

export const batchIdPattern = /^batch_[A-Za-z0-9]{1,64}$/;

const count = z.number().int().nonnegative();

export const batchSchema = z.object({
  id: z.string().regex(/^batch_/),
  status: z.enum(batchStatuses),
  completion_window: z.string(),
  request_counts: z
    .object({
      total: count,
      pending: count.describe('Not started yet.'),
      queued: count.describe('Started, their generation not ended yet.'),
      succeeded: count,
      failed: count,
      rejected: count.describe('Refused at admission (insufficient_credits, say): never charged.'),
      refused: count.describe('Refused when started, with no generation (the model was withdrawn, say).'),
      canceled: count.describe('Never started: the batch was canceled first. Never charged.'),
      expired: count.describe('Never started: the completion window passed first. Never charged.'),
    })
    .describe("The batch's lines by where they stand: the generation statuses for lines started."),
  credits_quoted: z
    .number()
    .int()
    .nonnegative()
    .describe('Every line at its price when the batch was created.'),
  credits_spent: z.number().int().nonnegative().describe('Debited for its lines so far, refunds taken off.'),
  metadata: z.record(z.string(), z.string()).nullable(),
  created_at: timestamp,
  started_at: timestamp.nullable(),
  completed_at: timestamp.nullable(),
  expires_at: timestamp.describe('The end of the completion window: lines not started by then expire.'),
});

/** The answer of POST /v1/batches/quote. */
export const batchQuoteSchema = z.object({
  lines: z.number().int().positive(),
  credits: z
    .number()
    .int()
    .nonnegative()
    .describe('Every line at its price now; each is charged only when it starts.'),
  balance: z.object({ subscription: z.number().int(), one_time: z.number().int(), total: z.number().int() }),
  affordable: z
    .boolean()
    .describe('Whether the balance covers the total now (a create refuses it with 402 otherwise).'),
});

export const batchListSchema = z.object({
  data: z.array(batchSchema),
  next_cursor: z.string().nullable(),
});

/** One line of the results file. */
export const batchLineSchema = z.object({
  line: z.number().int().nonnegative().describe('The index of the request line, from 0.'),
  custom_id: z.string(),
  generation: generationSchema.nullable().describe('Its generation; null when it never started.'),
  error: z
    .object({ code: z.string(), message: z.string() })
    .nullable()
    .describe(
      "Its generation's error, or why it never started (batch_canceled, batch_expired, invalid_request).",
    ),
});

export const batchPathSchema = z.object({
  id: z
    .string()
    .regex(batchIdPattern)
    .catch('')
    .describe('A batch id; anything else is 404 like an unknown one.'),
});

/** A list cursor: base64url JSON `[created_at, id]` of the last batch of the previous page. */
const batchCursor = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/, 'Not a cursor this API gave out.')
  .transform((value, ctx) => {
    try {
      const [createdAt, id] = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as unknown[];
      if (
        typeof createdAt === 'string' &&
        typeof id === 'string' &&
        batchIdPattern.test(id) &&
        !Number.isNaN(Date.parse(createdAt)) &&
        new Date(createdAt).toISOString() === createdAt
      )
        return { createdAt, id };
    } catch {
      // answered below
    }
    ctx.addIssue({ code: 'custom', message: 'Not a cursor this API gave out.' });
    return z.NEVER;
  });

export const encodeBatchCursor = (row: { created_at: string; id: string }) =>
  Buffer.from(JSON.stringify([row.created_at, row.id])).toString('base64url');

export const listBatchesQuerySchema = z.object({
  limit: z
    .string()
    .regex(/^[0-9]+$/, 'Must be a whole number from 1 to 100.')
    .pipe(z.coerce.number<string>().int().min(1).max(100))
    .optional()
    .describe('Page size, 1 to 100; 20 when absent.'),
  cursor: batchCursor.optional().describe('The next_cursor of the previous page, as it was given.'),
});

export const batchResultsQuerySchema = z.object({
  after: z
    .string()
    .regex(/^[0-9]{1,9}$/, 'Must be a line index (0 for the first line).')
    .pipe(z.coerce.number<string>().int())
    .optional()
    .describe('Only lines after this index: the last index read, to resume.'),
});

/**
 * The JSONL form's envelope, in the query (the body is only lines); the JSON form sends it in the body.
 */
export const createBatchQuerySchema = z.object({
  completion_window: z.string().optional().describe('JSONL form: the completion window (default 24h).'),
  metadata: z.string().optional().describe('JSONL form: the metadata object as JSON text.'),
});
