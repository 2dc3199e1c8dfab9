import type http from 'node:http';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { AddressPolicy } from './address-policy.js';
import { classify, forbidden, origin, OutboundFetchError, tooLarge } from './outbound-fetch-error.js';
import { bareHost, pinnedGet } from './pinned-connection.js';

/**
 * The one way the service fetches a URL that someone else gave it: a client's
 * reference image, a provider's result. Whoever controls the URL controls where
 * we connect, from a process that holds credentials, so every hop is checked:
 *
 * - the scheme (HTTPS only unless the caller allows HTTP), and no credentials in the URL;
 * - the address actually connected to (pinned-connection.ts): every address a name
 *   resolves to must be allowed by the AddressPolicy, and the socket connects to exactly
 *   those, so DNS rebinding gains nothing;
 * - redirects are followed by hand, at most `maxRedirects`, each hop checked again;
 * - the body is cut off past `maxBytes` while it streams (Content-Length is not trusted);
 * - one deadline covers resolution, connection, every hop and the body;
 * - the declared Content-Type must be one the caller accepts, and the body must not be
 *   compressed (we ask for `identity`).
 *
 * Failures are OutboundFetchErrors whose `kind` says whether trying again can help.
 */
export interface OutboundFetchOptions {
  /** Largest body accepted, in bytes. */
  maxBytes: number;
  /** Deadline for the whole fetch, redirects included. */
  timeoutMs: number;
  /** Accepted media types, exact (`image/png`) or by family (`image/*`); omitted: any. */
  accept?: readonly string[];
  /** Schemes allowed on every hop; default HTTPS only. */
  schemes?: readonly ('https:' | 'http:')[];
  /** Redirects followed at most; default 3. */
  maxRedirects?: number;
  /** Address ranges (CIDRs) allowed on purpose though not public, e.g. an internal mirror (never cloud metadata). */
  allowCidrs?: readonly string[];
  /** Certificates (PEM) trusted besides Node's root CAs (the NODE_EXTRA_CA_CERTS ones are not kept when this is set). */
  extraCa?: readonly string[];
  /** Cancels the fetch. */
  signal?: AbortSignal;
}

export interface FetchedBody {
  bytes: Buffer;
  /** The declared media type, lower case, without parameters. */
  contentType: string;
  /** The answer's headers (Cache-Control, say). */
  headers: http.IncomingHttpHeaders;
}

const redirectStatuses = new Set([301, 302, 303, 307, 308]);
/** 4xx answers that say "not now" rather than "never". */
const transientClientStatuses = new Set([408, 425, 429]);

/** Fetches a URL under the rules above; resolves with the body, or rejects with an OutboundFetchError. */
export async function outboundFetch(input: string, options: OutboundFetchOptions): Promise<FetchedBody> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  const { response, url, contentType } = await openOutbound(input, options, signal, deadline);
  try {
    return {
      bytes: await readCapped(response, url, options.maxBytes),
      contentType,
      headers: response.headers,
    };
  } catch (error) {
    throw classify(error, url, deadline);
  } finally {
    response.destroy();
  }
}

/** An answer that passed every check, its body unread: the caller reads it, then destroys it. */
export interface OpenedAnswer {
  response: http.IncomingMessage;
  /** The URL that answered (after redirects). */
  url: URL;
  contentType: string;
}

/**
 * Follows the URL under the rules above up to a 200 whose headers pass (encoding, type, declared
 * length), and resolves with it unread; `signal` covers everything until then, `deadline` is the
 * part of it that means "too slow" (a timeout rather than a cancel).
 */
export async function openOutbound(
  input: string,
  options: Omit<OutboundFetchOptions, 'timeoutMs' | 'signal'>,
  signal: AbortSignal,
  deadline: AbortSignal,
): Promise<OpenedAnswer> {
  const policy = new AddressPolicy(options.allowCidrs ?? []);
  const schemes = options.schemes ?? ['https:'];
  const maxRedirects = options.maxRedirects ?? 3;
  const ca = options.extraCa?.length ? [...rootCertificates, ...options.extraCa] : undefined;

  let url = parseUrl(input);
  for (let redirects = 0; ; redirects++) {
    checkUrl(url, schemes, policy);
    let response: http.IncomingMessage;
    try {
      response = await pinnedGet(url, { policy, signal, ca, accept: options.accept });
    } catch (error) {
      throw classify(error, url, deadline);
    }
    try {
      const status = response.statusCode ?? 0;
      if (redirectStatuses.has(status)) {
        if (redirects >= maxRedirects)
          throw new OutboundFetchError(
            'too_many_redirects',
            'refused',
            `${origin(url)} redirected more than ${maxRedirects} times`,
            status,
          );
        const location = response.headers.location;
        if (!location)
          throw new OutboundFetchError(
            'bad_redirect',
            'refused',
            `${origin(url)} redirected nowhere`,
            status,
          );
        url = parseUrl(location, url);
        // A redirect's body is not read; the connection is not reused.
        response.destroy();
        continue;
      }
      if (status !== 200) {
        const transient = status >= 500 || transientClientStatuses.has(status);
        throw new OutboundFetchError(
          'http_status',
          transient ? 'transient' : 'refused',
          `${origin(url)} answered ${status}`,
          status,
        );
      }
      const encoding = (response.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
      if (encoding !== 'identity' && encoding !== '')
        throw new OutboundFetchError(
          'unsupported_encoding',
          'refused',
          `${origin(url)} sent a ${encoding} body`,
        );
      const contentType = mediaType(response.headers['content-type']);
      if (options.accept && !options.accept.some((pattern) => typeMatches(contentType, pattern)))
        throw new OutboundFetchError(
          'unsupported_content_type',
          'refused',
          `${origin(url)} sent ${contentType || 'no content type'}, not ${options.accept.join(' or ')}`,
        );
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) throw tooLarge(url, options.maxBytes);
      return { response, url, contentType };
    } catch (error) {
      // A refused answer's body is not read; the connection is not reused.
      response.destroy();
      throw classify(error, url, deadline);
    }
  }
}

function parseUrl(value: string, base?: URL): URL {
  try {
    return new URL(value, base);
  } catch {
    throw new OutboundFetchError(
      base ? 'bad_redirect' : 'invalid_url',
      'refused',
      base ? `${origin(base)} redirected to something that is not a URL` : 'not a URL',
    );
  }
}

/** Scheme, credentials and, for a literal address (which is connected to without a lookup), the address (a webhook URL is checked by it at admission too). */
export function checkUrl(url: URL, schemes: readonly string[], policy: AddressPolicy): void {
  if (!schemes.includes(url.protocol))
    throw new OutboundFetchError(
      'scheme_not_allowed',
      'refused',
      `${url.protocol.replace(/:$/, '')} URLs are not fetched (only ${schemes.map((s) => s.replace(/:$/, '')).join(', ')})`,
    );
  if (url.username || url.password)
    throw new OutboundFetchError('credentials_in_url', 'refused', 'URLs with credentials are not fetched');
  const host = bareHost(url);
  if (isIP(host)) {
    const verdict = policy.check(host);
    if (!verdict.allowed) throw forbidden(url, host, verdict.range);
  }
}

async function readCapped(response: http.IncomingMessage, url: URL, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw tooLarge(url, maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

function mediaType(header: string | undefined): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

function typeMatches(type: string, pattern: string): boolean {
  return pattern.endsWith('/*')
    ? type.startsWith(pattern.slice(0, -1)) && type.length > pattern.length - 1
    : type === pattern;
}
