import { ZodCatch, ZodOptional, ZodPipe, ZodTransform, type ZodObject, type ZodType } from 'zod';
import { toJsonSchema } from '../validation/json-schema.js';

/** An operation's parameters in the OpenAPI document, from the zod schemas its route validates them with. */

/**
 * The query parameters of an operation, from the zod schema that parses them: what is published is
 * what is checked. Repeating a parameter is a 400, so each is a single value (`explode` has no say).
 */
export function queryParameters(schema: ZodObject) {
  return Object.entries(schema.shape as Record<string, ZodType>).map(([name, field]) => ({
    name,
    in: 'query',
    required: !field.isOptional(),
    ...(field.description ? { description: field.description } : {}),
    schema: queryParameterSchema(
      field instanceof ZodOptional ? (field as ZodOptional<ZodType>).unwrap() : field,
    ),
  }));
}

/**
 * A query parameter as it is read: a pipe (text checked, then parsed into a number) is published as
 * what it gives out, the number; a transform (a cursor decoded) as the text it takes in.
 */
function queryParameterSchema(field: ZodType) {
  return toJsonSchema(
    field,
    field instanceof ZodPipe && !(field.out instanceof ZodTransform) ? 'output' : 'input',
  );
}

/**
 * The path parameters of an operation, from the zod schema its route validates them with. A
 * parameter that reads what it does not accept as "none" (a catch) publishes what it accepts.
 */
export function pathParameters(schema: ZodObject) {
  return Object.entries(schema.shape as Record<string, ZodType>).map(([name, field]) => ({
    name,
    in: 'path',
    required: true,
    ...(field.description ? { description: field.description } : {}),
    schema: toJsonSchema(
      field instanceof ZodCatch ? (field as ZodCatch<ZodType>).removeCatch() : field,
      'input',
    ),
  }));
}
