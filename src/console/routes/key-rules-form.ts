import type { CommonQueryMethods } from 'slonik';
import { findKeyState, isRestricted, type KeyRules, type KeyState } from '../../db/key-limits.js';
import { InvalidKeyRules, parseKeyRules } from '../../generations/admission/key-rules.js';
import { formField } from '../request-fields.js';

/*
 * A key's rules in the console: the form that sets them (the Keys page, Connected apps, the consent
 * page) and how a row shows them.
 */

/** The limits an app gets unless the person changes them on the consent page: 100 credits a day. */
export const appDefaultLimits = { spend_limit: '100', limit_reset: 'daily', models: '', access: 'full' };

/**
 * The rules a form sent (`spend_limit` empty: none; `models` empty: all), or why they are not rules.
 * A field the form did not send at all takes its value from `absent` (the consent page's defaults).
 */
export function rulesOfForm(
  body: unknown,
  absent: Record<string, string> = {},
): { ok: true; rules: Partial<KeyRules> } | { ok: false; message: string } {
  const field = (name: string) => (formField(body, name) ?? absent[name] ?? '').trim();
  try {
    const rules = parseKeyRules({
      spendLimit: field('spend_limit') === '' ? 'none' : field('spend_limit'),
      reset: field('limit_reset') || 'daily',
      models: field('models') === '' ? 'all' : field('models'),
      access: field('access') || 'full',
    });
    return { ok: true, rules };
  } catch (error) {
    if (error instanceof InvalidKeyRules)
      return { ok: false, message: `Nothing was changed: ${error.message}` };
    throw error;
  }
}

/** The form's limit fields as sent (to show them again beside the reason they were refused). */
export function limitsOfForm(body: unknown) {
  const field = (name: string) => (formField(body, name) ?? '').trim().slice(0, 1000);
  return {
    spend_limit: field('spend_limit'),
    limit_reset: field('limit_reset') || 'daily',
    models: field('models'),
    access: field('access') || 'full',
  };
}

/** Why this session may not make or change keys and apps: its own key has rules (null: it may). */
export async function manageRefusal(
  db: CommonQueryMethods,
  user: { keyId: string; accountId: string },
): Promise<string | null> {
  const own = await findKeyState(db, user.keyId, user.accountId);
  if (own && !isRestricted(own)) return null;
  return 'This session was opened with a key that has rules of its own (a spend limit, a list of models or read-only access): it may not make or change keys and apps. Sign in with a key without rules to do that.';
}

const windowWords = {
  daily: 'today (UTC)',
  weekly: 'this week',
  monthly: 'this month',
  none: 'in all',
} as const;

/** A key's rules as a row shows them, and the values its form starts from. */
export function keyRulesView(state: KeyState, reachedAt: string | null) {
  return {
    limit:
      state.spend_limit === null
        ? null
        : {
            spent: Math.min(state.window_spent, state.spend_limit),
            max: state.spend_limit,
            words: `${state.window_spent} of ${state.spend_limit} credits ${windowWords[state.limit_reset]}`,
            resetsAt: state.resets_at,
            reachedAt,
          },
    models: state.models === null ? 'all' : state.models.join(', ') || 'none',
    access: state.access === 'full' ? 'full' : 'read-only',
    form: {
      spend_limit: state.spend_limit === null ? '' : String(state.spend_limit),
      limit_reset: state.limit_reset,
      models: state.models === null ? '' : state.models.join(', '),
      access: state.access,
    },
  };
}
