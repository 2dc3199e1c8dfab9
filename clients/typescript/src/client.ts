import { BrowserNotSupportedError, MissingApiKeyError } from './core/errors.js';
import { HttpCore, type FetchFunction } from './core/http.js';
import type { RetryEvent } from './core/retry-policy.js';
import { accountEvents, type AccountEvent, type AccountEventsOptions } from './resources/account-events.js';
import { Batches } from './resources/batches.js';
import { Generations } from './resources/generations.js';
import { Credits, Key, Models } from './resources/models.js';
import { Webhooks } from './resources/webhooks.js';
import { clientVersion } from './version.js';

export const defaultBaseURL = 'http://127.0.0.1:8080/v1';

export interface ClientOptions {
  /** Default: the GENERATION_API_KEY environment variable. */
  apiKey?: string;
  /** Ends with /v1. Default: GENERATION_BASE_URL, else http://127.0.0.1:8080/v1. */
  baseURL?: string;
  /** Retries after the first attempt (network errors, timeouts, 408, 429, 500, 502, 503, 504). Default 3. */
  maxRetries?: number;
  /** Per attempt, in milliseconds. Default 60 000. */
  timeoutMs?: number;
  /** Default: the runtime's global fetch. */
  fetch?: FetchFunction;
  /** Told before each retry's sleep (for logs and metrics). */
  onRetry?: (event: RetryEvent) => void;
  /**
   * The API has no CORS, by design (an API key in a web page is a key anyone can read): the client
   * refuses to start in a browser unless this is set (for a browser-like runtime that is really a server).
   */
  dangerouslyAllowBrowser?: boolean;
}

/** Reads an environment variable where the runtime has them and lets us (Deno asks for --allow-env). */
function env(name: string): string | undefined {
  const runtime = globalThis as {
    process?: { env?: Record<string, string | undefined> };
    Deno?: { env: { get(name: string): string | undefined } };
  };
  try {
    const value = runtime.process?.env?.[name] ?? runtime.Deno?.env.get(name);
    return value === '' ? undefined : value;
  } catch {
    return undefined; // no permission to read it: as if unset
  }
}

const inBrowser = () =>
  typeof (globalThis as { window?: unknown }).window !== 'undefined' &&
  typeof (globalThis as { document?: unknown }).document !== 'undefined';

/** The Generation API: `client.generations`, `client.batches`, `client.models`, `client.credits`, `client.key`, `client.webhooks`, `client.events()`. */
export class Client {
  readonly generations: Generations;
  /** Many generations from one request or JSONL file: create, get, list, cancel, results, wait. */
  readonly batches: Batches;
  readonly models: Models;
  readonly credits: Credits;
  /** The key in use: `key.get()` gives its access, models, spend limit and what is left of it. */
  readonly key: Key;
  /** The signing secret (`secret()`, `rotateSecret()`); verifying deliveries (`verify`, `unwrap`). */
  readonly webhooks: Webhooks;
  readonly baseURL: string;
  readonly #http: HttpCore;

  constructor(options: ClientOptions = {}) {
    if (inBrowser() && !options.dangerouslyAllowBrowser)
      throw new BrowserNotSupportedError(
        'The Generation API takes no calls from browsers: it has no CORS support by design, and an API key in a page is readable by anyone. Call it from your server.',
      );
    const apiKey = options.apiKey ?? env('GENERATION_API_KEY');
    if (!apiKey) throw new MissingApiKeyError('No API key: pass { apiKey } or set GENERATION_API_KEY.');
    this.baseURL = (options.baseURL ?? env('GENERATION_BASE_URL') ?? defaultBaseURL).replace(/\/+$/, '');
    const fetchFunction: FetchFunction | undefined = options.fetch ?? globalThis.fetch?.bind(globalThis);
    if (!fetchFunction) throw new TypeError('This runtime has no fetch: pass { fetch }.');
    for (const [name, value] of [
      ['maxRetries', options.maxRetries],
      ['timeoutMs', options.timeoutMs],
    ] as const)
      if (value !== undefined && !(value >= 0 && value < Infinity))
        throw new RangeError(`${name} must be a finite number ≥ 0, not ${value}`);
    const http = new HttpCore(apiKey, {
      baseURL: this.baseURL,
      maxRetries: options.maxRetries ?? 3,
      timeoutMs: options.timeoutMs ?? 60_000,
      fetch: fetchFunction,
      onRetry: options.onRetry,
      userAgent: `generation-service-client/${clientVersion}`,
    });
    this.#http = http;
    this.generations = new Generations(http);
    this.batches = new Batches(http);
    this.models = new Models(http);
    this.credits = new Credits(http);
    this.key = new Key(http);
    this.webhooks = new Webhooks(http);
  }

  /**
   * GET /v1/events: every event of every generation of the account, as it is committed
   * (`for await (const event of client.events())`), from now on or after `lastEventId` (an event's
   * `cursor`). It never ends by itself: break, or abort `signal`. Drops and API restarts are resumed
   * with Last-Event-ID, without loss or repeat. One stream instead of one per generation.
   */
  events(options: AccountEventsOptions = {}): AsyncGenerator<AccountEvent, void, undefined> {
    return accountEvents(this.#http, options);
  }
}
