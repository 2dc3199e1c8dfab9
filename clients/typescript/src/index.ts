/**
 * The official client of the Generation API. Core entry point: no runtime dependencies and no
 * Node built-ins (Node 20+, Bun, Deno); files are written by `@generation-service/client/node`.
 */
export { Client, defaultBaseURL, type ClientOptions } from './client.js';
/** This package's version (package.json's, baked in by the build); the User-Agent carries it. */
export { clientVersion } from './version.js';
export * from './core/errors.js';
export type { RetryEvent } from './core/retry-policy.js';
export { backoffMs, parseRetryAfter, retryableStatuses } from './core/retry-policy.js';
export type { FetchFunction } from './core/http.js';
export type {
  CreateOptions,
  RunOptions,
  ListFilters,
  Page,
  GenerationPager,
} from './resources/generations.js';
export type { ItemOf, ListPage, PageOf, Pager } from './resources/pager.js';
export type { WaitOptions } from './resources/waiter.js';
export type {
  Batches,
  BatchCreateOptions,
  BatchCreateParams,
  BatchListFilters,
  BatchPage,
  BatchPager,
  BatchResultsOptions,
  BatchWaitOptions,
  JsonlBody,
  JsonlSource,
} from './resources/batches.js';
export type { EventsOptions } from './resources/events.js';
export type { AccountEvent, AccountEventsOptions } from './resources/account-events.js';
export type { Webhooks } from './resources/webhooks.js';
export * from './types.js';
export type { components, paths } from './generated/openapi.js';
export { priceOf, priceRange } from './pricing.js';
export {
  webhooks,
  verify as verifyWebhook,
  unwrap as unwrapWebhook,
  WebhookVerificationError,
  type VerifyOptions,
  type WebhookRequestHeaders,
} from './webhooks.js';
