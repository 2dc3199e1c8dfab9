import { PermanentError } from '../../errors.js';
import type { Storage } from '../../storage/storage.js';
import {
  ProviderResultGone,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
  type ProviderJob,
  type ProviderResult,
  type ProviderStatus,
  type ResultContent,
  type StopAnswer,
} from '../provider.js';
import {
  callProvider,
  safeProviderMessage,
  type DownloadPolicy,
  type ProviderAnswer,
  probeProvider,
} from '../provider-http.js';
import { inlineStoredImages } from '../reference-images.js';
import { downloadResult } from '../result-download.js';

/**
 * fal's queue (https://queue.fal.run), over plain HTTP:
 *
 * - submit: `POST {queue}/{model}` with `Authorization: Key …` and the catalog-built input as the
 *   JSON body, once (fal takes no idempotency key; a resent create is a second, billed request).
 *   A job sent with a `webhookUrl` carries it as the `fal_webhook` query parameter: fal then pushes
 *   the request's end there, signed with ED25519 (fal-webhooks.ts verifies it);
 * - status: `GET {queue}/{owner}/{app}/requests/{id}/status`: `IN_QUEUE`, `IN_PROGRESS`, `COMPLETED`;
 * - result: `GET {queue}/{owner}/{app}/requests/{id}`: the model's output, or, for a request that
 *   completed with an error (fal has no FAILED status), that error;
 * - cancel: `PUT {queue}/{owner}/{app}/requests/{id}/cancel`.
 *
 * Status, result and cancel live under the model id's owner/app only (`fal-ai/flux/dev` →
 * `fal-ai/flux`), so the job id this adapter hands out carries the model id: `{model}::{request_id}`
 * (`fal-ai/flux/dev::764cabcf-…`), then the time it was enqueued (`::1767225600000`, see
 * `unknownGraceMs`; job ids recorded before it, or typed in by support, have none). Every URL is built on FAL_QUEUE_URL: the key is never sent to
 * a host named in an answer.
 *
 * Reference images of ours (inline images the API stored) go to fal as base64 data URIs, which
 * fal accepts wherever a model takes a file URL, so fal never has to reach our result host. Other
 * URLs pass through for fal to fetch.
 *
 * fal cannot be asked whether it holds a request made with a token of ours: `lookup` answers
 * `unknown`, and a create whose answer was lost goes to review.
 */
interface FalQueueOptions {
  /** FAL_KEY. Sent in the Authorization header only; never in a message. */
  key: string;
  /** FAL_QUEUE_URL, without a trailing slash. */
  queueUrl: string;
  /** Our storage: reference images on our result host are read from it and inlined. */
  storage: Storage;
  /** How result files are downloaded (OUTBOUND_ALLOW_CIDRS; plain http only for a local stand-in). */
  download: DownloadPolicy;
  /** Deadline of the create call (default 20 s). */
  createTimeoutMs?: number;
  /** Deadline of each status, result or cancel call (default 30 s). */
  readTimeoutMs?: number;
  /**
   * How long after the enqueue a 404 on status means "not visible yet" rather than "gone": fal's
   * queue can answer 404 for a request it has just accepted, which would still run (and bill).
   * Until then the job counts as running (default 2 minutes).
   */
  unknownGraceMs?: number;
}

const provider = 'fal';
/** Separates the model id from fal's request id in our job id. */
const jobIdSeparator = '::';
/** A fal model id: owner/app, then an optional subpath. */
const modelIdPattern = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)+$/;

/** A request id nobody has: what the probe asks about. */
const noRequest = '00000000-0000-0000-0000-000000000000';

export class FalQueueProvider implements Provider {
  /** fal pushes the end of a request enqueued with `fal_webhook`. */
  readonly pushes = true;

  constructor(private readonly options: FalQueueOptions) {}

  async submit(job: ProviderJob): Promise<{ jobId: string }> {
    return (await this.prepare(job)).send();
  }

  /** The reference images read and inlined: `send` then makes the one create. */
  async prepare(job: ProviderJob): Promise<{ send: () => Promise<{ jobId: string }> }> {
    const target = job.target;
    if (!target) throw new PermanentError(`model ${job.model} has no provider block: fal needs its model id`);
    if (!modelIdPattern.test(target.model))
      throw new PermanentError(`${JSON.stringify(target.model)} is not a fal model id (owner/app[/path])`);
    const input = await inlineStoredImages(target, this.options.storage, this.options.download);
    const send = async () => {
      const webhook = job.webhookUrl ? `?fal_webhook=${encodeURIComponent(job.webhookUrl)}` : '';
      const url = `${this.options.queueUrl}/${target.model}${webhook}`;
      const timeoutMs = this.options.createTimeoutMs ?? 20_000;
      // The queue's own 503 refuses the enqueue itself (no request_id is made): nothing runs or bills.
      const call = { method: 'POST', url, headers: this.auth(), json: input, timeoutMs } as const;
      const answer = await callProvider(provider, 'create', call, [], falRefusedEnqueue);
      const requestId = (answer.body as { request_id?: unknown } | undefined)?.request_id;
      // A 2xx means fal queued the request; without its id we cannot follow it, nor know it is not there.
      if (typeof requestId !== 'string' || requestId === '')
        throw new ProviderUncertainError(
          `fal accepted the request (HTTP ${answer.status}) without a request_id`,
        );
      return { jobId: [target.model, requestId, Date.now()].join(jobIdSeparator) };
    };
    return { send };
  }

  async status(jobId: string): Promise<ProviderStatus> {
    const request = this.requestUrl(jobId);
    const answer = await this.read('GET', `${request}/status`, [404]);
    if (answer.status === 404) {
      const enqueuedAt = parseJobId(jobId).enqueuedAt;
      // Just enqueued: fal may not show it yet, and it may still run. Ask again later.
      if (enqueuedAt !== undefined && Date.now() - enqueuedAt < (this.options.unknownGraceMs ?? 120_000))
        return { state: 'running' };
      return { state: 'failed', message: 'fal no longer knows this request.' };
    }
    const status = (answer.body as { status?: unknown } | undefined)?.status;
    if (status === 'IN_QUEUE' || status === 'IN_PROGRESS') return { state: 'running' };
    if (status !== 'COMPLETED')
      throw new ProviderTransientError(`fal answered an unknown request status ${JSON.stringify(status)}`);
    return this.outcome(await this.read('GET', request, errorStatuses, 'result'));
  }

  async fetchResult(_jobId: string, index: number, result: ProviderResult): Promise<ResultContent> {
    if (!result.url) throw new ProviderResultGone(`fal's result ${index} has no URL`);
    if (result.url.startsWith('data:')) return decodeDataUri(result.url, index);
    // An expired URL is ProviderResultGone: persisting gives up at once and the generation is refunded.
    return downloadResult(result.url, this.options.download);
  }

  lookup(_token: string): Promise<{ found: 'unknown' }> {
    // fal lists no requests by anything we could have sent with the create.
    return Promise.resolve({ found: 'unknown' });
  }

  /** The status of a request that does not exist: fal's answer (404) proves the queue up and our key accepted. */
  async probe(): Promise<void> {
    await probeProvider(
      'fal',
      `${this.options.queueUrl}/fal-ai/flux/requests/${noRequest}/status`,
      this.auth(),
    );
  }

  /**
   * A client's cancel: only a request still `IN_QUEUE` is cancelled; one in progress or completed
   * is left alone. fal's answer never proves the request did not run: `CANCELLATION_REQUESTED`
   * means fal removed it from its queue or, when a runner took it between our read and our cancel,
   * signalled that runner, which may stop or run it to its end (and fal bills an output). So a
   * cancel sent is `unknown`, and the request's end decides: an output is delivered and charged;
   * none (fal bills no output) is the cancel's, refunded. `ALREADY_COMPLETED`: it ended before our
   * cancel, which changed nothing. Asked again, a request `COMPLETED` or in progress may be the
   * lost ask's doing (fal shows a cancelled request `COMPLETED` too): unknown.
   */
  async stopBeforeRun(jobId: string, asked?: { again: boolean }): Promise<StopAnswer> {
    const request = this.requestUrl(jobId);
    const status = await this.read('GET', `${request}/status`, [404]);
    const state = (status.body as { status?: unknown } | undefined)?.status;
    if (state !== 'IN_QUEUE') return { stopped: asked?.again ? 'unknown' : false };
    const answer = await this.read('PUT', `${request}/cancel`, [400, 404]);
    const said = (answer.body as { status?: unknown } | undefined)?.status;
    return { stopped: said === 'ALREADY_COMPLETED' && !asked?.again ? false : 'unknown' };
  }

  async cancel(jobId: string): Promise<void> {
    // CANCELLATION_REQUESTED (202), ALREADY_COMPLETED (400) and NOT_FOUND (404) all leave nothing running.
    await this.read('PUT', `${this.requestUrl(jobId)}/cancel`, [400, 404]);
  }

  /** What a COMPLETED request's result says: its files, or the error it completed with. */
  private outcome(answer: ProviderAnswer): ProviderStatus {
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

  /** `{queue}/{owner}/{app}/requests/{id}` for one of our job ids. */
  private requestUrl(jobId: string): string {
    const { model, requestId } = parseJobId(jobId);
    const [owner, app] = model.split('/');
    return `${this.options.queueUrl}/${owner}/${app}/requests/${encodeURIComponent(requestId)}`;
  }

  /** One read; `counts`: what it is in the request budget when not the method's own (the result, read in a status). */
  private read(method: 'GET' | 'PUT', url: string, acceptStatuses: readonly number[], counts?: 'result') {
    const timeoutMs = this.options.readTimeoutMs ?? 30_000;
    return callProvider(
      provider,
      'read',
      { method, url, headers: this.auth(), timeoutMs, ...(counts ? { counts } : {}) },
      acceptStatuses,
    );
  }

  private auth(): Record<string, string> {
    return { authorization: `Key ${this.options.key}` };
  }
}

/**
 * fal's queue refusing an enqueue: a 503 in fal's own error shape (a JSON body with a `detail`, or
 * fal's X-Fal-Error-Type header). A 503 without it (a proxy's or load balancer's page, an empty
 * body) may come from something between us and fal after the create was forwarded: it proves nothing.
 */
function falRefusedEnqueue(answer: ProviderAnswer): boolean {
  if (answer.status !== 503) return false;
  if (answer.headers.has('x-fal-error-type')) return true;
  const detail = (answer.body as { detail?: unknown } | undefined)?.detail;
  return (
    typeof answer.body === 'object' &&
    answer.body !== null &&
    (typeof detail === 'string' || Array.isArray(detail))
  );
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
function parseJobId(jobId: string): { model: string; requestId: string; enqueuedAt?: number } {
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

/**
 * The statuses a completed request's result may carry as its own error, read by `outcome`. Left
 * to callProvider (transient): 401/403 (our key is refused, not the request), 408 and 429 (our
 * read timed out or is throttled).
 */
const notTheRequests = new Set([401, 403, 408, 429]);
const errorStatuses = Array.from({ length: 200 }, (_, i) => 400 + i).filter(
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
function decodeDataUri(uri: string, index: number): { bytes: Buffer; contentType: string } {
  const match = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+)(;[^,]*)?;base64,/i.exec(uri);
  if (!match) throw new ProviderResultGone(`fal's result ${index} is a data URI that is not base64`);
  return { bytes: Buffer.from(uri.slice(match[0].length), 'base64'), contentType: match[1]!.toLowerCase() };
}
