import { Agent, buildConnector, fetch, type FormData, type Response } from 'undici';
import {
  notAccepted,
  ProviderRejection,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
} from './provider.js';
import { providerThrottled, requestTurn, type RequestKind } from './request-budget.js';

/**
 * Plain HTTP to a provider's API, shared by the adapters. One call is one request: nothing here
 * retries, because none of the providers accepts an idempotency key and a resent create can start
 * (and bill) a second job. The workflow's retry policies do the retrying, knowing what was sent.
 *
 * How a failed call is read:
 * - the connection was never made (refused, no such host, unreachable, connect timeout, a failed
 *   TLS handshake: the connector's own failure, see `connect`): nothing left us → transient. The
 *   same error codes on a connection that was made (EHOSTUNREACH on a reused keep-alive connection,
 *   say) come after the request may have been written: a create's fate is then uncertain;
 * - 429 (and 503 with Retry-After on a read) → transient, after the Retry-After the provider gave;
 *   a create refused so, or never connected, proves the job not accepted (provesNotAccepted), as
 *   does an answer the adapter reads as its provider's own refusal (`ownRefusal`: what its provider
 *   documents, told apart from a proxy's page saying the same status);
 * - 401/403 → transient: the provider refuses *our* credentials; the input is not at fault and an
 *   operator can fix the key while the step retries;
 * - other 4xx on a create → rejection (the input is wrong; nothing ran);
 * - a create whose answer was lost after it left us (timeout, reset, 5xx) → uncertain; the same on a
 *   read (status, result, cancel) is transient: reads are safe to repeat.
 *
 * Under a provider account's request budget (budgetProvider, in the worker), each request first
 * takes its turn (request-budget.ts): it may wait, or fail before anything is sent (a throttled
 * create then proves the job not accepted); a 429 pauses the account for every worker.
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
  /** What the request counts as in the request budget, when the Provider method does not say (a result read inside a status). */
  counts?: RequestKind;
}

export interface ProviderAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  body: unknown;
}

/**
 * Errors of connections that were never made, as the connector reported them: a request that fails
 * with one of these was never written (undici hands the connector's error to the requests waiting
 * for that connection). An error of a connection that was made, whatever its code, is not here.
 */
const connectFailures = new WeakSet<object>();
const defaultConnector = buildConnector({});
/** undici's own connector (the same defaults as an Agent's), marking the errors of connections it could not make. */
const connect: buildConnector.connector = (options, callback) =>
  defaultConnector(options, (error, socket) => {
    if (error) {
      connectFailures.add(error);
      callback(error, null);
    } else callback(null, socket);
  });

/** Whether the call failed because its connection was never made (see connectFailures). */
function neverConnected(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    if (connectFailures.has(e)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Whether a create's answer is the provider's own proof that it did not take the job. */
export type NotAcceptedAnswer = (answer: ProviderAnswer) => boolean;

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
  /**
   * A 5xx answer this provider documents as "not accepted" on a create (the job was not taken and
   * is not billed), as its own answer (its error body or headers, not a proxy's page with the same
   * status): a transient failure that proves it (provesNotAccepted), not an uncertain one.
   */
  ownRefusal: NotAcceptedAnswer = () => false,
): Promise<ProviderAnswer> {
  // Nothing is sent before the budget gives this request its turn (or refuses it: nothing sent).
  const counted = await requestTurn(kind, call.method, call.counts);
  let response: Response;
  try {
    response = await fetch(call.url, {
      dispatcher: dispatcherFor(call.timeoutMs),
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
  const answer = { status: response.status, headers: response.headers, body };
  const error = refusal(provider, kind, answer, body ?? text, ownRefusal);
  // The provider throttles the account: every worker's calls to it pause for its Retry-After.
  if (error instanceof ProviderThrottled) await providerThrottled(counted, error.retryAfterMs ?? 0);
  throw error;
}

/**
 * undici's default dispatcher gives up on an answer's headers after 300 s and on a silent body
 * after 300 s, whatever the call's own deadline: a 10-minute OpenAI call was cut at 5 minutes and
 * its (billed) answer lost. Each deadline gets a dispatcher whose timeouts are that deadline, so
 * the call's AbortSignal is the only clock. One per deadline, kept: connections are reused.
 */
const dispatchers = new Map<number, Agent>();
function dispatcherFor(timeoutMs: number): Agent {
  let agent = dispatchers.get(timeoutMs);
  if (!agent) {
    agent = new Agent({ headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connect });
    dispatchers.set(timeoutMs, agent);
  }
  return agent;
}

function unanswered(provider: string, kind: CallKind, error: unknown, timeoutMs: number): Error {
  const code = errorCode(error);
  if (neverConnected(error))
    return notAccepted(
      new ProviderTransientError(`${provider} could not be reached (${code}); nothing was sent`),
    );
  const timedOut =
    (error as Error | undefined)?.name === 'TimeoutError' ||
    ['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'].includes(code);
  const what = timedOut ? `no answer within ${timeoutMs} ms` : `the connection failed (${code || 'unknown'})`;
  if (kind === 'create')
    return new ProviderUncertainError(`${provider} received the request but ${what}: it may have the job`);
  return new ProviderTransientError(`${provider}: ${what}`);
}

function refusal(
  provider: string,
  kind: CallKind,
  answer: ProviderAnswer,
  body: unknown,
  ownRefusal: NotAcceptedAnswer,
): Error {
  const { status, headers } = answer;
  const detail = safeProviderMessage(errorText(body));
  const said = detail ? `: ${detail}` : '';
  if (status === 429) {
    const throttled = new ProviderThrottled(
      `${provider} is throttling (HTTP ${status})${said}`,
      retryAfterMs(headers.get('retry-after')) ?? 1_000,
    );
    // A create refused with 429 was not taken: no provider bills a throttled request.
    return kind === 'create' ? notAccepted(throttled) : throttled;
  }
  if (kind === 'create' && status >= 500 && ownRefusal(answer))
    return notAccepted(
      new ProviderTransientError(
        `${provider} refused the create (HTTP ${status})${said}; it did not take the job`,
      ),
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
 * without anything that looks like a URL (signed URLs carry secrets) or a credential, at most 300
 * characters. Credentials as providers and proxies echo them: `Bearer x`, `Token x`, `Key x`,
 * `key: x` / `api_key=x` / `"token": "x"`, OpenAI keys (`sk-…`), Replicate tokens (`r8_…`), and
 * any long run of base64 or hex (a key, a signature, a JWT) whatever it is called.
 */
export function safeProviderMessage(text: string): string {
  return (
    text
      // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
      .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
      .replace(/\bhttps?:\/\/\S+/gi, '[url]')
      // A scheme's credential, not an English word after it ("key provided:"): 8+ characters with a digit, a symbol or an inner colon.
      .replace(/\b(Bearer|Token|Basic|Key)\s+(?=\S*[0-9_=-]|\S*:\S)\S{8,}/gi, '$1 [redacted]')
      .replace(
        /\b((?:api[_-]?)?(?:key|token|secret|password|authorization))("?\s*[:=]\s*"?)[^\s",;}]+/gi,
        '$1$2[redacted]',
      )
      .replace(/\bsk-[A-Za-z0-9_-]{8,}/g, '[redacted]')
      .replace(/\br8_[A-Za-z0-9]{8,}/g, '[redacted]')
      .replace(/[A-Za-z0-9+/_.=-]{32,}/g, (run) =>
        /[0-9]/.test(run) && /[A-Za-z]/.test(run) ? '[redacted]' : run,
      )
      .replace(/\b[0-9a-f]{24,}\b/gi, '[redacted]')
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
  /** Certificates (PEM) trusted besides the system's (an internal image mirror's; tests' own). */
  extraCa?: readonly string[];
}
