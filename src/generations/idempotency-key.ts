import { z } from 'zod';

/*
 * The Idempotency-Key rule, once: 1 to 128 printable ASCII characters, no spaces (0x21 `!` to
 * 0x7E `~`). Every door holds a key to it: the header's check (checkIdempotencyKey), the list's
 * `idempotency_key` filter, the MCP tool's `idempotency_key` argument, and the OpenAPI document's
 * two headers (POST /v1/generations and POST /v1/batches).
 */

const maxLength = 128;
const first = 0x21;
const last = 0x7e;

/** The character range as a regular expression writes it (`\x21-\x7e`; `upper`: `\x21-\x7E`). */
function range(upper = false): string {
  const hex = (code: number) => `\\x${upper ? code.toString(16).toUpperCase() : code.toString(16)}`;
  return `${hex(first)}-${hex(last)}`;
}

/** The rule in words, as the API's answers and its document say it. */
export const idempotencyKeyWords = `1 to ${maxLength} printable ASCII characters without spaces`;

/** An Idempotency-Key, whole. */
export const idempotencyKeyPattern = new RegExp(`^[${range()}]{1,${maxLength}}$`);

/** The message when a key breaks the rule. */
export const idempotencyKeyMessage = `Must be ${idempotencyKeyWords}.`;

/** The rule as a zod string: the list's filter and the MCP tool's argument parse with it. */
export const idempotencyKeySchema = z.string().regex(idempotencyKeyPattern, idempotencyKeyMessage);

/**
 * The header's JSON Schema as the OpenAPI document publishes it: the same rule as a length and a
 * character class (in the upper-case hex it was first published with).
 */
export const idempotencyKeyHeaderSchema = {
  type: 'string',
  minLength: 1,
  maxLength,
  pattern: `^[${range(true)}]+$`,
};
