import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyTypeProvider,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import { ZodType, type z } from 'zod';
import { toValidationIssues } from '../catalog/request-schema.js';
import { ValidationError } from '../vocabulary/errors.js';
import { parseOptions } from '../validation/zod-messages.js';

/**
 * Route schemas are zod schemas (src/api/route-schemas.ts), the ones the OpenAPI description is
 * generated from. With this type provider a handler's request is typed by what its schemas parse
 * to, and what it answers by what its response schemas accept.
 */
export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends ZodType ? z.output<this['schema']> : unknown;
  serializer: this['schema'] extends ZodType ? z.input<this['schema']> : unknown;
}

/** The app as route modules see it: schemas in zod. */
export type ZodApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/**
 * Makes Fastify validate with the routes' zod schemas: the parsed value replaces the query or
 * params, and a refusal is a 400 naming each field, like every other invalid request.
 *
 * Responses are serialized with JSON.stringify, as without a schema: parsing each one with zod
 * would cost about four times the stringify on the poll path, and would silently drop fields the
 * schema does not name. The response schemas hold the handlers to their shape at compile time
 * (the type provider), and the fuzz test checks real responses against the published ones.
 */
export function useZodSchemas(app: FastifyInstance): ZodApp {
  app.setValidatorCompiler(({ schema, method, url }) => {
    if (!(schema instanceof ZodType)) throw new TypeError(`${method} ${url}: route schemas are zod schemas`);
    return (data: unknown) => {
      const parsed = (schema as ZodType<unknown>).safeParse(data, parseOptions);
      return parsed.success
        ? { value: parsed.data }
        : { error: new ValidationError(toValidationIssues(parsed.error, data)) };
    };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  return app.withTypeProvider<ZodTypeProvider>();
}
