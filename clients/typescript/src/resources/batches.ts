import {
  AbortedError,
  ApiError,
  apiErrorFor,
  BatchWaitTimeoutError,
  ConnectionError,
} from '../core/errors.js';
import type { HttpCore, Upload } from '../core/http.js';
import { newIdempotencyKey } from '../core/ids.js';
import { backoffMs, isRetryableStatus } from '../core/retry-policy.js';
import { abortableSleep } from '../core/signals.js';
import { batchEvents, type EventsOptions } from './events.js';
import { Pager, type PageOf } from './pager.js';
import {
  isBatchTerminal,
  type Batch,
  type BatchEvent,
  type BatchWebhookSubscription,
  type BatchListPage,
  type BatchQuote,
  type BatchRequestLine,
  type BatchResultLine,
} from '../types.js';

/** A JSONL body: its bytes, or a function giving them afresh (then a failed upload can be retried). */
export type JsonlBody = string | Uint8Array | Blob | ReadableStream<Uint8Array>;
export type JsonlSource = JsonlBody | (() => JsonlBody);

export interface BatchCreateParams {
  /** The lines, each a generation's body with its `custom_id` (sent as JSON). */
  requests?: BatchRequestLine[];
  /**
   * Or the lines as JSONL (one request a line), sent as it is read: `jsonlFile(path)` from
   * `@generation-service/client/node` streams a file. A function is called again for each retry.
   */
  jsonl?: JsonlSource;
  /** Lines not started by then expire, uncharged: `24h` (the default), `90m`, `3600s`, up to `7d`. */
  completion_window?: string;
  metadata?: Record<string, string>;
  /** The batch's own events (by default its end) delivered to this URL, signed as a generation's. */
  webhook?: BatchWebhookSubscription;
}

export interface BatchCreateOptions {
  /** One per intended batch; made (UUID v4) when absent and sent again with every retry. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface BatchResultsOptions {
  /** Only lines after this index (the last `line` read): resumes a read. */
  after?: number;
  signal?: AbortSignal;
}

export interface BatchWaitOptions {
  /** Give up (BatchWaitTimeoutError; the batch goes on) after this long. Default 24 hours. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called with each new state of the batch (the first one included). */
  onUpdate?: (batch: Batch) => void;
  /** The first pause between reads (default 1 s); it grows ×1.5 up to 30 s while nothing changes. */
  pollIntervalMs?: number;
}

export interface BatchListFilters {
  limit?: number;
  cursor?: string;
  signal?: AbortSignal;
}

/** One page of batches, and the way to the next. */
export type BatchPage = PageOf<BatchListPage>;
/** The batches of a list query, newest first, page by page as they are used. */
export type BatchPager = Pager<BatchListPage>;

const longestPauseMs = 30_000;

/**
 * The last line of a results read the server could not finish (a page it could not read): the
 * error envelope, `{"error": {"code": "service_unavailable", "message"}}`. As a 503 it is retried
 * after the last line read, and thrown once the retries are spent.
 */
function cutShort(line: unknown): ApiError {
  const error = (line as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return apiErrorFor({
    status: 503,
    code: typeof error?.code === 'string' ? error.code : 'service_unavailable',
    message: typeof error?.message === 'string' ? error.message : 'The results read was cut short.',
    body: line,
  });
}

/** client.batches: create, quote, get, list, cancel, results, events, wait. (Downloads: `downloadBatch` in /node.) */
export class Batches {
  constructor(private readonly http: HttpCore) {}

  /**
   * POST /v1/batches, from `requests` (JSON) or `jsonl` (application/x-ndjson, streamed). Every
   * line is checked before any starts: a bad line is one InvalidRequestError whose `issues` name
   * it. The Idempotency-Key is made once and sent with every retry: a retried create never makes
   * a second batch.
   */
  async create(params: BatchCreateParams, options: BatchCreateOptions = {}): Promise<Batch> {
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const response = await this.http.request<Batch>({
      method: 'POST',
      idempotencyKey,
      signal: options.signal,
      ...this.requestOf(params),
    });
    return response.data;
  }

  /** The body of a create or a quote: JSON `requests`, or JSONL with the envelope in the query. */
  private requestOf(params: BatchCreateParams) {
    const { requests, jsonl, completion_window, metadata, webhook } = params;
    if ((requests === undefined) === (jsonl === undefined))
      throw new TypeError('batches: pass either `requests` or `jsonl`.');
    if (jsonl === undefined)
      return { path: '/batches', body: { requests, completion_window, metadata, webhook } };
    const text = (value: unknown) => (value === undefined ? undefined : JSON.stringify(value));
    return {
      path: '/batches',
      upload: uploadOf(jsonl),
      query: { completion_window, metadata: text(metadata), webhook: text(webhook) },
    };
  }

  /**
   * POST /v1/batches/quote: the lines checked exactly as a create checks them (the same
   * InvalidRequestError), their total at each line's price now, and whether the balance covers it.
   */
  async quote(params: BatchCreateParams): Promise<BatchQuote> {
    const { path: _path, ...request } = this.requestOf(params);
    return (await this.http.request<BatchQuote>({ method: 'POST', path: '/batches/quote', ...request })).data;
  }

  /** GET /v1/batches/{id}. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<Batch> {
    return (await this.http.request<Batch>({ method: 'GET', path: batchPath(id), signal: options.signal }))
      .data;
  }

  /** GET /v1/batches, newest first: `for await (const b of list())` walks every page. */
  list(filters: BatchListFilters = {}): BatchPager {
    const { limit, signal } = filters;
    return new Pager<BatchListPage>(
      this.http,
      (cursor) => ({ method: 'GET', path: '/batches', query: { limit, cursor }, signal }),
      filters.cursor,
    );
  }

  /**
   * POST /v1/batches/{id}/cancel: lines not started end `canceled`, never charged; running ones
   * follow the generation cancel rules. The batch is `canceling` until its workflow has done it.
   */
  async cancel(id: string): Promise<Batch> {
    return (await this.http.request<Batch>({ method: 'POST', path: `${batchPath(id)}/cancel` })).data;
  }

  /**
   * GET /v1/batches/{id}/results: the finished lines (so far), in input order, as they arrive. A
   * dropped connection is resumed after the last line read, without loss or repeat. While the
   * batch runs, a line that finishes after a later one has is not in this read: read again after
   * the first line missing (or follow with `downloadBatch`).
   */
  async *results(
    id: string,
    options: BatchResultsOptions = {},
  ): AsyncGenerator<BatchResultLine, void, undefined> {
    let after = options.after ?? -1;
    let failures = 0;
    for (;;) {
      try {
        const response = await this.http.openStream(
          `${batchPath(id)}/results${after >= 0 ? `?after=${after}` : ''}`,
          { accept: 'application/x-ndjson' },
          options.signal,
        );
        if (!response.body) return;
        for await (const line of jsonLines(response.body)) {
          const result = line as BatchResultLine;
          // A read the server could not finish ends with the error envelope on a line of its own.
          if (typeof result.line !== 'number') throw cutShort(line);
          after = result.line;
          failures = 0;
          yield result;
        }
        return;
      } catch (error) {
        if (error instanceof AbortedError) throw error;
        if (options.signal?.aborted)
          throw new AbortedError(`Stopped reading batch ${id}'s results.`, { cause: error });
        const retryable =
          error instanceof ConnectionError ||
          (error instanceof ApiError && isRetryableStatus(error.status)) ||
          (error instanceof TypeError && !(error instanceof ApiError)); // a body cut mid-read
        if (!retryable || failures >= this.http.settings.maxRetries) throw error;
        await abortableSleep(backoffMs(failures++), options.signal).catch((cause: unknown) => {
          throw new AbortedError(`Stopped reading batch ${id}'s results.`, { cause });
        });
      }
    }
  }

  /** GET /v1/batches/{id}/events: its own events as they happen, until it ends (resumed on a drop, as a generation's). */
  events(id: string, options: EventsOptions = {}): AsyncGenerator<BatchEvent, void, undefined> {
    return batchEvents(this.http, id, options);
  }

  /**
   * Reads the batch until it is `completed`, `canceled` or `expired`, and returns it. Cheap: the
   * pause between reads grows while nothing changes (1 s up to 30 s). BatchWaitTimeoutError at the
   * deadline and AbortedError on `signal`; either way the batch goes on.
   */
  async wait(idOrBatch: string | Batch, options: BatchWaitOptions = {}): Promise<Batch> {
    const timeoutMs = options.timeoutMs ?? 24 * 3_600_000;
    if (!(timeoutMs >= 0)) throw new RangeError(`wait: timeoutMs must be a number ≥ 0, not ${timeoutMs}`);
    const first = options.pollIntervalMs ?? 1000;
    if (!(first >= 0 && first < Infinity))
      throw new RangeError(`wait: pollIntervalMs must be a finite number ≥ 0, not ${first}`);
    const id = typeof idOrBatch === 'string' ? idOrBatch : idOrBatch.id;
    const deadline = Date.now() + timeoutMs;
    let current: Batch | undefined;
    let seen = '';
    let pause = first;
    for (;;) {
      current = await this.get(id, { signal: options.signal }).catch((error: unknown) => {
        throw error instanceof AbortedError
          ? new AbortedError(`Stopped waiting for batch ${id}; it goes on.`, { cause: error.cause })
          : error;
      });
      const now = JSON.stringify(current);
      if (now !== seen) {
        options.onUpdate?.(current);
        pause = first;
      } else pause = Math.min(longestPauseMs, Math.max(pause * 1.5, 100));
      seen = now;
      if (isBatchTerminal(current)) return current;
      const left = deadline - Date.now();
      if (left <= 0) throw new BatchWaitTimeoutError(id, current, timeoutMs);
      await abortableSleep(Math.min(pause * (1 + Math.random() / 4), left), options.signal).catch(
        (cause: unknown) => {
          throw new AbortedError(`Stopped waiting for batch ${id}; it goes on.`, { cause });
        },
      );
    }
  }
}

const batchPath = (id: string) => `/batches/${encodeURIComponent(id)}`;

function uploadOf(source: JsonlSource): Upload {
  const replayable = typeof source === 'function' || !(source instanceof ReadableStream);
  return {
    contentType: 'application/x-ndjson',
    replayable,
    open: typeof source === 'function' ? source : () => source,
  };
}

/** The JSON values of an NDJSON body, one per non-blank line, as the body arrives. */
async function* jsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buffer = '';
  try {
    for (;;) {
      const chunk = await reader.read();
      buffer += chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line !== '') yield JSON.parse(line) as unknown;
      }
      if (chunk.done) {
        // A last line without its newline is one the connection cut short: read again from there.
        if (buffer.trim() !== '') throw new ConnectionError('The results file ended mid-line.');
        return;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}
