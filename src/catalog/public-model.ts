import { z } from 'zod';

/**
 * A model as GET /v1/models shows it: the catalog entry's public fields and what is derived from
 * them. The catalog builds it (CompiledModel.publicView); the API publishes this schema in its
 * OpenAPI description, and the tests read responses with it.
 */

const publicOptionSchema = z.object({
  type: z.enum(['enum', 'integer_enum', 'boolean', 'image']),
  values: z.array(z.union([z.string(), z.number()])).optional(),
  default: z.union([z.string(), z.number(), z.boolean()]).optional(),
  descriptions: z.record(z.string(), z.string()).optional(),
  unit: z.string().optional(),
  requires: z.string().optional(),
  description: z.string(),
});

export const publicModelSchema = z.object({
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
    .record(z.string(), publicOptionSchema)
    .describe('Request fields besides model, prompt and images, keyed by field name.'),
  pricing: z
    .object({
      unit: z.enum(['generation', 'second']),
      by: z.string().nullable(),
      credits: z.record(z.string(), z.number().int()),
      surcharges: z.record(z.string(), z.record(z.string(), z.number().int())),
    })
    .describe(
      'price = (credits[value of `by`, or "*"] + each matching surcharge) × (duration if unit is "second", else 1).',
    ),
  default_price: z.number().int().describe('Credits for a request that sets no option.'),
  request_schema: z
    .record(z.string(), z.unknown())
    .describe('JSON Schema of the POST /v1/generations body for this model.'),
});

export type PublicModel = z.infer<typeof publicModelSchema>;
