import { z } from 'zod';
import type { ValidationIssue } from '../vocabulary/errors.js';
import { fieldName, noNulPattern, storableString } from '../validation/storable-text.js';
import { joinValues, receivedType } from '../validation/zod-messages.js';
import { toJsonSchema } from '../validation/json-schema.js';
import type { CatalogEntry } from './catalog-entry.js';
import { routeRequestSchema, routesOf } from './routes.js';
import { MAX_DATA_URI_BYTES, MAX_IMAGE_URL_LENGTH, parseImageInput } from './image-input.js';

/**
 * Builds the zod schema of a POST /v1/generations body for one catalog entry.
 * The same schema validates requests and, converted, is the JSON Schema that
 * GET /v1/models publishes: the catalog entry is the only source of both.
 */
export function buildRequestSchema(entry: CatalogEntry) {
  const shape: Record<string, z.ZodType> = {
    model: z.literal(entry.id).describe('The model id.'),
    prompt: codePointString(entry.prompt.min_length, entry.prompt.max_length).describe(
      `What to generate, ${entry.prompt.min_length} to ${entry.prompt.max_length} characters.`,
    ),
  };
  const imageDescription = entry.accepts_data_uris
    ? 'An HTTPS URL or a data:image/<type>;base64,<data> URI (png, jpeg, webp or gif).'
    : 'An HTTPS URL.';
  // The envelope field that constrains which of the model's routes may serve the request (routes.ts).
  shape.provider = routeRequestSchema.optional().describe(
    `Which providers may serve the request: ${routesOf(entry)
      .map((route) => route.provider)
      .join(', ')}. Without it, the model's own routing decides.`,
  );
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
          .enum(option.values as [string, ...string[]], {
            // The values in the catalog's order (zod 4 lists integer-like ones first), and the
            // words zod 3 had for something that is not text at all.
            error: (issue) =>
              typeof issue.input === 'string'
                ? `Must be one of: ${option.values.join(', ')}.`
                : `Expected ${joinValues(option.values)}, received ${receivedType(issue.input)}.`,
          })
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
          input: body[name],
        });
      }
    }
  });
}

/** The JSON Schema (2019-09 dialect, compatible with OpenAPI 3.1) of one model's request body. */
export function buildRequestJsonSchema(entry: CatalogEntry): Record<string, unknown> {
  const schema = toJsonSchema(buildRequestSchema(entry)) as {
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
  // Image fields: what a JSON Schema can say of them (see imageJsonSchema).
  const image = imageJsonSchema(entry.accepts_data_uris);
  for (const [name, option] of Object.entries(entry.options)) {
    if (option.type === 'image') schema.properties[name] = { ...schema.properties[name], ...image };
  }
  const images = schema.properties.images as { items?: Record<string, unknown> } | undefined;
  if (images?.items) images.items = { ...images.items, ...image };
  const dependentRequired = Object.fromEntries(
    Object.entries(entry.options).flatMap(([name, option]) =>
      option.type === 'image' && option.requires ? [[name, [option.requires]]] : [],
    ),
  );
  const out = schema as Record<string, unknown>;
  if (Object.keys(dependentRequired).length > 0) out.dependentRequired = dependentRequired;
  if (entry.unknown_fields === 'ignore') {
    delete schema.additionalProperties;
    out.propertyNames = { pattern: noNulPattern.source };
    out.description =
      'Fields this model does not define are ignored, but their text must be storable too: no NUL character and no unpaired surrogate in any key or string, at any depth, and arrays and objects nested at most 32 deep.';
  } else schema.additionalProperties = false;
  delete out.$schema;
  return schema;
}

/** A pattern matching `text` (letters, digits, `/`, `;`, `,`) in any letter case: JSON Schema patterns take no flags. */
const anyCase = (text: string) => text.replace(/[a-z]/g, (c) => `[${c.toUpperCase()}${c}]`);

/**
 * What an image field accepts, as patterns: the same patterns are checked on every request (after
 * parseImageInput, whose messages are more precise), so that what the published schema refuses the
 * server refuses too. What a pattern cannot say (the URL must parse, with a host and no credentials;
 * the data must decode to an image of the declared type, of at most 10 MiB) is in the description.
 */
const httpsImagePattern = '^https://[^\\u0000-\\u0020\\u007f]+$';
const base64Data = '(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)';
const dataUriImagePattern = `^data:${anyCase('image/')}(?:${['png', 'jpeg', 'jpg', 'webp', 'gif'].map(anyCase).join('|')})${anyCase(';base64,')}${base64Data}$`;
/** The longest data URI of at most MAX_DATA_URI_BYTES bytes: the longest header, then base64. */
const maxDataUriLength = 'data:image/jpeg;base64,'.length + 4 * Math.ceil(MAX_DATA_URI_BYTES / 3);

function imageJsonSchema(acceptsDataUris: boolean): Record<string, unknown> {
  const url = { type: 'string', pattern: httpsImagePattern, maxLength: MAX_IMAGE_URL_LENGTH };
  if (!acceptsDataUris) return url;
  return {
    type: 'string',
    anyOf: [url, { pattern: dataUriImagePattern, maxLength: maxDataUriLength }],
  };
}

const imagePatterns = {
  urlOnly: new RegExp(httpsImagePattern),
  urlOrData: new RegExp(`${httpsImagePattern}|${dataUriImagePattern}`),
};

/** "1 character", "3000 characters". */
const characters = (n: number) => `${n} ${n === 1 ? 'character' : 'characters'}`;

function codePointString(min: number, max: number) {
  return storableString().superRefine((value, ctx) => {
    // A code point is one or two UTF-16 units, so the unit count bounds it cheaply first.
    const length = value.length > max * 2 ? value.length : [...value].length;
    if (length < min) {
      ctx.addIssue({
        code: 'too_small',
        minimum: min,
        origin: 'string',
        inclusive: true,
        input: value,
        message: `Must be at least ${characters(min)}.`,
      });
    } else if (length > max) {
      ctx.addIssue({
        code: 'too_big',
        maximum: max,
        origin: 'string',
        inclusive: true,
        input: value,
        message: `Must be at most ${characters(max)}.`,
      });
    }
  });
}

function imageString(acceptsDataUris: boolean) {
  const pattern = acceptsDataUris ? imagePatterns.urlOrData : imagePatterns.urlOnly;
  return z.string().superRefine((value, ctx) => {
    const parsed = parseImageInput(value, acceptsDataUris);
    if (!parsed.ok)
      ctx.addIssue({
        code: 'custom',
        message: parsed.message,
        params: { reason: 'invalid_image' },
        input: value,
      });
    else if (!pattern.test(value))
      ctx.addIssue({
        code: 'custom',
        message: acceptsDataUris
          ? 'Must be an HTTPS URL or an image data URI, without spaces or control characters.'
          : 'Must be an HTTPS URL, without spaces or control characters.',
        params: { reason: 'invalid_image' },
        input: value,
      });
  });
}

/**
 * Turns zod's issues into the API's `issues` items: one per offending field. `input` is what was
 * parsed (zod 4's issues do not carry it); parse with `parseOptions` (src/validation/zod-messages.ts) for the
 * texts this API has always given.
 */
export function toValidationIssues(error: z.ZodError, input: unknown): ValidationIssue[] {
  // A value of the wrong type is that and nothing more: zod 4 goes on to check a string's length
  // against an array's `max`, which zod 3 did not.
  const wrongType = new Set<string>();
  return error.issues.flatMap((issue): ValidationIssue[] => {
    const field = fieldName(issue.path as Array<string | number>);
    const value = valueAt(input, issue.path);
    if (wrongType.has(field)) return [];
    if (issue.code === 'invalid_type') wrongType.add(field);
    switch (issue.code) {
      case 'unrecognized_keys':
        return issue.keys.map((key) => ({
          field: fieldName([...(issue.path as Array<string | number>), key]),
          code: 'unknown_field',
          message: 'This model does not accept this field.',
        }));
      case 'invalid_type':
        return [
          value === undefined
            ? { field, code: 'required', message: 'This field is required.' }
            : {
                field,
                code: 'invalid_type',
                message: `Expected ${issue.expected === 'int' ? 'integer' : issue.expected}, received ${receivedType(value)}.`,
              },
        ];
      case 'invalid_value':
        // An enum given something that is not text is a wrong type, as zod 3 told it (its message
        // is the enum's own, above); a literal that does not match (an integer option with one
        // value) is a wrong value.
        return [
          {
            field,
            code:
              issue.values.every((v) => typeof v === 'string') && typeof value !== 'string'
                ? 'invalid_type'
                : 'invalid_value',
            message: issue.message,
          },
        ];
      case 'invalid_union':
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

/** The value at a path of an issue: zod 4's issues do not carry it. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}
