import { z } from 'zod';
import { batchEventTypes } from '../db/batch-events.js';
import { batchStatuses } from '../db/batches.js';

/** The Batch object and its events as clients read them (below schemas.ts: its account events name them). */

const timestamp = z.string().datetime({ precision: 3 }).describe('UTC, ISO 8601 with milliseconds and Z.');

const count = z.number().int().nonnegative();

export const batchSchema = z.object({
  id: z.string().regex(/^batch_/),
  status: z.enum(batchStatuses),
  completion_window: z.string(),
  request_counts: z
    .object({
      total: count,
      pending: count.describe('Not started yet.'),
      queued: count.describe('Started, their generation not ended yet.'),
      succeeded: count,
      failed: count,
      rejected: count.describe('Refused at admission (insufficient_credits, say): never charged.'),
      refused: count.describe('Refused when started, with no generation (the model was withdrawn, say).'),
      canceled: count.describe('Never started: the batch was canceled first. Never charged.'),
      expired: count.describe('Never started: the completion window passed first. Never charged.'),
    })
    .describe("The batch's lines by where they stand: the generation statuses for lines started."),
  credits_quoted: z
    .number()
    .int()
    .nonnegative()
    .describe('Every line at its price when the batch was created.'),
  credits_spent: z.number().int().nonnegative().describe('Debited for its lines so far, refunds taken off.'),
  metadata: z.record(z.string(), z.string()).nullable(),
  created_at: timestamp,
  started_at: timestamp.nullable(),
  completed_at: timestamp.nullable(),
  expires_at: timestamp.describe('The end of the completion window: lines not started by then expire.'),
});

/** A batch's event: in the account's event stream (GET /v1/events) beside its generations' events. */
export const batchEventSchema = z.object({
  id: z.number().int().positive().describe('Unique within the batch and increasing (1, 2, 3…).'),
  type: z.enum(batchEventTypes),
  created_at: timestamp.describe('When it was committed.'),
  data: batchSchema.describe('The batch as it was then (batch.progress: at most one a second).'),
});
