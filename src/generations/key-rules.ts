import type { CommonQueryMethods } from 'slonik';
import {
  findKeyLimit,
  keyAccessLevels,
  keyLimitResets,
  type KeyAccess,
  type KeyLimitNow,
  type KeyLimitReset,
  type KeyRules,
} from '../db/key-limits.js';
import type { CreditBalance } from '../db/credits-repository.js';
import { ApiError } from '../errors.js';
import { keyModelNotAllowedMessage } from '../workflows/generation-errors.js';

/*
 * A key's rules at the front doors (migration 0034). The doors refuse early what the key may not
 * do; admission's SQL holds the same rules exactly (a batch line, a key changed meanwhile), and is
 * alone in checking the spend limit, where the debit is.
 */

/** The key's rules as authentication read them (Principal): its models, null for all. */
export interface KeyModels {
  models?: readonly string[] | null;
}

/** 403 key_model_not_allowed for a body naming a model outside the key's list; the body is not read further. */
export function checkKeyModel(principal: KeyModels, body: unknown): void {
  const model = (body as { model?: unknown } | null)?.model;
  if (principal.models && typeof model === 'string' && !principal.models.includes(model))
    throw new ApiError('key_model_not_allowed', keyModelNotAllowedMessage(model, principal.models));
}

/** A read-only key's answer where it would create, cancel or change (every door says the same). */
export const readOnlyRefusal = (): ApiError =>
  new ApiError(
    'key_read_only',
    'This API key is read-only: it may read, stream and quote, not create, cancel or change. Use a key with full access.',
  );

/** What a quote adds about whether a create would be admitted: the balance, and the key's limit. */
export interface Affordability {
  /** The balance a create draws from (subscription credits first). */
  balance: { subscription: number; one_time: number; total: number };
  affordable: boolean;
  /** Which bound refuses it: `balance` (402 insufficient_credits) or `key_spend_limit`; null: neither. */
  limited_by: 'balance' | 'key_spend_limit' | null;
  /** The key's own limit now; null when it has none. */
  key_limit: KeyLimitNow | null;
}

/**
 * Every quote's answer (POST /v1/generations/quote, POST /v1/batches/quote, the MCP tool `quote`):
 * what was priced, and whether its `credits` are within both the balance and what is left of the
 * key's limit, as admission would judge now.
 */
export async function quoteAnswer<Priced extends { credits: number }>(
  db: CommonQueryMethods,
  keyId: string,
  priced: Priced,
  balance: CreditBalance,
): Promise<Priced & Affordability> {
  const price = priced.credits;
  const keyLimit = await findKeyLimit(db, keyId);
  const limitedBy =
    balance.credits < price
      ? 'balance'
      : keyLimit && keyLimit.limit_remaining < price
        ? 'key_spend_limit'
        : null;
  return {
    ...priced,
    balance: {
      subscription: balance.subscription_credits,
      one_time: balance.one_time_credits,
      total: balance.credits,
    },
    affordable: limitedBy === null,
    limited_by: limitedBy,
    key_limit: keyLimit,
  };
}

/** A key's rules given in words that do not make rules (a limit that is no number, say). */
export class InvalidKeyRules extends Error {
  override readonly name = 'InvalidKeyRules';
}

/** The rules given as words (the CLI's options, the console's forms): InvalidKeyRules names a bad one. */
export function parseKeyRules(given: {
  spendLimit?: string | undefined;
  reset?: string | undefined;
  models?: string | undefined;
  access?: string | undefined;
}): Partial<KeyRules> {
  const rules: Partial<KeyRules> = {};
  if (given.spendLimit !== undefined) {
    const text = given.spendLimit.trim();
    const n = Number(text);
    if (text !== 'none' && (text === '' || !Number.isSafeInteger(n) || n < 0 || n > 2_147_483_647))
      throw new InvalidKeyRules('The spend limit must be a whole number of credits (0 or more), or none.');
    rules.spend_limit = text === 'none' ? null : n;
  }
  if (given.reset !== undefined) {
    if (!(keyLimitResets as readonly string[]).includes(given.reset))
      throw new InvalidKeyRules(`The reset must be one of ${keyLimitResets.join(', ')}.`);
    rules.limit_reset = given.reset as KeyLimitReset;
  }
  if (given.models !== undefined) {
    const text = given.models.trim();
    rules.models =
      text === 'all'
        ? null
        : text
            .split(/[\s,]+/)
            .map((m) => m.trim())
            .filter((m) => m !== '');
  }
  if (given.access !== undefined) {
    if (!(keyAccessLevels as readonly string[]).includes(given.access))
      throw new InvalidKeyRules(`The access must be one of ${keyAccessLevels.join(', ')}.`);
    rules.access = given.access as KeyAccess;
  }
  return rules;
}
