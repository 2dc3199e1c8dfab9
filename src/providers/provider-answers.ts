import {
  notAccepted,
  ProviderRejection,
  ProviderThrottled,
  ProviderTransientError,
  ProviderUncertainError,
} from './provider.js';

/**
 * A provider's HTTP answer, and what a call that failed means: callProvider (provider-http.ts)
 * makes the call and throws the error decided here.
 *
 * How a failed call is read:
 * - the connection was never made (refused, no such host, unreachable, connect timeout, a failed
 *   TLS handshake: the connector's own failure, see provider-http.ts's `connect`): nothing left us → transient. The
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
 */

/** A create (the job handed over) or a read (status, result, cancel, probe). */
export type CallKind = 'create' | 'read';

export interface ProviderAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON body, or undefined when the body is empty or not JSON. */
  body: unknown;
}

/** Whether a create's answer is the provider's own proof that it did not take the job. */
export type NotAcceptedAnswer = (answer: ProviderAnswer) => boolean;

/**
 * The error of a call that got no whole answer: `neverConnected` when its connection was never made
 * (nothing was sent; see callProvider's connector).
 */
export function unanswered(
  provider: string,
  kind: CallKind,
  error: unknown,
  timeoutMs: number,
  neverConnected: boolean,
): Error {
  const code = errorCode(error);
  if (neverConnected)
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

/** The error of a call answered with a status it does not accept: see above. */
export function refusal(
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

function errorCode(error: unknown): string {
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  for (const candidate of [cause, error]) {
    const code = (candidate as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
  }
  return '';
}
