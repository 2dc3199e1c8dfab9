import {
  AbortedError,
  apiErrorFor,
  ApiError,
  ConnectionError,
  GenerationClientError,
  RequestTimeoutError,
  type ValidationIssue,
} from './errors.js';
import {
  backoffMs,
  isRetryableStatus,
  maxRetryAfterMs,
  parseRetryAfter,
  type RetryEvent,
} from './retry-policy.js';
import { abortableSleep, anySignal } from './signals.js';

/** The fetch the client calls: the global one unless a caller passes another (a proxy agent, a test). */
export type FetchFunction = (input: string, init: RequestInit) => Promise<Response>;

export interface HttpSettings {
  /** Ends with the version segment, e.g. http://127.0.0.1:8080/v1 (no trailing slash). */
  baseURL: string;
  maxRetries: number;
  timeoutMs: number;
  fetch: FetchFunction;
  onRetry: ((event: RetryEvent) => void) | undefined;
  userAgent: string;
}

export interface HttpRequest {
  method: 'GET' | 'POST';
  path: string;
  query?: Record<string, string | number | undefined> | undefined;
  /** Serialized once, so that every attempt sends the same bytes (the key's fingerprint). */
  body?: unknown;
  /**
   * A body sent as it is (a JSONL file), instead of `body`: `open()` gives it for each attempt. A
   * body that cannot be given twice (a stream handed over once) is not retried after it was sent.
   */
  upload?: Upload | undefined;
  headers?: Record<string, string> | undefined;
  idempotencyKey?: string | undefined;
  signal?: AbortSignal | undefined;
  /** This request's own per-attempt limit (a held `Prefer: wait` needs longer than a plain read). */
  timeoutMs?: number | undefined;
  /** Statuses answered as they are rather than thrown (304 for a conditional GET). */
  passStatuses?: readonly number[];
}

export interface Upload {
  contentType: string;
  open(): string | Uint8Array | Blob | ReadableStream<Uint8Array>;
  replayable: boolean;
}

export interface HttpResponse<T> {
  status: number;
  headers: Headers;
  data: T;
  requestId: string | undefined;
}

/** Whether this fetch takes `cache: 'no-store'` (every runtime we know does; a polyfill might not). */
let noStoreSupported: boolean | undefined;
function noStore(): { cache?: 'no-store' } {
  if (noStoreSupported === undefined) {
    try {
      new Request('http://localhost/', { cache: 'no-store' });
      noStoreSupported = true;
    } catch {
      noStoreSupported = false;
    }
  }
  // Frameworks that cache fetch (Next.js) would otherwise answer every poll with the first state.
  return noStoreSupported ? { cache: 'no-store' } : {};
}

/**
 * The core every resource goes through: one HTTP request with the retry policy, errors as classes.
 * The API key is a private field, never a property: nothing that walks or prints the client's
 * objects (util.inspect, an error tracker, JSON.stringify) reaches it.
 */
export class HttpCore {
  readonly #apiKey: string;

  constructor(
    apiKey: string,
    readonly settings: HttpSettings,
  ) {
    this.#apiKey = apiKey;
  }

  url(path: string, query?: HttpRequest['query']): string {
    const url = new URL(this.settings.baseURL + path);
    for (const [name, value] of Object.entries(query ?? {}))
      if (value !== undefined) url.searchParams.set(name, String(value));
    return url.toString();
  }

  async request<T>(request: HttpRequest): Promise<HttpResponse<T>> {
    const url = this.url(request.path, request.query);
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const contentType = request.upload?.contentType ?? (body === undefined ? undefined : 'application/json');
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.#apiKey}`,
      'user-agent': this.settings.userAgent,
      ...(contentType === undefined ? {} : { 'content-type': contentType }),
      ...(request.idempotencyKey ? { 'idempotency-key': request.idempotencyKey } : {}),
      ...request.headers,
    };
    for (let attempt = 0; ; attempt++) {
      const failure = await this.attempt<T>(request, url, headers, request.upload?.open() ?? body);
      if (!(failure instanceof Error)) return failure;
      const retry = request.upload && !request.upload.replayable ? null : this.retryDelay(failure, attempt);
      if (retry === null) throw failure;
      this.settings.onRetry?.({
        method: request.method,
        path: request.path,
        attempt: attempt + 1,
        delayMs: retry,
        status: failure instanceof ApiError ? failure.status : undefined,
        error: failure,
        idempotencyKey: request.idempotencyKey,
      });
      try {
        await abortableSleep(retry, request.signal);
      } catch {
        throw this.aborted(request);
      }
    }
  }

  /**
   * One GET whose body the caller reads as it arrives (an event stream): the response when it is
   * 2xx, else the error it ended with (ApiError by status, ConnectionError); never retried here.
   */
  async openStream(path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Response> {
    const request: HttpRequest = { method: 'GET', path, signal };
    if (signal?.aborted) throw this.aborted(request);
    let response: Response;
    try {
      response = await this.settings.fetch(this.url(path), {
        method: 'GET',
        headers: {
          authorization: `Bearer ${this.#apiKey}`,
          'user-agent': this.settings.userAgent,
          ...headers,
        },
        ...(signal ? { signal } : {}),
        ...noStore(),
      });
    } catch (error) {
      if (signal?.aborted) throw this.aborted(request, error);
      throw new ConnectionError(`GET ${path}: ${describeNetworkError(error)}`, { cause: error });
    }
    if (response.ok) return response;
    const text = await response.text().catch(() => '');
    throw this.errorOf(response, text, response.headers.get('x-request-id') ?? undefined, request);
  }

  /** One attempt: the response, or the error it ended with (thrown at once when it must not be retried). */
  private async attempt<T>(
    request: HttpRequest,
    url: string,
    headers: Record<string, string>,
    body: string | Uint8Array | Blob | ReadableStream<Uint8Array> | undefined,
  ): Promise<HttpResponse<T> | Error> {
    if (request.signal?.aborted) throw this.aborted(request);
    const timeout = AbortSignal.timeout(request.timeoutMs ?? this.settings.timeoutMs);
    const signal = anySignal([timeout, request.signal]);
    try {
      const response = await this.settings.fetch(url, {
        method: request.method,
        headers,
        // A stream is sent as it is read (fetch asks for half-duplex to say so).
        ...(body === undefined ? {} : { body: body as NonNullable<RequestInit['body']> }),
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        signal,
        ...noStore(),
      });
      // The body is read inside the attempt: a connection cut mid-answer is a network failure too.
      const text = response.status === 304 ? '' : await response.text();
      const requestId = response.headers.get('x-request-id') ?? undefined;
      if (response.ok || request.passStatuses?.includes(response.status)) {
        return { status: response.status, headers: response.headers, data: parseJson(text) as T, requestId };
      }
      return this.errorOf(response, text, requestId, request);
    } catch (error) {
      if (request.signal?.aborted) throw this.aborted(request, error);
      if (timeout.aborted)
        return new RequestTimeoutError(
          `${request.method} ${request.path}: no answer within ${request.timeoutMs ?? this.settings.timeoutMs} ms`,
          { cause: error, idempotencyKey: request.idempotencyKey },
        );
      if (error instanceof GenerationClientError) throw error;
      return new ConnectionError(`${request.method} ${request.path}: ${describeNetworkError(error)}`, {
        cause: error,
        idempotencyKey: request.idempotencyKey,
      });
    }
  }

  private errorOf(response: Response, text: string, requestId: string | undefined, request: HttpRequest) {
    const parsed = parseJson(text) as
      { error?: { code?: unknown; message?: unknown }; issues?: ValidationIssue[] } | undefined;
    const code = typeof parsed?.error?.code === 'string' ? parsed.error.code : `http_${response.status}`;
    const message =
      typeof parsed?.error?.message === 'string'
        ? parsed.error.message
        : text.slice(0, 200) || response.statusText || 'no message';
    return apiErrorFor({
      status: response.status,
      code,
      message,
      issues: parsed?.issues,
      requestId,
      headers: response.headers,
      body: parsed,
      retryAfterMs: parseRetryAfter(response.headers.get('retry-after')) ?? undefined,
      idempotencyKey: request.idempotencyKey,
    });
  }

  /** Milliseconds to sleep before the next attempt, or null to give up (and throw). */
  private retryDelay(error: Error, attempt: number): number | null {
    if (error instanceof ApiError && !isRetryableStatus(error.status)) return null;
    if (attempt >= this.settings.maxRetries) return null;
    if (error instanceof ApiError && error.retryAfterMs !== undefined) {
      // Longer than any caller should be held: the error (a RateLimitError for a 429) says when to come back.
      return error.retryAfterMs > maxRetryAfterMs ? null : error.retryAfterMs;
    }
    return backoffMs(attempt);
  }

  private aborted(request: HttpRequest, cause?: unknown): AbortedError {
    return new AbortedError(`${request.method} ${request.path}: aborted by the caller`, {
      ...(request.idempotencyKey ? { idempotencyKey: request.idempotencyKey } : {}),
      cause: cause ?? request.signal?.reason,
    });
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** "fetch failed" says nothing: name the cause (ECONNREFUSED, ECONNRESET, ENOTFOUND, …) when there is one. */
function describeNetworkError(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return code ? `${message} (${code})` : message;
}
