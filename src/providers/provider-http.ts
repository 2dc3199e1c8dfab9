import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundFetch } from '../net/outbound-fetch.js';
import type { Storage } from '../storage/storage.js';
import {
  ProviderRejection,
  ProviderResultGone,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
} from './provider.js';

/**
 * Plain HTTP to a provider's API, shared by the adapters. One call is one request: nothing here
 * retries, because none of the providers accepts an idempotency key and a resent create can start
 * (and bill) a second job. The workflow's retry policies do the retrying, knowing what was sent.
 *
 * How a failed call is read:
 * - the connection was never made (refused, no such host, connect timeout): nothing left us →
 *   transient;
 * - 429 (and 503 with Retry-After on a read) → transient, after the Retry-After the provider gave;
 * - 401/403 → transient: the provider refuses *our* credentials; the input is not at fault and an
 *   operator can fix the key while the step retries;
 * - other 4xx on a create → rejection (the input is wrong; nothing ran);
 * - a create whose answer was lost after it left us (timeout, reset, 5xx) → uncertain; the same on a
 *   read (status, result, cancel) is transient: reads are safe to repeat.
 */

type CallKind = 'create' | 'read';

interface ProviderCall {
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  headers: Record<string, string>;
  /** JSON (serialized here) or a ready body (FormData for multipart). */
  json?: unknown;
  body?: FormData;
  timeoutMs: number;
}

export interface ProviderAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  body: unknown;
}

/** Connection errors that mean the request never reached the provider. */
const notConnected = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * Makes one call. Resolves with any 2xx answer (and, for reads, with 404 and other 4xx answers the
 * adapter interprets itself: `acceptStatuses`); rejects with the provider error class the failure
 * means for `kind` (see above). `provider` names the provider in messages (never the key).
 */
export async function callProvider(
  provider: string,
  kind: CallKind,
  call: ProviderCall,
  acceptStatuses: readonly number[] = [],
): Promise<ProviderAnswer> {
  let response: Response;
  try {
    response = await fetch(call.url, {
      method: call.method,
      headers: {
        ...call.headers,
        ...(call.json !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: call.json !== undefined ? JSON.stringify(call.json) : call.body,
      redirect: 'error',
      signal: AbortSignal.timeout(call.timeoutMs),
    });
  } catch (error) {
    throw unanswered(provider, kind, error, call.timeoutMs);
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    // The answer started but did not arrive whole.
    throw unanswered(provider, kind, error, call.timeoutMs);
  }
  const body = parseJson(text);
  if ((response.status >= 200 && response.status < 300) || acceptStatuses.includes(response.status))
    return { status: response.status, headers: response.headers, body };
  throw refusal(provider, kind, response.status, response.headers, body ?? text);
}

function unanswered(provider: string, kind: CallKind, error: unknown, timeoutMs: number): Error {
  const code = errorCode(error);
  if (notConnected.has(code))
    return new ProviderTransientError(`${provider} could not be reached (${code}); nothing was sent`);
  const timedOut = (error as Error | undefined)?.name === 'TimeoutError';
  const what = timedOut ? `no answer within ${timeoutMs} ms` : `the connection failed (${code || 'unknown'})`;
  if (kind === 'create')
    return new ProviderUncertainError(`${provider} received the request but ${what}: it may have the job`);
  return new ProviderTransientError(`${provider}: ${what}`);
}

function refusal(provider: string, kind: CallKind, status: number, headers: Headers, body: unknown): Error {
  const detail = safeProviderMessage(errorText(body));
  const said = detail ? `: ${detail}` : '';
  if (status === 429)
    return new ProviderThrottled(
      `${provider} is throttling (HTTP ${status})${said}`,
      retryAfterMs(headers.get('retry-after')) ?? 1_000,
    );
  if (kind === 'read' && status === 503 && headers.has('retry-after'))
    return new ProviderTransientError(
      `${provider} is throttling (HTTP ${status})${said}`,
      retryAfterMs(headers.get('retry-after')) ?? 1_000,
    );
  if (status === 401 || status === 403)
    return new ProviderTransientError(`${provider} refused our credentials (HTTP ${status})`);
  if (status >= 400 && status < 500 && kind === 'create')
    return new ProviderRejection(`${provider} rejected the request (HTTP ${status})${said}`);
  if (kind === 'create')
    return new ProviderUncertainError(
      `${provider} answered HTTP ${status} to the create${said}: it may have the job`,
    );
  return new ProviderTransientError(`${provider} answered HTTP ${status}${said}`);
}

/** Client errors that still prove the provider up: all but refused credentials and throttling. */
const answersOfAnUpProvider = Array.from({ length: 100 }, (_, i) => 400 + i).filter(
  (status) => ![401, 403, 429].includes(status),
);

/**
 * A provider's probe: one authenticated GET that proves it reachable and serving. Any answer below
 * 500 counts (a 404 for a request that does not exist is an answer), except a refusal of our
 * credentials; a refused connection, a timeout or a 5xx means it is still down.
 */
export async function probeProvider(
  provider: string,
  url: string,
  headers: Record<string, string>,
): Promise<void> {
  await callProvider(
    provider,
    'read',
    { method: 'GET', url, headers, timeoutMs: 10_000 },
    answersOfAnUpProvider,
  );
}

/** Retry-After in milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const trimmed = header.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * A provider's error text as we may keep and show it: the first line-worth of printable text,
 * without anything that looks like a URL (signed URLs carry secrets) or a bearer token, at most
 * 300 characters.
 */
export function safeProviderMessage(text: string): string {
  return (
    text
      // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
      .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
      .replace(/\bhttps?:\/\/\S+/gi, '[url]')
      .replace(/\b(Bearer|Token|Key)\s+\S+/gi, '$1 [redacted]')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 300)
  );
}

/** The human part of a provider's error body: `detail`, `error.message`, `error`, `message`, or the text. */
function errorText(body: unknown): string {
  if (typeof body === 'string') return body.slice(0, 1000);
  if (!body || typeof body !== 'object') return '';
  const record = body as Record<string, unknown>;
  const error = record.error;
  if (error && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string')
    return (error as { message: string }).message;
  for (const value of [record.detail, error, record.message, record.title]) {
    if (typeof value === 'string') return value;
    if (Array.isArray(value))
      return value
        .map((item) =>
          item && typeof item === 'object' && 'msg' in item
            ? String((item as { msg: unknown }).msg)
            : String(item),
        )
        .join('; ');
  }
  return '';
}

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function errorCode(error: unknown): string {
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  for (const candidate of [cause, error]) {
    const code = (candidate as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
  }
  return '';
}

/** How result files and reference images are fetched from the internet. */
export interface DownloadPolicy {
  /** Address ranges allowed though not public (OUTBOUND_ALLOW_CIDRS). */
  allowCidrs: readonly string[];
  /** Whether plain http URLs are fetched: only when the provider's own API is configured on http (a local stand-in). */
  allowHttp: boolean;
}

/** Largest result accepted from a provider: 512 MiB (a long 4K video). */
const maxResultBytes = 512 * 1024 * 1024;

/**
 * Downloads a result the provider serves. Its URL is short-lived: one that has expired (403, 404,
 * 410) is gone for good; anything else that fails may work on the next attempt.
 */
export async function downloadResult(
  url: string,
  policy: DownloadPolicy,
  timeoutMs = 100_000,
): Promise<{ bytes: Buffer; contentType: string }> {
  try {
    return await outboundFetch(url, {
      maxBytes: maxResultBytes,
      timeoutMs,
      schemes: policy.allowHttp ? ['https:', 'http:'] : ['https:'],
      allowCidrs: policy.allowCidrs,
    });
  } catch (error) {
    if (error instanceof OutboundFetchError && !error.retryable) {
      if (error.status === 403 || error.status === 404 || error.status === 410)
        throw new ProviderResultGone(`the result is no longer served (${error.message})`);
      throw new ProviderResultGone(`the result cannot be fetched: ${error.message}`);
    }
    throw new ProviderTransientError(
      `the result could not be downloaded: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** Largest reference image sent on: 10 MiB, as the API accepts. */
const maxImageBytes = 10 * 1024 * 1024;

/**
 * A reference image's bytes: one of ours (an inline image the API stored) is read from storage,
 * never over HTTP; any other URL is fetched under the outbound rules. A URL that cannot be had is
 * the request's fault (the provider would refuse it too): a rejection.
 */
export async function readReferenceImage(
  url: string,
  storage: Storage,
  policy: DownloadPolicy,
): Promise<{ bytes: Buffer; contentType: string }> {
  const key = storage.keyOf(url);
  if (key) {
    const bytes = await storage.read(key.prefix, key.name);
    if (!bytes) throw new ProviderRejection('a reference image is no longer stored');
    return { bytes, contentType: contentTypeOfName(key.name) };
  }
  try {
    return await outboundFetch(url, {
      maxBytes: maxImageBytes,
      timeoutMs: 30_000,
      accept: ['image/*'],
      schemes: policy.allowHttp ? ['https:', 'http:'] : ['https:'],
      allowCidrs: policy.allowCidrs,
    });
  } catch (error) {
    if (error instanceof OutboundFetchError && !error.retryable)
      throw new ProviderRejection(`a reference image could not be fetched: ${error.message}`);
    throw new ProviderTransientError(
      `a reference image could not be fetched: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * A provider's input with every reference image of ours (a URL on our result host, at any depth,
 * lists included) replaced by a data URI of its bytes, read from storage, when it is at most
 * `maxBytes`; a larger one stays our URL, for the provider to fetch. Other URLs stay as given.
 * Nothing has been sent yet, so a storage failure is transient (and a missing image a rejection).
 */
export async function inlineStoredImages(
  input: Record<string, unknown>,
  storage: Storage,
  policy: DownloadPolicy,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<Record<string, unknown>> {
  const inline = async (value: unknown): Promise<unknown> => {
    if (typeof value === 'string') {
      if (!storage.keyOf(value)) return value;
      const image = await readReferenceImage(value, storage, policy);
      return image.bytes.length <= maxBytes ? dataUri(image) : value;
    }
    if (Array.isArray(value)) return Promise.all(value.map(inline));
    if (value && typeof value === 'object')
      return Object.fromEntries(
        await Promise.all(
          Object.entries(value).map(async ([field, item]) => [field, await inline(item)] as const),
        ),
      );
    return value;
  };
  try {
    return (await inline(input)) as Record<string, unknown>;
  } catch (error) {
    if (error instanceof ProviderRejection || error instanceof ProviderTransientError) throw error;
    throw new ProviderTransientError(
      `a reference image could not be read; nothing was sent: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** A data URI of an image's bytes. */
function dataUri(image: { bytes: Buffer; contentType: string }): string {
  return `data:${image.contentType};base64,${image.bytes.toString('base64')}`;
}

function contentTypeOfName(name: string): string {
  const extension = name.slice(name.lastIndexOf('.') + 1).toLowerCase();
  return extension === 'jpg' ? 'image/jpeg' : `image/${extension}`;
}
