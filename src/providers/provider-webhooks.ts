/**
 * Verifying a provider's pushes (its webhook deliveries to the API's provider-webhook route, see
 * provider-push.ts): each provider that pushes has a verifier (replicate/replicate-webhooks.ts,
 * fal/fal-webhooks.ts) that checks a delivery's signature over the raw body and its timestamp, and
 * names the job it is about.
 */

/** What one delivery came to. */
export type PushVerdict =
  /** Signed by the provider, recently: about the provider's job `jobId` (Replicate's prediction id, fal's request id). */
  | { verified: true; jobId: string }
  /** Not to be trusted (no or a wrong signature, a timestamp out of tolerance, a body that says nothing): why, for the log. */
  | { verified: false; reason: string };

export interface PushVerifier {
  /**
   * Verifies one delivery from its headers (lower-case names, as Node gives them) and its body as
   * received. Throws PushKeysUnavailable when the provider's keys or secret cannot be had now (the
   * delivery may be genuine: the provider is to send it again).
   */
  verify(
    headers: Readonly<Record<string, string | string[] | undefined>>,
    body: Buffer,
  ): Promise<PushVerdict>;
  /** Whether a generation's recorded job (its reference without the `provider:` prefix) is the job `jobId` names. */
  isJob(recordedJobId: string, jobId: string): boolean;
}

/** The provider's keys or secret could not be fetched (or were unusable): nothing can be verified now. */
export class PushKeysUnavailable extends Error {
  override readonly name = 'PushKeysUnavailable';
}

/** Deliveries older or newer than this are refused (a replay, or a clock far off): both providers' docs say 5 minutes. */
export const pushToleranceSeconds = 300;

/** A header's one value (the first, if repeated). */
export function headerOf(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  name: string,
): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A delivery's body as JSON; undefined when it is not JSON. */
export function jsonOf(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Whether a timestamp header (seconds since the epoch) is a whole number within the tolerance of `nowMs`. */
export function timestampWithin(
  value: string,
  nowMs: number,
  toleranceSeconds = pushToleranceSeconds,
): boolean {
  if (!/^\d{1,12}$/.test(value)) return false;
  return Math.abs(nowMs / 1000 - Number(value)) <= toleranceSeconds;
}

export interface KeyCacheOptions {
  /** Longest a fetched value is used (default: for ever, until a verification fails). */
  maxAgeMs?: number;
  /** Shortest time between two fetches made because a verification failed (default 1 minute). */
  minRefetchMs?: number;
  /** After a failed fetch, how long until the next may be tried (default 5 s). */
  retryAfterFailureMs?: number;
  now?: () => number;
}

/**
 * A provider's keys or secret, fetched when first needed and kept: fetched again when older than
 * `maxAgeMs`, or when a verification fails (a rotated key or secret), at most once per
 * `minRefetchMs` however many deliveries fail, so that forged deliveries cannot make us hammer the
 * provider. One fetch at a time: concurrent callers share it.
 */
export class KeyCache<T> {
  /** Private to the instance (a secret, for Replicate): never enumerated, serialized or logged with it. */
  #value: T | undefined;
  private fetchedAt = -Infinity;
  private failedAt = -Infinity;
  private inFlight: Promise<T> | undefined;
  private readonly now: () => number;

  constructor(
    private readonly fetchValue: () => Promise<T>,
    private readonly options: KeyCacheOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  /** The value in hand, fetched first if there is none or it is too old. */
  async current(): Promise<T> {
    const age = this.now() - this.fetchedAt;
    if (this.#value !== undefined && age < (this.options.maxAgeMs ?? Infinity)) return this.#value;
    return this.fetch();
  }

  /** A freshly fetched value, unless one was fetched within `minRefetchMs`: then undefined (nothing new to try). */
  async refreshed(): Promise<T | undefined> {
    if (this.inFlight) return this.inFlight;
    if (this.now() - this.fetchedAt < (this.options.minRefetchMs ?? 60_000)) return undefined;
    return this.fetch();
  }

  private fetch(): Promise<T> {
    if (this.inFlight) return this.inFlight;
    if (this.now() - this.failedAt < (this.options.retryAfterFailureMs ?? 5_000))
      return Promise.reject(new PushKeysUnavailable('the last fetch failed moments ago'));
    this.inFlight = this.fetchValue()
      .then(
        (value) => {
          this.#value = value;
          this.fetchedAt = this.now();
          return value;
        },
        (error: unknown) => {
          this.failedAt = this.now();
          throw error instanceof PushKeysUnavailable
            ? error
            : new PushKeysUnavailable(error instanceof Error ? error.message : String(error));
        },
      )
      .finally(() => {
        this.inFlight = undefined;
      });
    return this.inFlight;
  }
}

/** GETs a provider's keys document as JSON under a deadline; the error names the URL and status, never a credential. */
export async function fetchKeys(
  url: string,
  options: { headers?: Record<string, string>; timeoutMs: number; what: string },
): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { accept: 'application/json', ...options.headers },
      signal: AbortSignal.timeout(options.timeoutMs),
      redirect: 'error',
    });
  } catch (error) {
    throw new PushKeysUnavailable(
      `${options.what} could not be fetched from ${url}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new PushKeysUnavailable(`${options.what}: ${url} answered HTTP ${response.status}`);
  }
  try {
    return await response.json();
  } catch {
    throw new PushKeysUnavailable(`${options.what}: ${url} answered with a body that is not JSON`);
  }
}
