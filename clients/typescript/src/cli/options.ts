import { UsageError } from './exit-codes.js';

/**
 * The numeric options, checked before gen does anything: a value JavaScript would turn into NaN
 * (`--timeout 10s` read as Number('10s')) made the wait's deadline never pass and its sleeps last
 * ~1 ms, so one typo spent the key's whole rate limit. Every numeric option is parsed here once.
 */
export interface NumericOptions {
  /** --timeout, in milliseconds. */
  timeoutMs?: number | undefined;
  /** --max-credits. */
  maxCredits?: number | undefined;
  /** --limit (gen list). */
  limit?: number | undefined;
}

const unitMs: Record<string, number> = { '': 1000, s: 1000, m: 60_000, h: 3_600_000 };
const longestWaitMs = 24 * 3_600_000;

/** `30` (seconds), `30s`, `5m`, `1.5h`: from 1 second to 24 hours. */
export function parseDuration(option: string, text: string): number {
  const match = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text.trim());
  const ms = match ? Math.round(Number(match[1]) * unitMs[match[2] ?? '']!) : NaN;
  if (!(ms >= 1000 && ms <= longestWaitMs))
    throw new UsageError(
      `--${option} ${text}: expected a duration from 1s to 24h, such as 30 (seconds), 30s, 5m or 1h; nothing was sent.`,
    );
  return ms;
}

/** A whole number from `min` (digits only: no `1e3`, no `0x10`, no sign). */
export function parseWholeNumber(option: string, text: string, min: number): number {
  const value = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(Number.isSafeInteger(value) && value >= min))
    throw new UsageError(`--${option} ${text}: expected a whole number from ${min}; nothing was sent.`);
  return value;
}

export function parseNumericOptions(values: {
  timeout?: string | undefined;
  'max-credits'?: string | undefined;
  limit?: string | undefined;
}): NumericOptions {
  return {
    timeoutMs: values.timeout === undefined ? undefined : parseDuration('timeout', values.timeout),
    maxCredits:
      values['max-credits'] === undefined
        ? undefined
        : parseWholeNumber('max-credits', values['max-credits'], 0),
    limit: values.limit === undefined ? undefined : parseWholeNumber('limit', values.limit, 1),
  };
}
