import type { ValidationIssue } from '../../vocabulary/errors.js';

/**
 * The `Cancel-After` header of POST /v1/generations (the header Replicate's users know): a
 * duration from the generation's creation after which, if no provider has been sent its job yet,
 * it is canceled and refunded (the submit checks it; see submitDeadlinePassed). Written as
 * Replicate accepts it: whole hours, minutes and seconds in that order (`30s`, `5m`, `1h30m`,
 * `2h`, `1h30m45s`) or plain seconds (`90`).
 */

/** The longest deadline a generation may carry: a day, as a batch's completion window. */
export const cancelAfterMaxSeconds = 24 * 3600;

const durationPattern = /^(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,6})s)?$/;

/** The header read: its duration in seconds (null: none sent), or the issue that names it. */
export type CancelAfterCheck = { ok: true; seconds: number | null } | { ok: false; issue: ValidationIssue };

/** Reads the header; `minSeconds` is the shortest deadline accepted (CANCEL_AFTER_MIN_SECONDS). */
export function checkCancelAfter(
  header: string | string[] | undefined,
  minSeconds: number,
): CancelAfterCheck {
  if (header === undefined) return { ok: true, seconds: null };
  const value = (Array.isArray(header) ? header.join(',') : header).trim();
  const seconds = parseDuration(value);
  if (seconds !== null && seconds >= minSeconds && seconds <= cancelAfterMaxSeconds)
    return { ok: true, seconds };
  return {
    ok: false,
    issue: {
      field: 'Cancel-After',
      code: 'invalid_value',
      message: `Must be a duration from ${minSeconds}s to 24h: whole hours, minutes and seconds (for example 30s, 5m, 1h30m) or plain seconds.`,
    },
  };
}

/** Seconds in `value`, or null when it is not a duration. */
function parseDuration(value: string): number | null {
  if (/^\d{1,6}$/.test(value)) return Number(value);
  const parts = value === '' ? null : durationPattern.exec(value);
  if (!parts) return null;
  const [, hours, minutes, seconds] = parts.map(Number);
  return (hours || 0) * 3600 + (minutes || 0) * 60 + (seconds || 0);
}
