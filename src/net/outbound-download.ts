import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { classify, OutboundFetchError, origin, tooLarge } from './outbound-fetch-error.js';
import { openOutbound, type OutboundFetchOptions } from './outbound-fetch.js';

/**
 * A large body (a provider's video) fetched under the same rules as `outboundFetch`, but streamed
 * into a file as it arrives, so memory per download stays at a few stream buffers whatever its
 * size. There is no deadline on the whole transfer, which a large file on a slow link could never
 * meet: `headersTimeoutMs` covers resolution, connection, redirects and the answer's headers, and
 * `idleTimeoutMs` the longest silence between two chunks of the body.
 */
export interface OutboundDownloadOptions extends Omit<OutboundFetchOptions, 'timeoutMs'> {
  headersTimeoutMs: number;
  idleTimeoutMs: number;
}

/** Downloads `input` into `file` (created or replaced); resolves with its size and declared type. */
export async function outboundDownload(
  input: string,
  file: string,
  options: OutboundDownloadOptions,
): Promise<{ size: number; contentType: string }> {
  const deadline = new AbortController();
  const headersTimer = setTimeout(
    () => deadline.abort(new DOMException('headers timeout', 'TimeoutError')),
    options.headersTimeoutMs,
  );
  const signal = options.signal ? AbortSignal.any([deadline.signal, options.signal]) : deadline.signal;
  let opened: Awaited<ReturnType<typeof openOutbound>>;
  try {
    opened = await openOutbound(input, options, signal, deadline.signal);
  } finally {
    clearTimeout(headersTimer);
  }
  const { response, url, contentType } = opened;
  let size = 0;
  let idle: NodeJS.Timeout | undefined;
  let stalled = false;
  const arm = () => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      stalled = true;
      response.destroy(new Error('idle'));
    }, options.idleTimeoutMs);
  };
  // Counts and caps the bytes as they pass, and restarts the idle clock on each chunk.
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > options.maxBytes) return done(tooLarge(url, options.maxBytes));
      arm();
      done(null, chunk);
    },
  });
  arm();
  try {
    if (options.signal) await pipeline(response, meter, createWriteStream(file), { signal: options.signal });
    else await pipeline(response, meter, createWriteStream(file));
  } catch (error) {
    if (stalled)
      throw new OutboundFetchError(
        'timeout',
        'transient',
        `${origin(url)} sent nothing for ${options.idleTimeoutMs} ms`,
      );
    throw classify(error, url, deadline.signal);
  } finally {
    clearTimeout(idle);
    response.destroy();
  }
  return { size, contentType };
}
