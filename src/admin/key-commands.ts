import {
  describeKeyRules,
  keyAccessLevels,
  keyLimitResets,
  setKeyRules,
  type KeyAccess,
  type KeyLimitReset,
  type KeyRules,
} from '../db/key-limits.js';
import { optional, str, UsageError, type Command } from './command.js';

/**
 * Support's command for a key's own rules (issue 46): its spend limit and window, its models and
 * its access. An app connected over OAuth is a key too (its id is in `show-account`).
 */
export const keyCommands: Record<string, Command> = {
  'set-key-limits': {
    summary:
      "Set a key's (or connected app's) spend limit and window, its models and its access; what is not given stays.",
    usage:
      '--key KEY_ID [--spend-limit N|none] [--reset daily|weekly|monthly|none] [--models a,b|all] [--access full|read_only]',
    options: {
      key: { type: 'string', required: true },
      'spend-limit': { type: 'string' },
      reset: { type: 'string' },
      models: { type: 'string' },
      access: { type: 'string' },
    },
    async run({ db }, v) {
      const rules = parseKeyRules({
        spendLimit: optional(v['spend-limit']),
        reset: optional(v.reset),
        models: optional(v.models),
        access: optional(v.access),
      });
      if (Object.keys(rules).length === 0)
        throw new UsageError('Give at least one of --spend-limit, --reset, --models, --access.');
      const state = await setKeyRules(db, str(v.key), rules);
      return { json: { key: state }, text: [`${state.id}  ${describeKeyRules(state)}`] };
    },
  },
};

/** The rules given as words (the CLI's options, the console's form): a UsageError names a bad one. */
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
      throw new UsageError('The spend limit must be a whole number of credits (0 or more), or none.');
    rules.spend_limit = text === 'none' ? null : n;
  }
  if (given.reset !== undefined) {
    if (!(keyLimitResets as readonly string[]).includes(given.reset))
      throw new UsageError(`The reset must be one of ${keyLimitResets.join(', ')}.`);
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
      throw new UsageError(`The access must be one of ${keyAccessLevels.join(', ')}.`);
    rules.access = given.access as KeyAccess;
  }
  return rules;
}
