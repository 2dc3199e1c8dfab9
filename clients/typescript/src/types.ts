import type { components, paths } from './generated/openapi.js';

/** A generation, the same shape at every stage (create, get, list item, replay). */
export type Generation = components['schemas']['Generation'];
export type GenerationStatus = Generation['status'];
/** One page of GET /v1/generations. */
export type GenerationListPage = components['schemas']['GenerationList'];
export type CreditBalance = components['schemas']['CreditBalance'];
/** GET /v1/key: the key in use, its access, models, spend limit (what is left, when it resets) and spend. */
export type ApiKey = components['schemas']['ApiKey'];
/** A key's limit now, as a quote gives it (null: the key has none). */
export type KeyLimit = NonNullable<components['schemas']['Quote']['key_limit']>;
/** One entry of a generation's event log (GET /v1/generations/{id}/events), and a webhook's body. */
export type GenerationEvent = components['schemas']['GenerationEvent'];
export type GenerationEventType = GenerationEvent['type'];
/** GET /v1/webhooks/secret: the account's webhook signing secret. */
export type WebhookSecret = components['schemas']['WebhookSecret'];
/** A model of GET /v1/models: options, allowed values, defaults, prices and its request JSON Schema. */
export type Model = components['schemas']['ModelList']['data'][number];
export type ModelOption = Model['options'][string];

/**
 * The body of POST /v1/generations: a model id and that model's fields at the top level (each
 * model's fields are in its `request_schema`).
 */
export interface GenerationRequest {
  model: string;
  prompt: string;
  images?: string[];
  [field: string]: unknown;
}

/** A generation as create() and run() return it: `idempotencyKey` names the key it was made with. */
export type KeyedGeneration = Generation & { readonly idempotencyKey: string };

/** POST /v1/generations/quote: what a create with this body would cost, and whether it is affordable. */
export interface Quote {
  model: string;
  credits: number;
  balance: { subscription: number; one_time: number; total: number };
  /** Whether the balance and what is left of the key's spend limit both cover it now. */
  affordable: boolean;
  /** Which bound refuses it: the balance, or the key's own spend limit; null when affordable. */
  limited_by: 'balance' | 'key_spend_limit' | null;
  key_limit: KeyLimit | null;
}

export const terminalStatuses: ReadonlySet<string> = new Set(['succeeded', 'failed', 'rejected']);
export const isTerminal = (generation: Pick<Generation, 'status'>): boolean =>
  terminalStatuses.has(generation.status);

/** GET /v1/batches/{id}: a batch, its lines counted by where they stand, and the credits it spent. */
export type Batch = components['schemas']['Batch'];
/** `validating` and `in_progress` until it ends `completed`, `canceled` or `expired`. */
export type BatchStatus = Batch['status'];
/** One page of GET /v1/batches, newest first. */
export type BatchListPage = components['schemas']['BatchList'];
/** POST /v1/batches/quote: the lines checked as a create's, their total now, the balance. */
export type BatchQuote = components['schemas']['BatchQuote'];
/** One line of a batch: its `custom_id` (unique in the batch) and a generation's body. */
export type BatchRequestLine = components['schemas']['BatchRequestLine'];
/**
 * One line of GET /v1/batches/{id}/results (JSONL, input order): its index and custom_id, and its
 * generation, or the error it ended with without one (canceled or expired before it started, refused).
 */
export type BatchResultLine =
  paths['/batches/{id}/results']['get']['responses'][200]['content']['application/x-ndjson'];

/**
 * One of a batch's own events (GET /v1/batches/{id}/events, GET /v1/events, a batch webhook's
 * body): batch.created, batch.progress, batch.completed/canceled/expired, with the batch as it was.
 */
export type BatchEvent = components['schemas']['BatchEvent'];
/** POST /v1/batches `webhook`: where the batch's own events are delivered, and which. */
export type BatchWebhookSubscription = components['schemas']['BatchWebhookSubscription'];

export const batchTerminalStatuses: ReadonlySet<string> = new Set(['completed', 'canceled', 'expired']);
export const isBatchTerminal = (batch: Pick<Batch, 'status'>): boolean =>
  batchTerminalStatuses.has(batch.status);
