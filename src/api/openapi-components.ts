import type { ZodType } from 'zod';
import { toJsonSchema } from '../json-schema.js';
import { errorCodes, type ErrorCode } from '../errors.js';
import * as batches from './batch-schemas.js';
import { requestIdHeader } from './openapi-headers.js';
import { apiKeySchema, keyEventSchema } from './key-schemas.js';
import {
  accountEventListSchema,
  accountEventSchema,
  creditBalanceSchema,
  errorBodySchema,
  generationEventListSchema,
  generationEventSchema,
  generationListSchema,
  generationSchema,
  modelListSchema,
  notCancelableBodySchema,
  quoteSchema,
  validationErrorBodySchema,
  webhookSecretSchema,
  webhookSubscriptionSchema,
} from './schemas.js';

/*
 * What every part of the OpenAPI document refers to: the response bodies named as components,
 * references to them, and the error responses of a list of codes (openapi.ts assembles the
 * document; openapi-generations.ts, openapi-batches.ts and the others give its operations).
 */

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** The response bodies the document names as components, each under its name. */
const components = new Map<ZodType, string>([
  [errorBodySchema, 'Error'],
  [validationErrorBodySchema, 'ValidationError'],
  [generationSchema, 'Generation'],
  [generationListSchema, 'GenerationList'],
  [creditBalanceSchema, 'CreditBalance'],
  [modelListSchema, 'ModelList'],
  [quoteSchema, 'Quote'],
  [notCancelableBodySchema, 'NotCancelable'],
  [generationEventSchema, 'GenerationEvent'],
  [generationEventListSchema, 'GenerationEventList'],
  [accountEventSchema, 'AccountEvent'],
  [accountEventListSchema, 'AccountEventList'],
  [webhookSecretSchema, 'WebhookSecret'],
  [apiKeySchema, 'ApiKey'],
  [keyEventSchema, 'KeyEvent'],
  [webhookSubscriptionSchema, 'WebhookSubscription'],
  [batches.batchSchema, 'Batch'],
  [batches.batchListSchema, 'BatchList'],
  [batches.batchQuoteSchema, 'BatchQuote'],
  [batches.batchEventSchema, 'BatchEvent'],
  [batches.batchEventListSchema, 'BatchEventList'],
  [batches.batchWebhookSubscriptionSchema, 'BatchWebhookSubscription'],
]);

/** A reference to the component of a route's response schema. */
export function refTo(schema: ZodType) {
  const name = components.get(schema);
  if (!name) throw new Error('a route answers with a schema that is not a component of the document');
  return ref(name);
}

/** One response per status the codes answer with; a 400 always has its issues. */
export function errorResponses(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes)
    byStatus.set(errorCodes[code].status, [...(byStatus.get(errorCodes[code].status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      {
        description: list.map((c) => `\`${c}\`: ${errorCodes[c].description}`).join(' '),
        headers: { 'x-request-id': requestIdHeader },
        content: { 'application/json': { schema: ref(status === 400 ? 'ValidationError' : 'Error') } },
      },
    ]),
  );
}

/**
 * What any operation that needs a key can answer besides its own: 400 (any query or path
 * parameter holding text that cannot be stored, a path that is not valid percent-encoding), the
 * authentication answers, and the failures every request can meet.
 */
export const everyOperation: ErrorCode[] = [
  'invalid_request',
  'unauthorized',
  'payment_required',
  'api_access_disabled',
  'rate_limited',
  'internal_error',
  'service_unavailable',
];

/** The components' schemas, each under its name, as JSON Schema (what a request sends, what a response holds). */
export function componentSchemas(): Record<string, unknown> {
  return Object.fromEntries([...components].map(([schema, name]) => [name, toJsonSchema(schema, 'input')]));
}
