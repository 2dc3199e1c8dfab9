import { z } from 'zod';
import { batchEventSchema, batchSchema } from './batch-resource.js';
import { batchEventTypes } from '../db/batch-events.js';
import { pageSizeQuery } from '../generations/list-query.js';
import { affordabilityShape, generationSchema, webhookSubscriptionSchema } from './schemas.js';

export { batchEventSchema, batchSchema } from './batch-resource.js';

/** What the batch routes validate and answer with (their OpenAPI description is built from them). */

export const batchIdPattern = /^batch_[A-Za-z0-9]{1,64}$/;

/** The answer of POST /v1/batches/quote. */
export const batchQuoteSchema = z.object({
  lines: z.number().int().positive(),
  credits: z
    .number()
    .int()
    .nonnegative()
    .describe('Every line at its price now; each is charged only when it starts.'),
  ...affordabilityShape,
  affordable: affordabilityShape.affordable.describe(
    "Whether the balance and what is left of the key's spend limit both cover the total now. A create is refused (402) for the balance only; lines past the key's limit end `rejected` (key_spend_limit_exceeded), nothing charged.",
  ),
});

/**
 * POST /v1/batches `webhook`: the batch's own events delivered to `url`, checked and delivered as a
 * generation's webhook is (src/generations/batch-envelope.ts checks it); its description in the
 * OpenAPI document.
 */
export const batchWebhookSubscriptionSchema = webhookSubscriptionSchema
  .extend({
    events: z
      .array(z.enum(batchEventTypes))
      .min(1)
      .describe(
        'The event types delivered, distinct, at least one. Default: batch.completed, batch.canceled, batch.expired.',
      )
      .optional(),
  })
  .describe(
    "Deliver this batch's own events (batch.created, batch.progress at most once a second, batch.completed/canceled/expired) to `url`, signed per Standard Webhooks 1.0 with the same secret, retries, 410 Gone rule and redelivery as a generation's webhook. Part of the request: the same Idempotency-Key with another webhook is a conflict. A line's own `webhook` is the subscription of its generation's events, apart from this one.",
  );

/** GET /v1/batches/{id}/events as JSON: the batch's events so far (after Last-Event-ID), oldest first. */
export const batchEventListSchema = z.object({ data: z.array(batchEventSchema) });

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
  limit: pageSizeQuery(),
  cursor: batchCursor.optional().describe('The next_cursor of the previous page, as it was given.'),
});

export const batchResultsQuerySchema = z.object({
  after: z
    .string()
    .regex(/^[0-9]{1,9}$/, 'Must be a line index (0 for the first line).')
    .pipe(z.coerce.number<string>().int().min(0).max(999_999_999))
    .optional()
    .describe('Only lines after this index: the last index read, to resume.'),
});

/**
 * The JSONL form's envelope, in the query (the body is only lines); the JSON form sends it in the body.
 */
export const createBatchQuerySchema = z.object({
  completion_window: z.string().optional().describe('JSONL form: the completion window (default 24h).'),
  metadata: z.string().optional().describe('JSONL form: the metadata object as JSON text.'),
  webhook: z
    .string()
    .optional()
    .describe('JSONL form: the batch\'s webhook (`{"url": …, "events": […]}`) as JSON text.'),
});
