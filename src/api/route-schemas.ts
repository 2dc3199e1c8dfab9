import { apiKeySchema } from './key-schemas.js';
import { z } from 'zod';
import {
  generationIdPattern,
  listGenerationsQuerySchema,
  maxPageSize,
  pageSizeQuery,
} from '../generations/list-query.js';
import {
  accountCursorPattern,
  accountEventListSchema,
  creditBalanceSchema,
  generationEventListSchema,
  generationListSchema,
  generationSchema,
  modelListSchema,
  quoteSchema,
  webhookSecretSchema,
} from './schemas.js';

/**
 * The path of GET /v1/generations/{id}. A path that cannot name a generation of ours reads as an
 * empty id, answered 404 like an unknown one rather than refused (the catch); the published
 * parameter is the pattern it is held to.
 */
const generationPathSchema = z.object({
  id: z
    .string()
    .regex(generationIdPattern)
    .catch('')
    .describe('A generation id; anything else is 404 like an unknown one.'),
});

/** The query of GET /v1/events. */
const accountEventsQuerySchema = z.object({
  after: z
    .string()
    .regex(accountCursorPattern, 'Must be a cursor this API gave out: a whole number.')
    .pipe(z.coerce.number<string>())
    .optional()
    .describe(
      'Only events after this cursor (a `cursor` or `next_cursor` given out before). Last-Event-ID, when sent, wins. Absent: a stream starts from now on; the JSON page is the newest events.',
    ),
  limit: pageSizeQuery(
    `JSON page size, 1 to ${maxPageSize}; ${maxPageSize} when absent. A stream ignores it.`,
  ),
});

/**
 * What each operation validates and answers with, as the routes hand them to Fastify and the
 * OpenAPI description publishes them: one object for both, so they cannot drift apart.
 */
export const routeSchemas = {
  createGeneration: { response: { 202: generationSchema } },
  quoteGeneration: { response: { 200: quoteSchema } },
  getGeneration: { params: generationPathSchema, response: { 200: generationSchema } },
  cancelGeneration: { params: generationPathSchema, response: { 200: generationSchema } },
  listGenerationEvents: { params: generationPathSchema, response: { 200: generationEventListSchema } },
  listAccountEvents: { querystring: accountEventsQuerySchema, response: { 200: accountEventListSchema } },
  listGenerations: { querystring: listGenerationsQuerySchema, response: { 200: generationListSchema } },
  getWebhookSecret: { response: { 200: webhookSecretSchema } },
  rotateWebhookSecret: { response: { 200: webhookSecretSchema } },
  getCredits: { response: { 200: creditBalanceSchema } },
  getKey: { response: { 200: apiKeySchema } },
  listModels: { response: { 200: modelListSchema } },
} as const;
