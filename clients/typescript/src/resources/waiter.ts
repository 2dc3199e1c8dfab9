import { AbortedError, WaitTimeoutError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import { parseRetryAfter } from '../core/retry-policy.js';
import { abortableSleep } from '../core/signals.js';
import { isTerminal, type Generation } from '../types.js';
import { waitOnEvents } from './event-waiter.js';

export interface WaitOptions {
  /** Give up waiting (WaitTimeoutError; the generation goes on) after this long. Default 15 minutes. */
  timeoutMs?: number;
  /** Stops the waiting (AbortedError with the id); the generation goes on. */
  signal?: AbortSignal;
  /** Called with each new state of the generation (the first one included). */
  onUpdate?: (generation: Generation) => void;
  /** The polling interval when the server does not hold requests (default 2 s, plus up to 1 s of jitter). */
  pollIntervalMs?: number;
  /**
   * Wait on the generation's event stream (GET /v1/generations/{id}/events) rather than held GETs.
   * Default: when `timeoutMs` is longer than one held request (50 s), where one stream replaces a
   * GET every 50 s; an API without the stream (or past its cap) gets held GETs all the same.
   */
  useEvents?: boolean;
}

/** The longest a held request asks for: with its margin, no connection outlives 60 s (Node cuts at 300 s). */
const maxHoldSeconds = 50;
const holdMarginMs = 10_000;
export const defaultWaitTimeoutMs = 15 * 60_000;

/**
 * Waits for a generation to reach a terminal status. A long wait reads the generation's event
 * stream (waitOnEvents). Otherwise, or when the stream cannot serve, it asks the server to hold
 * each GET (`Prefer: wait=N`) and, when an answer shows the server did not (no
 * `Preference-Applied`), polls instead: every 2–3 s or the server's Retry-After, conditionally
 * (If-None-Match), so an unchanged generation costs a 304.
 */
export async function waitForGeneration(
  http: HttpCore,
  start: string | Generation,
  options: WaitOptions = {},
  idempotencyKey?: string,
): Promise<Generation> {
  // NaN would make a deadline that never passes and sleeps of ~1 ms: a tight loop on the key's rate limit.
  const timeoutMs = options.timeoutMs ?? defaultWaitTimeoutMs;
  if (!(timeoutMs >= 0)) throw new RangeError(`wait: timeoutMs must be a number ≥ 0, not ${timeoutMs}`);
  const base = options.pollIntervalMs ?? 2000;
  if (!(base >= 0 && base < Infinity))
    throw new RangeError(`wait: pollIntervalMs must be a finite number ≥ 0, not ${base}`);
  const id = typeof start === 'string' ? start : start.id;
  let current: Generation | undefined = typeof start === 'string' ? undefined : start;
  if (current) options.onUpdate?.(current);
  if (current && isTerminal(current)) return current;
  const deadline = Date.now() + timeoutMs;
  let holds: boolean | undefined; // unknown until the first answer tells
  let etag: string | undefined;
  let lastSeen = current ? JSON.stringify(current) : '';
  // Resumed from an id with someone watching: the state as it is now comes first (a held request
  // would report nothing until the generation is done), then the held requests.
  let readNow = current === undefined && options.onUpdate !== undefined;
  const aborted = (cause?: unknown) =>
    new AbortedError(`Stopped waiting for generation ${id}; it goes on.`, {
      generationId: id,
      ...(idempotencyKey ? { idempotencyKey } : {}),
      cause,
    });

  if (options.useEvents ?? timeoutMs > maxHoldSeconds * 1000) {
    const done = await waitOnEvents(http, {
      id,
      deadline,
      timeoutMs,
      signal: options.signal,
      idempotencyKey,
      current: () => current,
      seen: (generation) => {
        current = generation;
        const seen = JSON.stringify(generation);
        if (seen !== lastSeen) options.onUpdate?.(generation);
        lastSeen = seen;
      },
      aborted,
    });
    if (done) return done;
    // What the stream showed was reported: the held GETs take it from there.
    readNow = readNow && current === undefined;
  }

  for (;;) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw new WaitTimeoutError(id, current, timeoutMs, idempotencyKey);
    if (options.signal?.aborted) throw aborted(options.signal.reason);
    const holdSeconds =
      holds === false || readNow ? 0 : Math.max(1, Math.min(maxHoldSeconds, Math.floor(remaining / 1000)));
    const askedAt = Date.now();
    let response;
    try {
      response = await http.request<Generation>({
        method: 'GET',
        path: `/generations/${encodeURIComponent(id)}`,
        headers: {
          ...(holdSeconds > 0 ? { prefer: `wait=${holdSeconds}` } : {}),
          ...(etag && current ? { 'if-none-match': etag } : {}),
        },
        signal: options.signal,
        timeoutMs: holdSeconds > 0 ? holdSeconds * 1000 + holdMarginMs : undefined,
        passStatuses: [304],
      });
    } catch (error) {
      if (error instanceof AbortedError) throw aborted(error.cause);
      throw error;
    }
    if (holdSeconds > 0) holds = /wait=/i.test(response.headers.get('preference-applied') ?? '');
    let changed = false;
    if (response.status === 200) {
      current = response.data;
      etag = response.headers.get('etag') ?? undefined;
      const seen = JSON.stringify(current);
      changed = seen !== lastSeen;
      if (changed) options.onUpdate?.(current);
      lastSeen = seen;
    }
    if (current && isTerminal(current)) return current;
    if (readNow) {
      readNow = false;
      continue;
    }
    // A held request that came back early with news is asked again at once; otherwise pace the polls.
    const heldLong = holds === true && Date.now() - askedAt >= 1000;
    if (holds === true && (heldLong || changed)) continue;
    const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
    const delay = retryAfter ?? base + Math.random() * (base / 2);
    try {
      await abortableSleep(Math.max(0, Math.min(delay, deadline - Date.now())), options.signal);
    } catch (error) {
      throw aborted(error);
    }
  }
}
