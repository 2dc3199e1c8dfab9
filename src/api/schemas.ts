import { z } from 'zod';
import { errorCodes } from '../errors.js';
import { generationStatuses } from '../generation.js';

/**
 * Response shapes of the v1 API, as zod schemas. They document the contract
 * (the OpenAPI description is generated from them) and the tests parse real
 * responses with them.
 */

const timestamp = z.string().datetime({ precision: 3 }).describe('UTC, ISO 8601 with milliseconds and Z.');

export const errorSchema = z.object({
  code: z.enum(Object.keys(errorCodes) as [keyof typeof errorCodes, ...Array<keyof typeof errorCodes>]),
  message: z.string(),
});

export const validationIssueSchema = z.object({
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

export const imageOutputSchema = z.object({
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
  input: z.record(z.unknown()).nullable(),
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

const optionSchema = z.object({
  type: z.enum(['enum', 'integer_enum', 'boolean', 'image']),
  values: z.array(z.union([z.string(), z.number()])).optional(),
  default: z.union([z.string(), z.number(), z.boolean()]).optional(),
  descriptions: z.record(z.string()).optional(),
  unit: z.string().optional(),
  requires: z.string().optional(),
  description: z.string(),
});

export const modelSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  media_type: z.enum(['image', 'video']),
  max_images: z.number().int().describe('Most reference images accepted in `images` (0: not accepted).'),
  accepts_data_uris: z
    .boolean()
    .describe('Whether image inputs may be data:image/<type>;base64 URIs as well as HTTPS URLs.'),
  unknown_fields: z
    .enum(['reject', 'ignore'])
    .describe('What the model does with body fields it does not define.'),
  prompt: z
    .object({ min_length: z.number().int(), max_length: z.number().int() })
    .describe('Length in characters.'),
  options: z
    .record(optionSchema)
    .describe('Request fields besides model, prompt and images, keyed by field name.'),
  pricing: z
    .object({
      unit: z.enum(['generation', 'second']),
      by: z.string().nullable(),
      credits: z.record(z.number().int()),
      surcharges: z.record(z.record(z.number().int())),
    })
    .describe(
      'price = (credits[value of `by`, or "*"] + each matching surcharge) × (duration if unit is "second", else 1).',
    ),
  default_price: z.number().int().describe('Credits for a request that sets no option.'),
  request_schema: z
    .record(z.unknown())
    .describe('JSON Schema of the POST /v1/generations body for this model.'),
});

export const modelListSchema = z.object({ data: z.array(modelSchema) });
