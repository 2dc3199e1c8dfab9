import {
  ProviderResultGone,
  ProviderTransientError,
  type ProviderResult,
  type ProviderStatus,
} from '../provider.js';
import { safeProviderMessage, type ProviderAnswer } from '../provider-answers.js';

/* Reading what fal returns for a completed request: its files, or the error it completed with. */

/** What a COMPLETED request's result says: its files, or the error it completed with. */
export function resultOutcome(answer: ProviderAnswer): ProviderStatus {
  if (answer.status >= 200 && answer.status < 300) {
    // Empty, cut short, or a proxy's HTML page: unreadable says nothing of the job; read it again.
    if (answer.body === undefined || answer.body === null || typeof answer.body !== 'object')
      throw new ProviderTransientError(`fal answered HTTP ${answer.status} with a result that is not JSON`);
    return resultsOf(answer.body);
  }
  const body = (answer.body ?? {}) as { detail?: unknown; error_type?: unknown };
  const errorType = safeProviderMessage(
    typeof body.error_type === 'string' ? body.error_type : (answer.headers.get('x-fal-error-type') ?? ''),
  );
  const detail = describeDetail(body.detail);
  // fal's model errors (a `detail` list of typed errors, 422) say the input was refused.
  if (answer.status === 422)
    return {
      state: 'failed',
      rejected: true,
      message: `fal refused the input${detail ? `: ${detail}` : ''}.`,
    };
  // A request error (`error_type`, X-Fal-Error-Type), a model's error list, or a refusal of the
  // request itself: the request ended this way, and reading it again gives the same answer.
  if (errorType || Array.isArray(body.detail) || answer.status < 500) {
    const what = [errorType, detail].filter(Boolean).join(': ');
    return {
      state: 'failed',
      message: `The provider failed this generation (${what || `HTTP ${answer.status}`}).`,
    };
  }
  // A 5xx without fal's error shape is a failure to read the result, not the result.
  throw new ProviderTransientError(`fal answered HTTP ${answer.status} for the result`);
}

/**
 * The statuses a completed request's result may carry as its own error, read by resultOutcome. Left
 * to callProvider (transient): 401/403 (our key is refused, not the request), 408 and 429 (our
 * read timed out or is throttled).
 */
const notTheRequests = new Set([401, 403, 408, 429]);
export const errorStatuses = Array.from({ length: 200 }, (_, i) => 400 + i).filter(
  (status) => !notTheRequests.has(status),
);

/** A model's output as results: `images: [{ url, width, height, content_type }]` or `video: { url, … }`. */
function resultsOf(body: unknown): ProviderStatus {
  const output = (body ?? {}) as { images?: unknown; image?: unknown; video?: unknown };
  const files = Array.isArray(output.images)
    ? output.images
    : [output.image ?? output.video].filter((file) => file !== undefined);
  const results: ProviderResult[] = [];
  for (const file of files) {
    const { url, width, height, content_type } = (file ?? {}) as Record<string, unknown>;
    if (typeof url !== 'string' || url === '')
      return { state: 'failed', message: 'The provider returned a result without a file.' };
    results.push({
      url,
      // What fal says; persisting measures the stored bytes, which win.
      width: typeof width === 'number' ? width : 0,
      height: typeof height === 'number' ? height : 0,
      contentType: typeof content_type === 'string' ? content_type : output.video ? 'video/mp4' : 'image/png',
    });
  }
  if (results.length === 0) return { state: 'failed', message: 'The provider returned no image or video.' };
  return { state: 'succeeded', results };
}

/** The human part of a fal error's `detail`: a string, or a list of typed errors' `msg`s. */
function describeDetail(detail: unknown): string {
  if (typeof detail === 'string') return safeProviderMessage(detail);
  if (!Array.isArray(detail)) return '';
  return safeProviderMessage(
    detail
      .map((item) => {
        const { msg, loc } = (item ?? {}) as { msg?: unknown; loc?: unknown };
        const field = Array.isArray(loc) ? loc.filter((part) => part !== 'body').join('.') : '';
        return typeof msg === 'string' ? (field ? `${field}: ${msg}` : msg) : '';
      })
      .filter(Boolean)
      .join('; '),
  );
}

/** A result fal returned inline (a model run with `sync_mode`). */
export function decodeDataUri(uri: string, index: number): { bytes: Buffer; contentType: string } {
  const match = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+)(;[^,]*)?;base64,/i.exec(uri);
  if (!match) throw new ProviderResultGone(`fal's result ${index} is a data URI that is not base64`);
  return { bytes: Buffer.from(uri.slice(match[0].length), 'base64'), contentType: match[1]!.toLowerCase() };
}
