/**
 * What a model provider must offer the generation workflow, whatever its wire
 * protocol: submit a job (with our idempotency token), report its status,
 * hand over each result, and, where it can, say whether it has a job for a
 * token. Errors are classified, because the workflow's charging rules depend
 * on the class: see `ProviderRejection`, `ProviderTransientError` and
 * `ProviderUncertainError`.
 */
export interface Provider {
  /** Starts a job. The token is derived from the generation: a provider that sees it twice must not run twice. */
  submit(job: ProviderJob): Promise<{ jobId: string }>;
  /** Where the job stands. */
  status(jobId: string): Promise<ProviderStatus>;
  /** The bytes of one result (`index` into the succeeded status's results). */
  fetchResult(jobId: string, index: number): Promise<{ bytes: Buffer; contentType: string }>;
  /**
   * Whether the provider accepted a job with this token, for when a submit's
   * answer was lost. `unknown`: the provider cannot tell (or cannot be asked).
   */
  lookup(token: string): Promise<{ found: true; jobId: string } | { found: false } | { found: 'unknown' }>;
}

export interface ProviderJob {
  /** Idempotency token: stable for a generation across retries, crashes and resets. */
  token: string;
  model: string;
  mediaType: 'image' | 'video';
  prompt: string;
  /** Validated options with defaults applied (aspect ratio, resolution, quality, duration…). */
  options: Record<string, string | number | boolean | undefined>;
  /** Reference images as URLs the provider can fetch (inline images were stored by us first). */
  images: string[];
  /** Output long edge in pixels, from the catalog. */
  longEdgePx: number;
}

export interface ProviderResult {
  width: number;
  height: number;
  contentType: string;
  /** For videos. */
  durationSeconds?: number;
  hasAudio?: boolean;
}

export type ProviderStatus =
  | { state: 'running'; progress?: number }
  | { state: 'succeeded'; results: ProviderResult[] }
  | { state: 'failed'; message: string };

/** The provider refused the job outright; nothing ran, so the debit is refunded. */
export class ProviderRejection extends Error {
  override readonly name = 'ProviderRejection';
}

/** A failure that says nothing about the job; the same call may be tried again. */
export class ProviderTransientError extends Error {
  override readonly name = 'ProviderTransientError';
}

/** A submit was sent but its answer was lost: the provider may or may not have the job. */
export class ProviderUncertainError extends Error {
  override readonly name = 'ProviderUncertainError';
}
