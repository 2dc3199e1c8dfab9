import type { components } from './generated/openapi.js';

/** A generation, the same shape at every stage (create, get, list item, replay). */
export type Generation = components['schemas']['Generation'];
export type GenerationStatus = Generation['status'];
/** One page of GET /v1/generations. */
export type GenerationListPage = components['schemas']['GenerationList'];
export type CreditBalance = components['schemas']['CreditBalance'];
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
  affordable: boolean;
}

export const terminalStatuses: ReadonlySet<string> = new Set(['succeeded', 'failed', 'rejected']);
export const isTerminal = (generation: Pick<Generation, 'status'>): boolean =>
  terminalStatuses.has(generation.status);

/** A batch's status: `validating` and `in_progress` until it ends `completed`, `canceled` or `expired`. */
export type BatchStatus = 'validating' | 'in_progress' | 'completed' | 'canceling' | 'canceled' | 'expired';

/** GET /v1/batches/{id}: a batch, its lines counted by where they stand, and the credits it spent. */
export interface Batch {
  id: string;
  status: BatchStatus;
  completion_window: string;
  request_counts: {
    total: number;
    /** Not started yet. */
    pending: number;
    /** Started, their generation not ended yet. */
    queued: number;
    succeeded: number;
    failed: number;
    /** Refused at admission (insufficient_credits, say): never charged. */
    rejected: number;
    /** Refused when started, with no generation (the model was withdrawn, say). */
    refused: number;
    /** Never started: the batch was canceled first. Never charged. */
    canceled: number;
    /** Never started: the completion window passed first. Never charged. */
    expired: number;
  };
  credits_quoted: number;
  credits_spent: number;
  metadata: Record<string, string> | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  expires_at: string;
}

/** One page of GET /v1/batches, newest first. */
export interface BatchListPage {
  data: Batch[];
  next_cursor: string | null;
}

/** One line of a batch: its `custom_id` (unique in the batch) and a generation's body. */
export interface BatchRequestLine extends GenerationRequest {
  custom_id: string;
}

/**
 * One line of GET /v1/batches/{id}/results (JSONL, input order): its index and custom_id, and its
 * generation, or the error it ended with without one (canceled or expired before it started, refused).
 */
export interface BatchResultLine {
  line: number;
  custom_id: string;
  generation: Generation | null;
  error: { code: string; message: string } | null;
}

export const batchTerminalStatuses: ReadonlySet<string> = new Set(['completed', 'canceled', 'expired']);
export const isBatchTerminal = (batch: Pick<Batch, 'status'>): boolean =>
  batchTerminalStatuses.has(batch.status);
