import type { ProviderJobEnd } from '../vocabulary/generation.js';

/**
 * What a model provider must offer the generation workflow, whatever its wire
 * protocol: submit a job (with our idempotency token), report its status,
 * hand over each result, and, where it can, say whether it has a job for a
 * token. Errors are classified, because the workflow's charging rules depend
 * on the class: see `ProviderRejection`, `ProviderTransientError` and
 * `ProviderUncertainError`.
 */
/**
 * What a stop before run came to: `true` only when the provider's answer proves the job never ran
 * (and will not be billed); `false` when nothing was changed (the job runs, ran or ended on its
 * own); `unknown` when a cancel reached the provider but its answer does not prove the job never
 * ran (it started in between, or the provider answers the same either way), or an earlier ask's
 * answer was lost: the job's end decides.
 */
export interface StopAnswer {
  stopped: boolean | 'unknown';
}

export interface Provider {
  /** Starts a job. The token is derived from the generation: a provider that sees it twice must not run twice. */
  submit(job: ProviderJob): Promise<{ jobId: string }>;
  /**
   * Everything a submit does before a byte leaves for the provider (reading and inlining reference
   * images, building the request), then `send` makes the create itself, once. The submit activity
   * prepares before it marks the create as sent, so a slow or failed preparation never counts as a
   * create that may have reached the provider. Without it, `submit` is the send.
   */
  prepare?(job: ProviderJob): Promise<{ send: () => Promise<{ jobId: string }> }>;
  /**
   * Where the job stands. `reason`: why it is asked (a push woke the generation, a fallback read
   * while a push is expected, or a poll where none can come); the request budget lets fallback
   * reads give way first.
   */
  status(jobId: string, reason?: StatusReason): Promise<ProviderStatus>;
  /**
   * One result (`index` into the succeeded status's results, which `result` is): its bytes when
   * they are small and already in hand, or a file it was streamed into (see ResultContent).
   */
  fetchResult(jobId: string, index: number, result: ProviderResult): Promise<ResultContent>;
  /**
   * Whether the provider accepted a job with this token, for when a submit's
   * answer was lost. `unknown`: the provider cannot tell (or cannot be asked).
   */
  lookup(token: string): Promise<{ found: true; jobId: string } | { found: false } | { found: 'unknown' }>;
  /** Asks the provider to stop a job we gave up on; best effort (a finished or unknown job is fine). */
  cancel(jobId: string): Promise<void>;
  /**
   * A client's cancel: stops the job only if it is still in the provider's queue. `stopped: true`
   * only when the provider's answer proves it never ran and will not bill it; `false` when nothing
   * was changed (it runs, ran or finished). A cancel sent whose answer proves neither (the job
   * started between our read and our cancel, or the provider answers the same either way) is
   * `unknown`: the workflow waits for the job's end, which decides (see ProviderStatus's
   * `canceledWhileRunning`). `again`: an earlier ask's answer was lost (the activity's retry), so
   * the job may be stopped by it; a provider that cannot then tell answers `unknown`. Without it,
   * a job handed to this provider cannot be canceled unbilled.
   */
  stopBeforeRun?(jobId: string, asked?: { again: boolean }): Promise<StopAnswer>;
  /**
   * A cheap authenticated read that succeeds when the provider is reachable and serving, used to
   * find a provider that was down up again. Without one, a down provider is let try again after the
   * probe interval and goes down again at its next failure.
   */
  probe?(): Promise<void>;
  /**
   * A synchronous provider's submit only records the job (its call runs in `status`): the submit
   * says nothing of the provider's health.
   */
  readonly submitsLocally?: boolean;
  /**
   * The provider pushes the end of a job sent with a `webhookUrl` (fal, Replicate), or of every job
   * (the simulated provider, which signals the workflow itself: see `pushesWithoutUrl`).
   */
  readonly pushes?: boolean;
  /** The provider pushes every job's end without a URL (the simulated provider, in the worker). */
  readonly pushesWithoutUrl?: boolean;
  /**
   * How long its jobs run, when the provider itself knows (the simulated provider's delay): the
   * wait's first fallback read comes after it, unless the catalog entry says (expected_run_seconds).
   */
  readonly expectedRunMs?: number;
}

/** Why a job's status is read: see Provider.status. */
export type StatusReason = 'pushed' | 'fallback' | 'poll';

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
  /** For a catalog entry with a `provider` block: the provider's model and its input, built by the mapping. */
  target?: ProviderTarget;
  /**
   * Where the provider should push the job's end (its webhook: see provider-push.ts); absent when
   * no push can come (no PROVIDER_WEBHOOK_BASE_URL). An adapter whose provider pushes (`pushes`)
   * sends it with the create.
   */
  webhookUrl?: string;
  /** The generation the job serves and its workflow (the simulated provider pushes the job's end there). */
  generationId?: string;
  workflowId?: string;
}

/** The provider's side of a job: its model id (and Replicate version) and the input it is sent. */
export interface ProviderTarget {
  model: string;
  version?: string;
  input: Record<string, unknown>;
  /**
   * The input fields that hold reference images (mapped from `images` or an image option): the
   * only values an adapter reads as images. A prompt that happens to be a URL stays text.
   */
  referenceFields?: string[];
}

/**
 * A result as an adapter hands it over: bytes already in memory (a staged OpenAI image, a data
 * URI, a simulated render), or a temporary file a download was streamed into, which the taker
 * removes once it has copied it (`dispose`). A large video is never held in memory whole.
 */
export type ResultContent =
  | { bytes: Buffer; contentType: string }
  | { file: string; size: number; contentType: string; dispose(): Promise<void> };

export interface ProviderResult {
  /** What the provider says; persisting measures the stored bytes, which win. */
  width: number;
  height: number;
  contentType: string;
  /** Where the provider serves it, when it does (short-lived: copied at once). */
  url?: string;
  /** For videos. */
  durationSeconds?: number;
  hasAudio?: boolean;
}

/**
 * Where a job stands: running, or ended (see ProviderJobEnd). `skipped: 'budget'`: a fallback read
 * the request budget skipped (nothing was asked of the provider): taken as still running, and read
 * again later; the caller may count it.
 */
export type ProviderStatus =
  { state: 'running'; progress?: number; skipped?: 'budget' } | ProviderJobEnd<ProviderResult>;

/** The provider refused the job outright; nothing ran, so the debit is refunded. */
export class ProviderRejection extends Error {
  override readonly name: string = 'ProviderRejection';
}

/**
 * Something the customer gave us (a reference image URL, an image of ours they named) cannot be
 * used: too large, not an image, a host that does not resolve or refuses, or one that kept failing
 * through a few tries. It is the request's fault, never the provider's: a rejection (nothing ran,
 * the debit is refunded), and it never counts against the provider's health.
 */
export class CustomerInputRejection extends ProviderRejection {
  override readonly name = 'CustomerInputRejection';
  readonly code = 'reference_image_unusable';
}

/** A failure that says nothing about the job; the same call may be tried again (after `retryAfterMs`, when the provider said). */
export class ProviderTransientError extends Error {
  override readonly name: string = 'ProviderTransientError';
  /**
   * Set by the adapter when the failure of a create proves the provider did not accept the job and
   * will not bill it (the connection was never made, 429, a refusal the provider documents as not
   * accepted): a routed generation may then go to its next route (see notAccepted).
   */
  provesNotAccepted = false;
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/**
 * Our own storage failed (a disk or bucket read or write) while preparing a call: nothing was sent,
 * so the call may be tried again. It says nothing of the provider, nor of the customer's input, so
 * it never counts against the provider's health (see provider-health-tracker.ts): a bucket outage
 * must not take every provider down with it.
 */
export class OwnStorageError extends Error {
  override readonly name = 'OwnStorageError';
  readonly code = 'storage_unavailable';
}

/** Marks a create's failure as proof the provider did not accept the job (see provesNotAccepted). */
export function notAccepted<T extends ProviderTransientError>(error: T): T {
  error.provesNotAccepted = true;
  return error;
}

/** The provider is throttling us (429): nothing happened, and it is not down. */
export class ProviderThrottled extends ProviderTransientError {
  override readonly name = 'ProviderThrottled';
}

/** A result the provider no longer serves (its URL expired): copying it cannot succeed later. */
export class ProviderResultGone extends Error {
  override readonly name = 'ProviderResultGone';
}

/** A submit was sent but its answer was lost: the provider may or may not have the job. */
export class ProviderUncertainError extends Error {
  override readonly name = 'ProviderUncertainError';
  /**
   * `fromRecord`: known from our own records of an earlier call (a worker that died mid-call), not
   * from the provider failing now, so it says nothing about the provider's health.
   */
  constructor(
    message: string,
    readonly fromRecord = false,
  ) {
    super(message);
  }
}
