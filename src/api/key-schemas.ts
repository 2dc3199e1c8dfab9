import { z } from 'zod';
import type { KeyState } from '../db/key-limits.js';
import { keyAccessLevels, keyLimitResets } from '../db/key-limits.js';

const timestamp = z.string().datetime({ precision: 3 }).describe('UTC, ISO 8601 with milliseconds and Z.');
const credits = z.number().int().nonnegative();

const spendLimit = credits
  .nullable()
  .describe('Credits the key may spend in each window (`limit_reset`); null: no limit of its own.');
const limitReset = z
  .enum(keyLimitResets)
  .describe(
    'When the window restarts: each UTC day, ISO week (Monday to Sunday, UTC) or calendar month; `none`: a lifetime limit.',
  );
const limitRemaining = credits
  .nullable()
  .describe('What is left of the limit in the current window (refunds give back); null without a limit.');
const resetsAt = timestamp
  .nullable()
  .describe('When the current window ends and the limit is whole again; null for a lifetime limit, or none.');

/** GET /v1/key: the key in use, its rules, and what it has spent. */
export const apiKeySchema = z.object({
  id: z.string().describe("The key's id (`key_…`): not the key itself, which is never shown again."),
  kind: z
    .enum(['key', 'oauth'])
    .describe('`key`: an API key; `oauth`: an app connected over OAuth (its access token).'),
  name: z.string().nullable(),
  prefix: z.string().describe('The first characters of the key, as the console shows it.'),
  access: z
    .enum(keyAccessLevels)
    .describe(
      '`read_only`: GET routes, event streams and quotes only; every create, cancel or change is 403 `key_read_only`.',
    ),
  models: z
    .array(z.string())
    .nullable()
    .describe(
      'The models the key may use (403 `key_model_not_allowed` for others); null: every model, present and future.',
    ),
  spend_limit: spendLimit,
  limit_reset: limitReset,
  limit_remaining: limitRemaining,
  resets_at: resetsAt,
  spend: z
    .object({
      today: z.number().int(),
      this_week: z.number().int(),
      this_month: z.number().int(),
      total: z.number().int(),
    })
    .describe('Credits the key spent (debits less refunds) this UTC day, ISO week, month and in all.'),
  created_at: timestamp,
});
export type ApiKeyView = z.infer<typeof apiKeySchema>;

export function toApiKey(state: KeyState): ApiKeyView {
  return {
    id: state.id,
    kind: state.kind,
    name: state.name,
    prefix: state.display_prefix,
    access: state.access,
    models: state.models,
    spend_limit: state.spend_limit,
    limit_reset: state.limit_reset,
    limit_remaining: state.limit_remaining,
    resets_at: state.resets_at,
    spend: state.spend,
    created_at: state.created_at,
  };
}

export const keyEventTypes = ['key.spend_limit_reached'] as const;

/** A key's event in the account's event stream: for now, its first refusal by its limit in a window. */
export const keyEventSchema = z.object({
  id: z.number().int().positive().describe('Unique within the key and increasing (1, 2, 3…).'),
  type: z.enum(keyEventTypes),
  created_at: timestamp.describe('When it was committed.'),
  data: z
    .object({
      id: z.string().describe('The key (`key_…`), as GET /v1/key names it.'),
      name: z.string().nullable(),
      prefix: z.string(),
      spend_limit: credits,
      limit_reset: limitReset,
      limit_remaining: credits.describe('What was left of the limit when the request was refused.'),
      resets_at: resetsAt,
      model: z.string().describe('The model of the refused request.'),
      price: credits.describe('Its price: more than what was left.'),
    })
    .describe("The key's limit as it stood when a request was first refused by it in this window."),
});
