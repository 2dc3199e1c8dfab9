import { WaitTimeoutError, type AbortedError } from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import { anySignal } from '../core/signals.js';
import { isTerminal, type Generation } from '../types.js';
import { generationEvents } from './events.js';

export interface StreamWait {
  id: string;
  deadline: number;
  timeoutMs: number;
  signal?: AbortSignal;
  idempotencyKey?: string;
  /** The last state seen (for WaitTimeoutError). */
  current: () => Generation | undefined;
  /** Takes a state in (onUpdate when it changed). */
  seen: (generation: Generation) => void;
  aborted: (cause?: unknown) => AbortedError;
}

/**
 * Waiting on the generation's event stream: one connection for the whole wait, however long,
 * counted once against the rate limit, where held GETs ask again every 50 s. Returns the terminal
 * generation, or undefined when the stream cannot serve (an API without it, the stream cap, a
 * stream that keeps failing): the caller then waits with held GETs for the time left, which also
 * surfaces the errors that are not the stream's (401, 404). The deadline and the caller's signal
 * end it as they end held GETs: WaitTimeoutError and AbortedError.
 */
export async function waitOnEvents(http: HttpCore, wait: StreamWait): Promise<Generation | undefined> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), Math.max(0, wait.deadline - Date.now()));
  try {
    const signal = anySignal([wait.signal, deadline.signal]);
    for await (const event of generationEvents(http, wait.id, { signal })) {
      wait.seen(event.data);
      if (isTerminal(event.data)) return event.data;
    }
    return undefined; // ended without a terminal state (every event was seen before): read it
  } catch {
    if (wait.signal?.aborted) throw wait.aborted(wait.signal.reason);
    if (deadline.signal.aborted)
      throw new WaitTimeoutError(wait.id, wait.current(), wait.timeoutMs, wait.idempotencyKey);
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
