import { z } from 'zod';
import { zodToJsonSchema } from 'zod-to-json-schema';
import type { ValidationIssue } from '../errors.js';
import { fieldName, storableString } from '../storable-text.js';
import type { CatalogEntry } from './catalog-entry.js';
import { parseImageInput } from './image-input.js';

/**
 * Builds the zod schema of a POST /v1/generations body for one catalog entry.
 * The same schema validates requests and, converted, is the JSON Schema that
 * GET /v1/models publishes: the catalog entry is the only source of both.
 */
export function buildRequestSchema(entry: CatalogEntry) {
  const shape: Record<string, z.ZodTypeAny> = {
    model: z.literal(entry.id).describe('The model id.'),
    prompt: codePointString(entry.prompt.min_length, entry.prompt.max_length).describe(
      `What to generate, ${entry.prompt.min_length} to ${entry.prompt.max_length} characters.`,
    ),
  };
  const imageDescription = entry.accepts_data_uris
    ? 'An HTTPS URL or a data:image/<type>;base64,<data> URI (png, jpeg, webp or gif).'
    : 'An HTTPS URL.';
  if (entry.max_images > 0) {
    shape.images = z
      .array(imageString(entry.accepts_data_uris).describe(imageDescription))
      .max(entry.max_images)
      .optional()
      .describe(`Reference images for editing, at most ${entry.max_images}.`);
  }
  for (const [name, option] of Object.entries(entry.options)) {
    switch (option.type) {
      case 'enum':
        shape[name] = z
          .enum(option.values as [string, ...string[]])
          .optional()
          .describe(`${option.description} Default: ${option.default}.`);
        break;
      case 'integer_enum': {
        const literals = option.values.map((v) => z.literal(v));
        const schema =
          literals.length === 1
            ? literals[0]!
            : z.union(literals as unknown as [z.ZodLiteral<number>, z.ZodLiteral<number>]);
        shape[name] = schema.optional().describe(`${option.description} Default: ${option.default}.`);
        break;
      }
      case 'boolean':
        shape[name] = z.boolean().optional().describe(`${option.description} Default: ${option.default}.`);
        break;
      case 'image':
        shape[name] = imageString(entry.accepts_data_uris)
          .optional()
          .describe(`${option.description} ${imageDescription}`);
        break;
    }
  }
  const object = entry.unknown_fields === 'reject' ? z.object(shape).strict() : z.object(shape).strip();
  const requirements = Object.entries(entry.options).flatMap(([name, option]) =>
    option.type === 'image' && option.requires ? [{ name, requires: option.requires }] : [],
  );
  if (requirements.length === 0) return object;
  return object.superRefine((body, ctx) => {
    for (const { name, requires } of requirements) {
      if (body[name] !== undefined && body[requires] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `${name} needs ${requires}.`,
          params: { reason: 'requires' },
        });
      }
    }
  });
}

/** The JSON Schema (2019-09 dialect, compatible with OpenAPI 3.1) of one model's request body. */
export function buildRequestJsonSchema(entry: CatalogEntry): Record<string, unknown> {
  const schema = zodToJsonSchema(buildRequestSchema(entry), {
    target: 'jsonSchema2019-09',
    $refStrategy: 'none',
  }) as {
    properties: Record<string, Record<string, unknown>>;
    required?: string[];
    additionalProperties?: unknown;
  };
  // Prompt length counts characters (code points), which JSON Schema's minLength/maxLength also count.
  schema.properties.prompt = {
    ...schema.properties.prompt,
    minLength: entry.prompt.min_length,
    maxLength: entry.prompt.max_length,
  };
  if (entry.unknown_fields === 'ignore') delete schema.additionalProperties;
  else schema.additionalProperties = false;
  delete (schema as Record<string, unknown>).$schema;
  return schema;
}

function codePointString(min: number, max: number) {
  return storableString().superRefine((value, ctx) => {
    // A code point is one or two UTF-16 units, so the unit count bounds it cheaply first.
    const length = value.length > max * 2 ? value.length : [...value].length;
    if (length < min) {
      ctx.addIssue({
        code: 'too_small',
        minimum: min,
        type: 'string',
        inclusive: true,
        message: `Must be at least ${min} characters.`,
      });
    } else if (length > max) {
      ctx.addIssue({
        code: 'too_big',
        maximum: max,
        type: 'string',
        inclusive: true,
        message: `Must be at most ${max} characters.`,
      });
    }
  });
}

function imageString(acceptsDataUris: boolean) {
  return z.string().superRefine((value, ctx) => {
    const parsed = parseImageInput(value, acceptsDataUris);
    if (!parsed.ok)
      ctx.addIssue({ code: 'custom', message: parsed.message, params: { reason: 'invalid_image' } });
  });
}

/** Turns zod's issues into the API's `issues` items: one per offending field. */
export function toValidationIssues(error: z.ZodError): ValidationIssue[] {
  return error.issues.flatMap((issue): ValidationIssue[] => {
    const field = fieldName(issue.path);
    switch (issue.code) {
      case 'unrecognized_keys':
        return issue.keys.map((key) => ({
          field: fieldName([...issue.path, key]),
          code: 'unknown_field',
          message: 'This model does not accept this field.',
        }));
      case 'invalid_type':
        return [
          issue.received === 'undefined'
            ? { field, code: 'required', message: 'This field is required.' }
            : {
                field,
                code: 'invalid_type',
                message: `Expected ${issue.expected}, received ${issue.received}.`,
              },
        ];
      case 'invalid_enum_value':
        return [{ field, code: 'invalid_value', message: `Must be one of: ${issue.options.join(', ')}.` }];
      case 'invalid_union':
      case 'invalid_literal':
        return [{ field, code: 'invalid_value', message: issue.message }];
      case 'too_small':
        return [{ field, code: 'too_small', message: issue.message }];
      case 'too_big':
        return [{ field, code: 'too_big', message: issue.message }];
      case 'custom':
        return [
          {
            field,
            code: (issue.params?.reason as string | undefined) ?? 'invalid_value',
            message: issue.message,
          },
        ];
      default:
        return [{ field, code: 'invalid_value', message: issue.message }];
    }
  });
}
