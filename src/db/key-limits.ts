import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { NotFound } from './accounts-repository.js';

/**
 * A key's own rules (migration 0034) and what it has spent. The limit is enforced by
 * admit_generation() under the account's lock; this module reads the state (GET /v1/key, quotes,
 * the console, the admin CLI) and changes the rules.
 */

export const keyLimitResets = ['daily', 'weekly', 'monthly', 'none'] as const;
export type KeyLimitReset = (typeof keyLimitResets)[number];
export const keyAccessLevels = ['full', 'read_only'] as const;
export type KeyAccess = (typeof keyAccessLevels)[number];

/** The rules a key carries: a spend limit (null: none) per window, a list of models (null: all), its access. */
export interface KeyRules {
  spend_limit: number | null;
  limit_reset: KeyLimitReset;
  models: string[] | null;
  access: KeyAccess;
}

const keyStateRow = z.object({
  id: z.string(),
  account_id: z.string(),
  kind: z.enum(['key', 'oauth']),
  name: z.string().nullable(),
  display_prefix: z.string(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  access: z.enum(keyAccessLevels),
  models: z.array(z.string()).nullable(),
  spend_limit: z.number().nullable(),
  limit_reset: z.enum(keyLimitResets),
  window_start: z.string().nullable(),
  resets_at: z.string().nullable(),
  window_spent: z.coerce.number(),
  spent_today: z.coerce.number(),
  spent_this_week: z.coerce.number(),
  spent_this_month: z.coerce.number(),
  spent_total: z.coerce.number(),
});

/** A key's rules and spend as they stand now. */
export interface KeyState extends KeyRules {
  id: string;
  account_id: string;
  kind: 'key' | 'oauth';
  name: string | null;
  display_prefix: string;
  created_at: string;
  revoked_at: string | null;
  /** What is left of the limit in the current window; null without a limit. */
  limit_remaining: number | null;
  /** When the current window ends (ISO); null for a lifetime limit or none. */
  resets_at: string | null;
  /** Credits spent (debits less refunds) in the limit's current window. */
  window_spent: number;
  spend: { today: number; this_week: number; this_month: number; total: number };
}

function toKeyState(row: z.infer<typeof keyStateRow>): KeyState {
  const { window_start: _start, spent_today, spent_this_week, spent_this_month, spent_total, ...rest } = row;
  return {
    ...rest,
    resets_at: row.spend_limit === null ? null : row.resets_at,
    limit_remaining: row.spend_limit === null ? null : Math.max(row.spend_limit - row.window_spent, 0),
    spend: {
      today: spent_today,
      this_week: spent_this_week,
      this_month: spent_this_month,
      total: spent_total,
    },
  };
}

const stateColumns = sql.fragment`k.id, k.account_id, k.kind, k.name, k.display_prefix, k.created_at, k.revoked_at,
  k.access, k.models, k.spend_limit, k.limit_reset, w.starts::text AS window_start, w.resets_at,
  key_spend_in(k.id, w.starts) AS window_spent,
  key_spend_in(k.id, (now() AT TIME ZONE 'UTC')::date) AS spent_today,
  key_spend_in(k.id, date_trunc('week', now() AT TIME ZONE 'UTC')::date) AS spent_this_week,
  key_spend_in(k.id, date_trunc('month', now() AT TIME ZONE 'UTC')::date) AS spent_this_month,
  key_spend_in(k.id, NULL) AS spent_total`;
const fromKeys = sql.fragment`api_keys k CROSS JOIN LATERAL key_limit_window(k.limit_reset, now()) w`;

/** One key's state; null when there is no such key (in `accountId`, when given). */
export async function findKeyState(
  db: CommonQueryMethods,
  keyId: string,
  accountId?: string,
): Promise<KeyState | null> {
  const row = await db.maybeOne(sql.type(keyStateRow)`
    SELECT ${stateColumns} FROM ${fromKeys}
    WHERE k.id = ${keyId} ${accountId === undefined ? sql.fragment`` : sql.fragment`AND k.account_id = ${accountId}`}`);
  return row && toKeyState(row);
}

/** The account's keys of a kind ('key': pasted keys; 'oauth': connected apps), newest first. */
export async function listKeyStates(
  db: CommonQueryMethods,
  accountId: string,
  kind: 'key' | 'oauth',
): Promise<KeyState[]> {
  const rows = await db.any(sql.type(keyStateRow)`
    SELECT ${stateColumns} FROM ${fromKeys}
    WHERE k.account_id = ${accountId} AND k.kind = ${kind} ORDER BY k.created_at DESC, k.id`);
  return rows.map(toKeyState);
}

const changedRow = z.object({ id: z.string() });

/**
 * Changes a key's rules (those given; `models: []` allows none, null all) and returns its state.
 * Every process's authentication cache drops the key on the change (the api_keys trigger), and
 * the debit reads the limit in its own statement, so a change holds from the next request on.
 */
export async function setKeyRules(
  db: CommonQueryMethods,
  keyId: string,
  rules: Partial<KeyRules>,
  accountId?: string,
): Promise<KeyState> {
  const sets = [
    ...('spend_limit' in rules ? [sql.fragment`spend_limit = ${rules.spend_limit ?? null}`] : []),
    ...(rules.limit_reset ? [sql.fragment`limit_reset = ${rules.limit_reset}`] : []),
    ...('models' in rules
      ? [sql.fragment`models = ${rules.models ? sql.array(uniqueSorted(rules.models), 'text') : null}`]
      : []),
    ...(rules.access ? [sql.fragment`access = ${rules.access}`] : []),
  ];
  if (sets.length > 0) {
    const changed = await db.maybeOneFirst(sql.type(changedRow)`
      UPDATE api_keys k SET ${sql.join(sets, sql.fragment`, `)}
      WHERE k.id = ${keyId} ${accountId === undefined ? sql.fragment`` : sql.fragment`AND k.account_id = ${accountId}`}
      RETURNING k.id`);
    if (!changed) throw new NotFound(`no API key ${keyId}`);
  }
  const state = await findKeyState(db, keyId, accountId);
  if (!state) throw new NotFound(`no API key ${keyId}`);
  return state;
}

const uniqueSorted = (models: readonly string[]) => [...new Set(models)].sort();

/** A key's rules in a line of words (the admin CLI, the console). */
export function describeKeyRules(state: KeyState): string {
  const limit =
    state.spend_limit === null
      ? 'no spend limit'
      : `${state.window_spent}/${state.spend_limit} credits ${state.limit_reset === 'none' ? 'in all' : state.limit_reset}`;
  const models = state.models === null ? 'all models' : `models ${state.models.join(', ') || '(none)'}`;
  return `${limit}, ${models}, ${state.access === 'full' ? 'full access' : 'read-only'}`;
}

const keyLimitRow = z.object({
  spend_limit: z.number(),
  limit_reset: z.enum(keyLimitResets),
  limit_remaining: z.coerce.number(),
  resets_at: z.string().nullable(),
});
/** A key's limit now: what is left of it in its window and when that ends. */
export type KeyLimitNow = z.infer<typeof keyLimitRow>;

/** The key's limit now (one query: quotes read it); null when the key has none. */
export async function findKeyLimit(db: CommonQueryMethods, keyId: string): Promise<KeyLimitNow | null> {
  return db.maybeOne(sql.type(keyLimitRow)`
    SELECT k.spend_limit, k.limit_reset, w.resets_at,
           greatest(k.spend_limit - key_spend_in(k.id, w.starts), 0) AS limit_remaining
    FROM ${fromKeys} WHERE k.id = ${keyId} AND k.spend_limit IS NOT NULL`);
}

const reachedRow = z.object({ api_key_id: z.string(), reached_at: z.string() });

/** The account's keys whose limit refused a request in its current window, and when it first did (key.spend_limit_reached). */
export async function limitsReachedNow(
  db: CommonQueryMethods,
  accountId: string,
): Promise<Map<string, string>> {
  const rows = await db.any(sql.type(reachedRow)`
    SELECT e.api_key_id, e.created_at AS reached_at
    FROM ${fromKeys} JOIN key_events e ON e.api_key_id = k.id
    WHERE k.account_id = ${accountId} AND e.type = 'key.spend_limit_reached'
      AND e.window_start = coalesce(w.starts, '-infinity'::date)`);
  return new Map(rows.map((r) => [r.api_key_id, r.reached_at]));
}

/** Whether a key is held to rules of its own (then it may not make or change keys and apps in the console). */
export const isRestricted = (state: KeyRules): boolean =>
  state.access !== 'full' || state.models !== null || state.spend_limit !== null;
