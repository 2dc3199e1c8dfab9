import { keyLimitResets } from '../db/key-limits.js';
import { keyEventSchema } from './key-schemas.js';
import { z } from 'zod';
import { batchEventSchema } from './batch-resource.js';
import { publicModelSchema } from '../catalog/public-model.js';
import { errorCodes } from '../errors.js';
import { generationEventTypes } from '../db/generation-events.js';
import { generationStatuses } from '../generation.js';

/**
 * Response shapes of the v1 API, as zod schemas. They document the contract
 * (the OpenAPI description is generated from them) and the tests parse real
 * responses with them.
 */

const timestamp = z.string().datetime({ precision: 3 }).describe('UTC, ISO 8601 with milliseconds and Z.');

const errorSchema = z.object({
  code: z.enum(Object.keys(errorCodes) as [keyof typeof errorCodes, ...Array<keyof typeof errorCodes>]),
  message: z.string(),
});

const validationIssueSchema = z.object({
  field: z
    .string()
    .describe('Dotted path of the offending field, e.g. `images.1`; empty for the body itself.'),
  code: z
    .string()
    .describe(
      'Why: required, invalid_type, invalid_value, too_small, too_big, unknown_field, invalid_image, invalid_json, ...',
    ),
  message: z.string(),
});

export const errorBodySchema = z.object({
  error: errorSchema,
  issues: z
    .array(validationIssueSchema)
    .optional()
    .describe('Present on 400 invalid_request (and only there): one item per offending field.'),
});

/** The body of a 400: always `invalid_request`, always with its issues. */
export const validationErrorBodySchema = z.object({
  error: errorSchema.extend({ code: z.literal('invalid_request') }),
  issues: z.array(validationIssueSchema).min(1).describe('One item per offending field.'),
});

const imageOutputSchema = z.object({
  url: z.string().url(),
  width: z.number().int(),
  height: z.number().int(),
});

export const generationSchema = z.object({
  id: z.string().regex(/^gen_/),
  status: z.enum(generationStatuses),
  model: z.string(),
  media_type: z.string(),
  credits: z.number().int().nonnegative(),
  credits_refunded: z.boolean(),
  input: z.record(z.string(), z.unknown()).nullable(),
  output: z
    .object({
      images: z.array(imageOutputSchema).optional(),
      videos: z
        .array(
          imageOutputSchema.extend({
            duration_seconds: z.number(),
            has_audio: z.boolean(),
            content_type: z.string(),
          }),
        )
        .optional(),
    })
    .nullable(),
  error: errorSchema.extend({ code: z.string() }).nullable(),
  created_at: timestamp,
  completed_at: timestamp.nullable(),
  expires_at: timestamp.nullable(),
  content_expired: z.boolean(),
  provider: z
    .string()
    .nullable()
    .describe(
      'The provider serving the generation (or that served it): the route a create was last sent to. Null before submission, and when every route refused. Also answered as the Generation-Provider header of GET.',
    ),
  batch_id: z
    .string()
    .nullable()
    .describe(
      'The batch this generation is a line of (POST /v1/batches); null for a generation created on its own.',
    ),
  custom_id: z
    .string()
    .nullable()
    .describe('The `custom_id` of its batch line; null for a generation created on its own.'),
  cancel_after: timestamp
    .nullable()
    .describe(
      'The deadline the create’s Cancel-After header set (its creation time plus the duration); null without one. Not yet handed to a provider by then, the generation is canceled and refunded (failed, error.code canceled); a job the provider already has runs on.',
    ),
});

export const generationListSchema = z.object({
  data: z.array(generationSchema),
  next_cursor: z.string().nullable(),
});

export const creditBalanceSchema = z.object({
  credits: z.number().int().describe('Total balance the API draws from.'),
  subscription_credits: z.number().int(),
  one_time_credits: z.number().int(),
});

export const modelListSchema = z.object({ data: z.array(publicModelSchema) });

/**
 * What every quote says about whether a create would be admitted now, beside its price: the balance
 * and the key's own limit (what quoteAnswer gives, src/generations/key-rules.ts).
 */
export const affordabilityShape = {
  balance: z.object({ subscription: z.number().int(), one_time: z.number().int(), total: z.number().int() }),
  affordable: z
    .boolean()
    .describe(
      "Whether the balance and what is left of the key's spend limit both cover the price now (a create would not be 402).",
    ),
  limited_by: z
    .enum(['balance', 'key_spend_limit'])
    .nullable()
    .describe(
      'Which bound refuses it: `balance` (402 insufficient_credits) or `key_spend_limit` (402 key_spend_limit_exceeded); null when affordable.',
    ),
  key_limit: z
    .object({
      spend_limit: z.number().int().nonnegative(),
      limit_reset: z.enum(keyLimitResets),
      limit_remaining: z.number().int().nonnegative(),
      resets_at: z.string().datetime({ precision: 3 }).nullable(),
    })
    .nullable()
    .describe("The key's own spend limit now (see GET /v1/key); null when it has none."),
};

/** The answer of POST /v1/generations/quote: what a create with that body would debit now. */
export const quoteSchema = z.object({
  model: z.string(),
  credits: z.number().int().nonnegative().describe('The full price a create with this body would debit now.'),
  provider: z
    .string()
    .nullable()
    .describe(
      'The provider that would serve a create with this body now (its first route); null: none takes requests now (a create would be 503).',
    ),
  ...affordabilityShape,
  balance: affordabilityShape.balance.extend({
    total: affordabilityShape.balance.shape.total.describe(
      'What a create draws from: subscription credits first.',
    ),
  }),
});

/** A 409 not_cancelable: the envelope, and the generation as it stands (nothing changed). */
export const notCancelableBodySchema = z.object({
  error: errorSchema.extend({ code: z.literal('not_cancelable') }),
  generation: generationSchema,
});

/** One entry of a generation's event log: what GET /v1/generations/{id}/events sends, and a webhook's body. */
export const generationEventSchema = z.object({
  id: z
    .number()
    .int()
    .positive()
    .describe(
      'Unique within the generation and increasing (1, 2, 3…): the SSE id, and what Last-Event-ID names.',
    ),
  type: z.enum(generationEventTypes),
  created_at: timestamp.describe('When the change was committed (UTC, ISO 8601 with milliseconds and Z).'),
  data: generationSchema.describe('The generation as it was right after the change.'),
});

/** GET /v1/generations/{id}/events without `Accept: text/event-stream`: the log so far, oldest first. */
export const generationEventListSchema = z.object({ data: z.array(generationEventSchema) });

/** A position in an account's event log as clients see it: a whole number in decimal, opaque to them. */
export const accountCursorPattern = /^[0-9]{1,15}$/;

/** One entry of GET /v1/events as JSON: an event of one of the account's generations, and where it stands. */
export const accountEventSchema = z.object({
  cursor: z
    .string()
    .regex(accountCursorPattern)
    .describe(
      "The event's place in the account's log, in commit order: the SSE id, what Last-Event-ID and `after` name. Opaque: compare it with nothing, send it back as it is.",
    ),
  event: z
    .union([generationEventSchema, batchEventSchema, keyEventSchema])
    .describe(
      "The event: a generation's as GET /v1/generations/{id}/events gives it (its `id` is its number within its generation; `data.id` names the generation), a batch's (`batch.*`: `data` is the Batch), or a key's (`key.spend_limit_reached`: `data` is the key's limit when a request was first refused by it in a window).",
    ),
});

/** GET /v1/events without `Accept: text/event-stream`: a page of the account's events, oldest first. */
export const accountEventListSchema = z.object({
  data: z.array(accountEventSchema),
  next_cursor: z
    .string()
    .regex(accountCursorPattern)
    .describe(
      'Where the next page starts: send it as `after` (or as Last-Event-ID to a stream) for the events after this page. Never null; with no events it is the cursor given, or the account log’s newest one.',
    ),
  has_more: z
    .boolean()
    .describe('Whether events after `next_cursor` were already there when this page was read.'),
});

/** GET /v1/webhooks/secret and POST /v1/webhooks/secret/rotate: what deliveries are signed with. */
export const webhookSecretSchema = z.object({
  secret: z
    .string()
    .regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
    .describe(
      'The signing secret: `whsec_` + base64 of 32 random bytes; the HMAC key is the base64-decoded part after `whsec_`.',
    ),
  created_at: timestamp.describe('When this secret was made (first read, or the rotation).'),
  previous: z
    .object({
      secret: z.string().regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/),
      expires_at: timestamp.describe('Until then deliveries carry a signature with it too.'),
    })
    .nullable()
    .describe('The secret replaced by the last rotation, while it still signs (24 h); else null.'),
});

/**
 * The create request's `webhook` field (an envelope field beside `model`, for every model): where
 * the generation's events are delivered. Checked by src/generations/webhook-request.ts; this is
 * its description in the OpenAPI document.
 */
export const webhookSubscriptionSchema = z
  .object({
    url: z
      .string()
      .min(1)
      .max(2048)
      .regex(/^[Hh][Tt][Tt][Pp][Ss]:\/\/[^/?#\\@\s]+(?:[/?#\\].*)?$/)
      .describe(
        'An HTTPS URL (`https://`) of at most 2,048 characters (Unicode code points), without credentials (no `user:password@`), whose host is at a public internet address: an IP address that is public, or a name that resolves only to public addresses. Anything else is a 400 `invalid_request` with an issue on `webhook.url`. Checked at the request and again at each delivery (DNS can change). This is the rule of a production server; a development server (`npm start`) may take more, and says so when it starts.',
      ),
    events: z
      .array(z.enum(generationEventTypes))
      .min(1)
      .describe(
        'The event types delivered, distinct, at least one. Default: generation.succeeded, generation.failed, generation.rejected, generation.content_expired.',
      )
      .optional(),
  })
  .strict()
  .describe(
    "Deliver this generation's events to `url`, signed per Standard Webhooks 1.0 (see `webhooks`). Part of the request: the same Idempotency-Key with another webhook is a conflict. A request refused by validation (400 with `issues`) is not subscribed: nothing is delivered for it (its event log still records generation.rejected); a refusal at admission (402, 429 concurrency_limit_exceeded) is delivered as generation.rejected.",
  );
