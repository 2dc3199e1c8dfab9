/**
 * `refused`: this URL will not work however often it is tried (bad scheme,
 * forbidden address, too large, wrong type, a 4xx, a bad certificate).
 * `transient`: it may work later (timeout, 5xx, 408, 429, a reset or refused connection, DNS).
 */
type OutboundFetchErrorKind = 'refused' | 'transient';

type OutboundFetchErrorCode =
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
  /** The name does not resolve (NXDOMAIN): transient for a provider's host, final for a customer's. */
  | 'unknown_host'
  | 'network';

/** How an outbound fetch failed; `kind` says whether trying again can help. */
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

/** Our errors pass through; anything else becomes one, classified. */
export function classify(error: unknown, url: URL, deadline: AbortSignal): Error {
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
  // The webhook resolver's time limit (webhook-resolver.ts): its name servers did not answer.
  if (code === 'ETIMEOUT')
    return new OutboundFetchError(
      'network',
      'transient',
      `${origin(url)}: its host name did not resolve in time`,
      undefined,
      { cause: error },
    );
  if (code === 'ENOTFOUND')
    return new OutboundFetchError('unknown_host', 'transient', `${origin(url)}: no such host`, undefined, {
      cause: error,
    });
  return new OutboundFetchError('network', 'transient', `${origin(url)}: ${code || message}`, undefined, {
    cause: error,
  });
}

/**
 * A host at an address we never fetch. The message (which can reach the customer, in a
 * generation's error) names the kind of range but not the address: what a name resolves to on
 * our network is ours to keep.
 */
export function forbidden(url: URL, _address: string, range: string): OutboundFetchError {
  return new OutboundFetchError(
    'forbidden_address',
    'refused',
    `${origin(url)} resolves to an address we never fetch (${range})`,
  );
}

export function tooLarge(url: URL, maxBytes: number): OutboundFetchError {
  return new OutboundFetchError('too_large', 'refused', `${origin(url)} sent more than ${maxBytes} bytes`);
}

/** Scheme, host and port only: paths and queries may carry signatures, which stay out of messages and logs. */
export function origin(url: URL): string {
  return `${url.protocol}//${url.host}`;
}
