/**
 * When a request is tried again, and after how long. One policy for every method, POST included:
 * a create always carries an Idempotency-Key, so a retried POST can never make (or charge) a
 * second generation.
 */

/** Answers worth another try: the request may not have been processed, or the server asks for patience. */
export const retryableStatuses: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504]);

/** The longest Retry-After the client sleeps through; a longer one is thrown to the caller. */
export const maxRetryAfterMs = 60_000;

const baseDelayMs = 500;
const maxBackoffMs = 8_000;

/**
 * Retry-After as milliseconds: delta-seconds (fractions accepted) or an HTTP date. null when absent
 * or unreadable; never negative.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return null;
  return Math.max(0, date - now);
}

/**
 * Exponential backoff with full jitter: a random delay in [0, min(8 s, 0.5 s × 2^retry)). A delay is
 * a float and is always slept (peers' clients have skipped non-integer delays).
 */
export function backoffMs(retry: number, random: () => number = Math.random): number {
  return random() * Math.min(maxBackoffMs, baseDelayMs * 2 ** retry);
}

/** Whether an HTTP status is retried (never another 4xx, never 409 idempotency_conflict). */
export function isRetryableStatus(status: number): boolean {
  return retryableStatuses.has(status);
}

/** What the onRetry hook is told before each sleep. */
export interface RetryEvent {
  method: string;
  path: string;
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  /** The HTTP status, or undefined for a network error or a timeout. */
  status: number | undefined;
  error: Error;
  idempotencyKey: string | undefined;
}
