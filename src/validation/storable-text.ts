import { z } from 'zod';
import type { ValidationIssue } from '../vocabulary/errors.js';

/**
 * Text the service can store. PostgreSQL's `text` refuses NUL, and `jsonb` refuses `\u0000` and
 * unpaired UTF-16 surrogates (a JSON string can carry them; UTF-8 cannot). Every string that comes
 * in — body values and keys at any depth, query and path parameters — is checked here, at
 * validation, so such text is a 400 naming its field rather than a failure later (an admission that
 * retries forever). Anything else is accepted: control characters, emoji, right-to-left text.
 */
const unpairedSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const unstorable = new RegExp(`\\u0000|${unpairedSurrogate.source}`);
const unstorableEverywhere = new RegExp(unstorable.source, 'g');

const UNSTORABLE_TEXT = 'unstorable_text';
const message = 'Contains a NUL character or an unpaired surrogate, which cannot be stored.';
const keyMessage = 'This field name contains a NUL character or an unpaired surrogate.';

/** Most issues reported for one input: the answer (and the recorded rejection) stay small. */
export const MAX_ISSUES = 20;
/** Deepest nesting of arrays and objects accepted in a body. */
const MAX_NESTING = 32;

function isStorableText(text: string): boolean {
  return !unstorable.test(text);
}

/** The text with what cannot be stored replaced by U+FFFD: for naming input in messages and records. */
export function toStorableText(text: string): string {
  return text.replace(unstorableEverywhere, '\ufffd');
}

/** The dotted name of a field, as issues give it (storable, whatever the keys held). */
export function fieldName(path: ReadonlyArray<string | number>): string {
  return toStorableText(path.join('.'));
}

/**
 * One issue per field holding text that cannot be stored: string values and object keys, at any
 * depth of a parsed JSON value (or a query or params object). Walks without recursion, and refuses
 * nesting deeper than MAX_NESTING, so no body can exhaust the stack here or later.
 */
export function unstorableTextIssues(value: unknown, path: Array<string | number> = []): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const pending: Array<{ value: unknown; path: Array<string | number> }> = [{ value, path }];
  while (pending.length > 0 && issues.length < MAX_ISSUES) {
    const next = pending.pop()!;
    if (typeof next.value === 'string') {
      if (!isStorableText(next.value))
        issues.push({ field: fieldName(next.path), code: UNSTORABLE_TEXT, message });
      continue;
    }
    if (typeof next.value !== 'object' || next.value === null) continue;
    if (next.path.length >= path.length + MAX_NESTING) {
      issues.push({
        field: fieldName(next.path),
        code: 'too_deep',
        message: `Arrays and objects may be nested at most ${MAX_NESTING} deep.`,
      });
      continue;
    }
    const entries = Array.isArray(next.value)
      ? next.value.map((item, i) => [i, item] as const)
      : Object.entries(next.value);
    // Pushed in reverse, so fields are reported in the order they came.
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, item] = entries[i]!;
      const itemPath = [...next.path, key];
      if (typeof key === 'string' && !isStorableText(key)) {
        issues.push({ field: fieldName(itemPath), code: UNSTORABLE_TEXT, message: keyMessage });
        continue;
      }
      pending.push({ value: item, path: itemPath });
    }
  }
  return issues.slice(0, MAX_ISSUES);
}

/**
 * A zod string of storable text. The NUL rule is a pattern, so the published JSON Schema states it;
 * unpaired surrogates cannot be written as a JSON Schema pattern and are described instead.
 */
/** "No NUL character", the part of the rule a JSON Schema pattern can state (its `source` is published). */
// eslint-disable-next-line no-control-regex -- NUL is the point.
export const noNulPattern = /^[^\u0000]*$/;

export function storableString(base: z.ZodString = z.string()) {
  return base
    .regex(noNulPattern, message)
    .refine((text) => !unpairedSurrogate.test(text), { message, params: { reason: UNSTORABLE_TEXT } });
}
