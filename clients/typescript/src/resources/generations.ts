import {
  AbortedError,
  GenerationClientError,
  GenerationFailedError,
  GenerationRejectedError,
  RouteNotAvailableError,
} from '../core/errors.js';
import type { HttpCore } from '../core/http.js';
import { newIdempotencyKey } from '../core/ids.js';
import { routeMissing } from '../core/route-check.js';
import type {
  Generation,
  GenerationEvent,
  GenerationListPage,
  GenerationRequest,
  GenerationStatus,
  KeyedGeneration,
  Quote,
} from '../types.js';
import { Pager, type PageOf } from './pager.js';
import { waitForGeneration, type WaitOptions } from './waiter.js';
import { generationEvents, type EventsOptions } from './events.js';

export interface CreateOptions {
  /** One per intended generation; made (UUID v4) when absent. Pass the one of a failed call to recover it. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Ask the server to hold the answer up to this many seconds (1–60) until the generation is done. */
  wait?: number;
  /**
   * The `Cancel-After` header: not handed to a provider within this long of its creation, the
   * generation is canceled and refunded. Seconds (a number), or a duration such as `30s`, `5m`,
   * `1h30m`; 5 s to 24 h. Part of the request: a retry must send the same.
   */
  cancelAfter?: number | string;
}

export interface ListFilters {
  /** One status or several (sent comma-separated). */
  status?: GenerationStatus | GenerationStatus[];
  model?: string;
  /** Page size, 1 to 100 (the API's default: 20). */
  limit?: number;
  /** Start after this cursor (a page's next_cursor). */
  cursor?: string;
  /** Only the generation this Idempotency-Key made (APIs with the filter). */
  idempotency_key?: string;
  signal?: AbortSignal;
}

/** One page of generations, and the way to the next. */
export type Page = PageOf<GenerationListPage>;
/** The generations of a list query, newest first, page by page as they are used. */
export type GenerationPager = Pager<GenerationListPage>;

export interface RunOptions extends CreateOptions, Omit<WaitOptions, 'signal'> {
  /** When the signal aborts the wait, also cancel the generation (refunded when it can still be stopped). */
  cancelOnAbort?: boolean;
}

/** The key travels on the result without being part of its JSON (a printed generation stays the API's). */
function withKey(generation: Generation, idempotencyKey: string): KeyedGeneration {
  return Object.defineProperty(generation, 'idempotencyKey', {
    value: idempotencyKey,
    enumerable: false,
  }) as KeyedGeneration;
}

/** Gives an error the key of the create it came from (an error from the waiting part has it too). */
function keyed<E>(error: E, idempotencyKey: string): E {
  if (error instanceof GenerationClientError && error.idempotencyKey === undefined)
    error.idempotencyKey = idempotencyKey;
  return error;
}

/** client.generations: create, get, wait, run, list, cancel, find by key, quote. */
export class Generations {
  constructor(private readonly http: HttpCore) {}

  /**
   * POST /v1/generations. The Idempotency-Key is made once, before the first attempt, and every
   * retry sends it with the same body bytes: a retried create never makes or charges a second
   * generation. The key is on the result (`idempotencyKey`) and on every error thrown.
   */
  async create(body: GenerationRequest, options: CreateOptions = {}): Promise<KeyedGeneration> {
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const hold = options.wait === undefined ? 0 : Math.max(1, Math.min(60, Math.round(options.wait)));
    const response = await this.http.request<Generation>({
      method: 'POST',
      path: '/generations',
      body,
      idempotencyKey,
      signal: options.signal,
      headers: {
        ...(hold > 0 ? { prefer: `wait=${hold}` } : {}),
        ...(options.cancelAfter === undefined ? {} : { 'cancel-after': String(options.cancelAfter) }),
      },
      ...(hold > 0 ? { timeoutMs: Math.max(this.http.settings.timeoutMs, hold * 1000 + 10_000) } : {}),
    });
    return withKey(response.data, idempotencyKey);
  }

  /** GET /v1/generations/{id}: the whole generation. */
  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<Generation> {
    const response = await this.http.request<Generation>({
      method: 'GET',
      path: `/generations/${encodeURIComponent(id)}`,
      signal: options.signal,
    });
    return response.data;
  }

  /**
   * Waits until the generation is succeeded, failed or rejected and returns it whole (it does not
   * throw for failed or rejected: see run). Resumable from just an id.
   */
  wait(idOrGeneration: string | Generation, options: WaitOptions = {}): Promise<Generation> {
    return waitForGeneration(this.http, idOrGeneration, options);
  }

  /**
   * GET /v1/generations/{id}/events: the generation's events as they happen (`for await (const e of
   * events(id))`), from the first (or after `lastEventId`) until it is terminal; a dropped
   * connection is resumed with Last-Event-ID, without loss or repeat.
   */
  events(id: string, options: EventsOptions = {}): AsyncGenerator<GenerationEvent, void, undefined> {
    return generationEvents(this.http, id, options);
  }

  /**
   * create + wait: the succeeded generation, or GenerationFailedError / GenerationRejectedError,
   * WaitTimeoutError (the job goes on), AbortedError (cancelled too with `cancelOnAbort`).
   */
  async run(body: GenerationRequest, options: RunOptions = {}): Promise<KeyedGeneration> {
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const created = await this.create(body, { ...options, idempotencyKey });
    let done: Generation;
    try {
      done = await waitForGeneration(this.http, created, options, idempotencyKey);
    } catch (error) {
      if (error instanceof AbortedError && options.cancelOnAbort)
        // Best effort: the caller is leaving; a cancel that fails leaves the job as it was.
        await this.cancel(created.id).catch(() => undefined);
      throw keyed(error, idempotencyKey);
    }
    if (done.status === 'failed') throw new GenerationFailedError(done, idempotencyKey);
    if (done.status === 'rejected') throw new GenerationRejectedError(done, idempotencyKey);
    return withKey(done, idempotencyKey);
  }

  /**
   * GET /v1/generations, newest first: `for await (const g of list())` walks every page;
   * `.firstPage()` and `.pages()` give the pages.
   */
  list(filters: ListFilters = {}): GenerationPager {
    const { status, model, limit, idempotency_key, signal } = filters;
    const query = {
      limit,
      status: Array.isArray(status) ? status.join(',') : status,
      model,
      idempotency_key,
    };
    return new Pager<GenerationListPage>(
      this.http,
      (cursor) => ({ method: 'GET', path: '/generations', query: { ...query, cursor }, signal }),
      filters.cursor,
    );
  }

  /** POST /v1/generations/{id}/cancel: the generation, failed with error.code `canceled` and refunded. NotCancelableError when too late. */
  async cancel(id: string): Promise<Generation> {
    try {
      const response = await this.http.request<Generation>({
        method: 'POST',
        path: `/generations/${encodeURIComponent(id)}/cancel`,
      });
      return response.data;
    } catch (error) {
      return routeMissing(error, 'POST /v1/generations/{id}/cancel');
    }
  }

  /** The generation an Idempotency-Key made (in this API key's namespace), or null when it made none. */
  async findByIdempotencyKey(key: string): Promise<Generation | null> {
    const page = await this.list({ idempotency_key: key, limit: 1 }).firstPage();
    const found = page.data[0] ?? null;
    if (found === null) return null;
    // An API without the filter ignores it and lists the newest generation: a key that cannot
    // exist must then list nothing, or the answer above means nothing.
    const probe = await this.list({ idempotency_key: `probe-${newIdempotencyKey()}`, limit: 1 }).firstPage();
    if (probe.data.length > 0)
      throw new RouteNotAvailableError({
        status: 200,
        code: 'route_not_available',
        message:
          'This API ignores GET /v1/generations?idempotency_key=: it is older than this client. Re-create with the same key and body instead: that is a replay, never a second charge.',
      });
    return found;
  }

  /** POST /v1/generations/quote: the price of this body and whether the balance covers it. */
  async quote(body: GenerationRequest): Promise<Quote> {
    try {
      return (await this.http.request<Quote>({ method: 'POST', path: '/generations/quote', body })).data;
    } catch (error) {
      return routeMissing(error, 'POST /v1/generations/quote');
    }
  }
}
