import type { Storage } from '../../storage/storage.js';
import {
  callProvider,
  safeProviderMessage,
  type DownloadPolicy,
  type ProviderAnswer,
} from '../provider-http.js';
import { inlineStoredImages } from '../reference-images.js';
import { downloadResult } from '../result-download.js';
import {
  ProviderRejection,
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
  duration,
  modelPath,
  neverStarted,
  resultAt,
  started,
  versionOf,
  type Prediction,
} from './predictions.js';

/**
 * Replicate's HTTP API (https://replicate.com/docs/reference/http), in plain HTTP:
 *
 * - submit: `POST {api}/models/{owner}/{name}/predictions` `{ input }` (the model's latest), or
 *   `POST {api}/predictions` `{ version: "owner/name:id", input }` when the catalog pins a version.
 *   One request, never resent: Replicate takes no idempotency key, so a second create would run
 *   (and bill) a second prediction. No `Prefer: wait`: the first submit runs while the client's
 *   POST waits (a few seconds), and a create held open until the model finishes would outlast that
 *   and turn an accepted job into an uncertain one. `Cancel-After` is sent as a deadline behind our
 *   own give-up (see `cancelAfterMs`). A job sent with a `webhookUrl` carries it as `webhook`, with
 *   `webhook_events_filter: ["completed"]`: Replicate then pushes the finished prediction there,
 *   signed per Standard Webhooks with the account's secret (replicate-webhooks.ts verifies it).
 * - status: `GET {api}/predictions/{id}`: `starting`/`processing` run; `succeeded` has `output`
 *   (one file URL or a list of them); `failed`, `canceled` and `aborted` end it.
 * - results: the output URLs, short-lived (an hour), downloaded under the outbound rules; one that
 *   has expired is gone for good (ProviderResultGone: the generation is refunded).
 * - cancel: `POST {api}/predictions/{id}/cancel`.
 * - lookup: Replicate cannot be asked for a prediction by a token of ours (see `lookup`).
 * - probe (is a provider that was down up again?): `GET {api}/account`.
 *
 * The job id is Replicate's prediction id as it is.
 */
export interface ReplicateProviderOptions {
  /** REPLICATE_API_URL, without a trailing slash (https://api.replicate.com/v1). */
  apiUrl: string;
  /** REPLICATE_API_TOKEN; sent as `Authorization: Bearer …` to the API only, never to a result URL. */
  token: string;
  /** Our storage: reference images we stored are read from it (and sent as data URIs when small). */
  storage: Storage;
  /** What result downloads may reach. */
  download: DownloadPolicy;
  /**
   * The deadline sent as `Cancel-After` (from creation): Replicate cancels the prediction itself if
   * it is still running then, should our own cancel never arrive. Undefined: none is sent.
   */
  cancelAfterMs?: number;
  /** Deadline of the create call (default 20 s); a create left unanswered is uncertain. */
  createTimeoutMs?: number;
  /** Deadline of a status or cancel call (default 15 s). */
  readTimeoutMs?: number;
}

/** Replicate's documented guidance: data URLs for files up to 256 KB, HTTP URLs above. */
export const maxDataUriBytes = 256 * 1024;

export class ReplicateProvider implements Provider {
  /** Replicate pushes the end of a prediction created with a `webhook`. */
  readonly pushes = true;
  private readonly apiUrl: string;
  private readonly options: Omit<ReplicateProviderOptions, 'token'>;
  /** Private to the instance: never enumerated, serialized or logged with it. */
  readonly #token: string;

  constructor({ token, ...options }: ReplicateProviderOptions) {
    this.apiUrl = options.apiUrl.replace(/\/+$/, '');
    this.options = options;
    this.#token = token;
  }

  async submit(job: ProviderJob): Promise<{ jobId: string }> {
    return (await this.prepare(job)).send();
  }

  /** The reference images read and inlined, the create built: `send` then makes the one create. */
  async prepare(job: ProviderJob): Promise<{ send: () => Promise<{ jobId: string }> }> {
    const target = job.target;
    if (!target)
      throw new ProviderRejection(`model ${job.model} has no Replicate model in its catalog entry`);
    // Ours go as data URIs when small (Replicate's guidance), else as our URL, which Replicate
    // fetches itself (so RESULT_BASE_URL must then be public HTTPS).
    const input = await inlineStoredImages(
      target,
      this.options.storage,
      this.options.download,
      maxDataUriBytes,
    );
    const byVersion = target.version !== undefined;
    const url = byVersion
      ? `${this.apiUrl}/predictions`
      : `${this.apiUrl}/models/${modelPath(target.model)}/predictions`;
    const headers: Record<string, string> = { ...this.auth() };
    if (this.options.cancelAfterMs !== undefined)
      headers['cancel-after'] = duration(this.options.cancelAfterMs);
    const json = {
      ...(byVersion ? { version: versionOf(target.model, target.version!) } : {}),
      input,
      // Only the end: a start or log event would wake the generation for nothing.
      ...(job.webhookUrl ? { webhook: job.webhookUrl, webhook_events_filter: ['completed'] } : {}),
    };
    const send = async () => {
      const answer = await this.call('create', {
        method: 'POST',
        url,
        headers,
        json,
        timeoutMs: this.options.createTimeoutMs ?? 20_000,
      });
      const id = (answer.body as Prediction | undefined)?.id;
      if (typeof id !== 'string' || !id)
        // It answered 2xx, so it most likely has the prediction, but we cannot tell which.
        throw new ProviderUncertainError(
          `replicate answered HTTP ${answer.status} to the create without a prediction id`,
        );
      return { jobId: id };
    };
    return { send };
  }

  async status(jobId: string): Promise<ProviderStatus> {
    const answer = await this.call('read', {
      method: 'GET',
      url: `${this.apiUrl}/predictions/${encodeURIComponent(jobId)}`,
      headers: this.auth(),
      timeoutMs: this.options.readTimeoutMs ?? 15_000,
    });
    const prediction = (answer.body ?? {}) as Prediction;
    switch (prediction.status) {
      case 'starting':
      case 'processing':
        return { state: 'running' };
      case 'succeeded':
        return this.succeeded(prediction);
      case 'failed': {
        const said = typeof prediction.error === 'string' ? this.safe(prediction.error) : '';
        return {
          state: 'failed',
          message: said ? `The model failed: ${said}` : 'The model failed to generate an output.',
        };
      }
      case 'canceled':
        // Started before the cancel: Replicate bills the time it ran.
        return {
          state: 'failed',
          message: 'The prediction was canceled at the provider.',
          ...(started(prediction) ? { canceledWhileRunning: true } : {}),
        };
      case 'aborted':
        // Replicate's `aborted`: terminated before it started (no started_at), so nothing ran or bills.
        return {
          state: 'failed',
          message: 'The prediction was aborted at the provider before it started.',
          ...(started(prediction) ? {} : { neverStarted: true }),
        };
      default:
        // Not a status Replicate documents: say so and ask again later (until the wait's horizon).
        throw new ProviderTransientError(
          `replicate answered an unknown prediction status (${this.safe(String(prediction.status))})`,
        );
    }
  }

  async fetchResult(jobId: string, index: number, result: ProviderResult): Promise<ResultContent> {
    if (!result.url) throw new ProviderResultGone(`result ${index} of prediction ${jobId} has no URL`);
    // Output files are public, short-lived URLs: our token is never sent to them.
    return downloadResult(result.url, this.options.download);
  }

  /**
   * Replicate cannot be asked for a prediction by a token of ours. A create takes `input` (the
   * model's own fields), `version`, `webhook` and `webhook_events_filter`, and nothing else: there
   * is no metadata or tag field. A marker in `input` would change what the model is given, and the
   * `webhook` URL is sent only when pushes are on (PROVIDER_WEBHOOK_BASE_URL). Matching the recent predictions list
   * (`GET /predictions`) by input cannot tell two identical requests apart (all our customers share
   * one Replicate account), so a match could attach another generation's prediction. Hence
   * `unknown`: the generation goes to review and support resolves it from Replicate's dashboard.
   */
  lookup(_token: string): Promise<{ found: 'unknown' }> {
    return Promise.resolve({ found: 'unknown' });
  }

  /**
   * A client's cancel: only a prediction still `starting` is cancelled. Stopped only when Replicate
   * answers it `canceled` or `aborted` without having started it (no `started_at`): then it never
   * ran and is not billed. Found so already, it is this stop asked again (its answer lost): stopped.
   * A worker may pick the prediction up between our read and our cancel: Replicate then cancels it
   * running (`canceled` with `started_at`) and bills the seconds it ran, so any answer to a cancel
   * we sent but `succeeded` or `failed` (it ended on its own first) is `unknown`, and the
   * prediction's end decides. Asked again, a prediction `canceled` after it started may be the lost
   * ask's doing: unknown too. Anything else is left as it is.
   */
  async stopBeforeRun(jobId: string, asked?: { again: boolean }): Promise<StopAnswer> {
    const url = `${this.apiUrl}/predictions/${encodeURIComponent(jobId)}`;
    const timeoutMs = this.options.readTimeoutMs ?? 15_000;
    const now = await this.call('read', { method: 'GET', url, headers: this.auth(), timeoutMs });
    const found = (now.body ?? {}) as Prediction;
    if (neverStarted(found)) return { stopped: true };
    if (asked?.again && found.status === 'canceled') return { stopped: 'unknown' };
    if (found.status !== 'starting') return { stopped: false };
    const answer = await this.call(
      'read',
      { method: 'POST', url: `${url}/cancel`, headers: this.auth(), timeoutMs },
      [404],
    );
    const after = (answer.body ?? {}) as Prediction;
    if (neverStarted(after)) return { stopped: true };
    if (after.status === 'succeeded' || after.status === 'failed') return { stopped: false };
    return { stopped: 'unknown' };
  }

  async cancel(jobId: string): Promise<void> {
    // A prediction that has already ended answers 200 as it is; one Replicate does not know, 404: both fine.
    await this.call(
      'read',
      {
        method: 'POST',
        url: `${this.apiUrl}/predictions/${encodeURIComponent(jobId)}/cancel`,
        headers: this.auth(),
        timeoutMs: this.options.readTimeoutMs ?? 15_000,
      },
      [404],
    );
  }

  /** Whether Replicate is up and takes our token: `GET /account`, its cheapest authenticated read. */
  async probe(): Promise<void> {
    await this.call('read', {
      method: 'GET',
      url: `${this.apiUrl}/account`,
      headers: this.auth(),
      timeoutMs: this.options.readTimeoutMs ?? 15_000,
    });
  }

  /** A succeeded prediction's output files: one URL, or a list of URLs. */
  private succeeded(prediction: Prediction): ProviderStatus {
    const output = prediction.output;
    const urls = (Array.isArray(output) ? output : [output]).filter(
      (item): item is string => typeof item === 'string' && /^https?:\/\//i.test(item),
    );
    if (urls.length > 0 && urls.length === (Array.isArray(output) ? output.length : 1))
      return { state: 'succeeded', results: urls.map(resultAt) };
    if (output === null || output === undefined || prediction.data_removed === true)
      return {
        state: 'failed',
        message: 'The provider finished, but its output was removed before it could be copied.',
      };
    return { state: 'failed', message: 'The provider finished with an output that is not a file.' };
  }

  private auth(): Record<string, string> {
    return { authorization: `Bearer ${this.#token}` };
  }

  /** One call (never retried), its errors without our token should a provider ever echo it. */
  private async call(
    kind: 'create' | 'read',
    call: Parameters<typeof callProvider>[2],
    acceptStatuses: readonly number[] = [],
  ): Promise<ProviderAnswer> {
    try {
      return await callProvider('replicate', kind, call, acceptStatuses);
    } catch (error) {
      if (error instanceof Error && error.message.includes(this.#token))
        error.message = error.message.split(this.#token).join('[redacted]');
      throw error;
    }
  }

  /** A provider's text as we may keep and show it, never holding our token. */
  private safe(text: string): string {
    return safeProviderMessage(text.split(this.#token).join('[redacted]'));
  }
}
