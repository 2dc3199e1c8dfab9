import { PermanentError } from '../../vocabulary/errors.js';

/*
 * Our job ids for fal's requests: `{model}::{request_id}`, then `::{enqueued at, ms}` (see
 * fal-queue-provider.ts: status, result and cancel live under the model id's owner/app only).
 */

/** Separates the model id from fal's request id in our job id. */
const jobIdSeparator = '::';
/** A fal model id: owner/app, then an optional subpath. */
export const modelIdPattern = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)+$/;

/** Our job id for the request fal queued as `requestId`, enqueued at `enqueuedAt` (ms). */
export function falJobId(model: string, requestId: string, enqueuedAt: number): string {
  return [model, requestId, enqueuedAt].join(jobIdSeparator);
}

/** fal's request id in one of our job ids; undefined for a string that is not one. */
export function requestIdOf(jobId: string): string | undefined {
  try {
    return parseJobId(jobId).requestId;
  } catch {
    return undefined;
  }
}

/** A job id's parts: `{model}::{request_id}`, then `::{enqueued at, ms}` on ids made since the grace. */
export function parseJobId(jobId: string): { model: string; requestId: string; enqueuedAt?: number } {
  const [model = '', requestId = '', enqueued, ...rest] = jobId.split(jobIdSeparator);
  const enqueuedAt = enqueued === undefined ? undefined : Number(enqueued);
  if (
    !modelIdPattern.test(model) ||
    requestId === '' ||
    rest.length > 0 ||
    (enqueuedAt !== undefined && !Number.isSafeInteger(enqueuedAt))
  )
    throw new PermanentError(`${JSON.stringify(jobId)} is not a fal job id ({model}::{request_id})`);
  return { model, requestId, ...(enqueuedAt !== undefined ? { enqueuedAt } : {}) };
}
