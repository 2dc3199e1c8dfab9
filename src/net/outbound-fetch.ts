import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { AddressPolicy } from './address-policy.js';

/**
 * The one way the service fetches a URL that someone else gave it: a client's
 * reference image, a provider's result. Whoever controls the URL controls where
 * we connect, from a process that holds credentials, so every hop is checked:
 *
 * - the scheme (HTTPS only unless the caller allows HTTP), and no credentials in the URL;
 * - the address actually connected to: names are resolved by our own lookup, which
 *   refuses the connection unless every address the name resolves to is allowed by
 *   the AddressPolicy; the socket connects to exactly those addresses, so a name that
 *   changes its answer between a check and the connection (DNS rebinding) gains nothing;
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
}

/**
 * `refused`: this URL will not work however often it is tried (bad scheme,
 * forbidden address, too large, wrong type, a 4xx, a bad certificate).
 * `transient`: it may work later (timeout, 5xx, 408, 429, a reset or refused connection, DNS).
 */
export type OutboundFetchErrorKind = 'refused' | 'transient';

export type OutboundFetchErrorCode =
  | 'invalid_url'
  | 'scheme_not_allowed'
  | 'credentials_in_url'
  | 'forbidden_address'
  | 'too_many_redirects'
  | 'bad_redirect'
  | 'http_status'
  | 'too_large'
  | 'unsupported_content_type'
  | 'unsupported_encoding'
  | 'tls'
  | 'timeout'
  | 'network';

export class OutboundFetchError extends Error {
  override readonly name = 'OutboundFetchError';

  constructor(
    readonly code: OutboundFetchErrorCode,
    readonly kind: OutboundFetchErrorKind,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get retryable(): boolean {
    return this.kind === 'transient';
  }
}

const redirectStatuses = new Set([301, 302, 303, 307, 308]);
/** 4xx answers that say "not now" rather than "never". */
const transientClientStatuses = new Set([408, 425, 429]);

/** Fetches a URL under the rules above; resolves with the body, or rejects with an OutboundFetchError. */
export async function outboundFetch(input: string, options: OutboundFetchOptions): Promise<FetchedBody> {
  const policy = new AddressPolicy(options.allowCidrs ?? []);
  const schemes = options.schemes ?? ['https:'];
  const maxRedirects = options.maxRedirects ?? 3;
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([deadline, options.signal]) : deadline;
  const ca = options.extraCa?.length ? [...rootCertificates, ...options.extraCa] : undefined;

  let url = parseUrl(input);
  for (let redirects = 0; ; redirects++) {
    checkUrl(url, schemes, policy);
    let response: http.IncomingMessage;
    try {
      response = await get(url, { policy, signal, ca, accept: options.accept });
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
      return { bytes: await readCapped(response, url, options.maxBytes), contentType };
    } catch (error) {
      throw classify(error, url, deadline);
    } finally {
      // A redirect's or a refused answer's body is not read; the connection is not reused.
      response.destroy();
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

/** Scheme, credentials and, for a literal address (which is connected to without a lookup), the address. */
function checkUrl(url: URL, schemes: readonly string[], policy: AddressPolicy): void {
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

function get(
  url: URL,
  context: {
    policy: AddressPolicy;
    signal: AbortSignal;
    ca: string[] | undefined;
    accept?: readonly string[];
  },
): Promise<http.IncomingMessage> {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = transport.request({
      protocol: url.protocol,
      hostname: bareHost(url),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: {
        accept: context.accept?.join(', ') ?? '*/*',
        'accept-encoding': 'identity',
        'user-agent': 'generation-service',
      },
      // A connection of its own: nothing is pooled across fetches or hops.
      agent: false,
      lookup: guardedLookup(url, context.policy),
      signal: context.signal,
      ...(context.ca ? { ca: context.ca } : {}),
    });
    request.once('response', resolve);
    request.on('error', reject);
    request.end();
  });
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * The resolver the socket connects through: it resolves the name once, and
 * hands the socket those addresses only when every one of them is allowed.
 */
function guardedLookup(url: URL, policy: AddressPolicy) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses) => {
      if (error) return callback(error, []);
      if (addresses.length === 0) {
        const none: NodeJS.ErrnoException = new Error(`${hostname} has no address`);
        none.code = 'ENOTFOUND';
        return callback(none, []);
      }
      for (const { address } of addresses) {
        const verdict = policy.check(address);
        if (!verdict.allowed) return callback(forbidden(url, address, verdict.range), []);
      }
      if (options.all) return callback(null, addresses);
      const [first] = addresses;
      return callback(null, first!.address, first!.family);
    });
  };
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

/** Our errors pass through; anything else becomes one, classified. */
function classify(error: unknown, url: URL, deadline: AbortSignal): Error {
  if (error instanceof OutboundFetchError) return error;
  if (deadline.aborted)
    return new OutboundFetchError(
      'timeout',
      'transient',
      `${origin(url)} did not answer in time`,
      undefined,
      {
        cause: error,
      },
    );
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'ABORT_ERR' || (error as Error | undefined)?.name === 'AbortError') return error as Error;
  const message = error instanceof Error ? error.message : String(error);
  // Certificate problems do not go away by asking again.
  if (/CERT|SELF_SIGNED|ERR_TLS|UNABLE_TO_VERIFY|SSL/.test(code))
    return new OutboundFetchError('tls', 'refused', `${origin(url)}: ${message}`, undefined, {
      cause: error,
    });
  return new OutboundFetchError('network', 'transient', `${origin(url)}: ${code || message}`, undefined, {
    cause: error,
  });
}

function forbidden(url: URL, address: string, range: string): OutboundFetchError {
  return new OutboundFetchError(
    'forbidden_address',
    'refused',
    `${origin(url)} is at ${address} (${range}), which is not fetched`,
  );
}

function tooLarge(url: URL, maxBytes: number): OutboundFetchError {
  return new OutboundFetchError('too_large', 'refused', `${origin(url)} sent more than ${maxBytes} bytes`);
}

/** Scheme, host and port only: paths and queries may carry signatures, which stay out of messages and logs. */
function origin(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** The host without the brackets of an IPv6 literal. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

function mediaType(header: string | undefined): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

function typeMatches(type: string, pattern: string): boolean {
  return pattern.endsWith('/*')
    ? type.startsWith(pattern.slice(0, -1)) && type.length > pattern.length - 1
    : type === pattern;
}
