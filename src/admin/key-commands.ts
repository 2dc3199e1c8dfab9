import { describeKeyRules, setKeyRules, type KeyRules } from '../db/key-limits.js';
import { InvalidKeyRules, parseKeyRules } from '../generations/admission/key-rules.js';
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
      let rules: Partial<KeyRules>;
      try {
        rules = parseKeyRules({
          spendLimit: optional(v['spend-limit']),
          reset: optional(v.reset),
          models: optional(v.models),
          access: optional(v.access),
        });
      } catch (error) {
        if (error instanceof InvalidKeyRules) throw new UsageError(error.message);
        throw error;
      }
      if (Object.keys(rules).length === 0)
        throw new UsageError('Give at least one of --spend-limit, --reset, --models, --access.');
      const state = await setKeyRules(db, str(v.key), rules);
      return { json: { key: state }, text: [`${state.id}  ${describeKeyRules(state)}`] };
    },
  },
};
