import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PermanentError } from '../vocabulary/errors.js';
import { OutboundFetchError } from '../net/outbound-fetch-error.js';
import { outboundDownload } from '../net/outbound-download.js';
import type { DownloadPolicy } from './provider-http.js';
import { ProviderResultGone, ProviderTransientError, type ResultContent } from './provider.js';

/** Largest result accepted from a provider: 512 MiB (a long 4K video). */
const maxResultBytes = 512 * 1024 * 1024;

/** How long a result download may wait: for the answer's headers, and between two chunks of its body. */
export interface DownloadTimeouts {
  headersTimeoutMs: number;
  idleTimeoutMs: number;
}
const defaultTimeouts: DownloadTimeouts = { headersTimeoutMs: 60_000, idleTimeoutMs: 60_000 };

/** What can never be copied however often it is tried: the same URL will not change its answer. */
const unusable = new Set([
  'invalid_url',
  'scheme_not_allowed',
  'credentials_in_url',
  'forbidden_address',
  'too_large',
]);

/**
 * Downloads a result the provider serves into a temporary file (streamed: memory stays at a few
 * buffers whatever the size), with no deadline on the whole transfer, only on silence. Its URL is
 * short-lived: one that has expired (403, 404, 410: nothing else says so) is gone for good, and a
 * URL that can never be fetched by our rules (too large, a forbidden address) cannot be used;
 * anything else (TLS, another status, an encoding, a timeout, a reset) may work on the next attempt.
 */
export async function downloadResult(
  url: string,
  policy: DownloadPolicy,
  timeouts: DownloadTimeouts = defaultTimeouts,
): Promise<ResultContent> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'result-'));
  const dispose = () => rm(dir, { recursive: true, force: true });
  const file = path.join(dir, 'body');
  try {
    const { size, contentType } = await outboundDownload(url, file, {
      maxBytes: maxResultBytes,
      ...timeouts,
      schemes: policy.allowHttp ? ['https:', 'http:'] : ['https:'],
      allowCidrs: policy.allowCidrs,
    });
    return { file, size, contentType, dispose };
  } catch (error) {
    await dispose();
    if (error instanceof OutboundFetchError) {
      if (error.status === 403 || error.status === 404 || error.status === 410)
        throw new ProviderResultGone(`the result is no longer served (${error.message})`);
      if (unusable.has(error.code))
        throw new PermanentError(`the result cannot be fetched: ${error.message}`);
    }
    throw new ProviderTransientError(
      `the result could not be downloaded: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}
