import type { CommonQueryMethods } from 'slonik';
import { PermanentError } from '../../vocabulary/errors.js';
import { randomBase62 } from '../../vocabulary/ids.js';
import type { Storage } from '../../storage/storage.js';
import {
  ProviderRejection,
  ProviderResultGone,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
  type ProviderJob,
  type ProviderStatus,
  type StopAnswer,
} from '../provider.js';
import { FormData } from 'undici';
import { callProvider, type DownloadPolicy, probeProvider } from '../provider-http.js';
import { type ProviderAnswer } from '../provider-answers.js';
import { takeCreateTurn } from '../request-turns.js';
import { readReferenceImage } from '../reference-images.js';
import {
  callOfToken,
  cancelCall,
  claimCall,
  completeCall,
  failCall,
  loseCall,
  purgeCalls,
  readCall,
  recordCall,
  releaseCall,
  stagedResult,
  type CallRequest,
  type CallRow,
} from './openai-calls.js';
import { answerFrom, decodeImages } from './openai-answers.js';

/**
 * OpenAI Images (GPT image models): `POST /images/generations` (JSON) and, with reference
 * images, `POST /images/edits` (multipart, each image an `image[]` file). Both are synchronous:
 * the HTTP call is the job, there is no id to look up, the answer (base64 images in
 * `data[].b64_json`) can take minutes, and a call whose answer is lost may still be billed.
 *
 * So the call never runs inside the POST: `submit` only records it (openai_image_calls, see
 * openai-calls.ts), idempotent on our token, and the provider wait's `status` makes it, once:
 * claimed atomically first, sent, and its outcome recorded. A call found claimed with no outcome
 * (its worker died mid-call) or lost (timeout, dropped connection, cut-off answer, 5xx) is never
 * sent again: `status` says uncertain and the generation goes to review. A call that provably did
 * not reach OpenAI (connection refused, 429, our key refused) goes back to pending and the wait
 * retries it. The images are staged in our database until persisting copies them, then dropped
 * after a retention.
 *
 * The catalog entry's provider block builds OpenAI's fields (`target.input`); its `image` field
 * holds the reference image URLs, which are read (ours from storage, others fetched under the
 * outbound rules) and uploaded as files.
 */
export interface OpenAiImagesOptions {
  apiKey: string;
  /** `https://api.openai.com/v1`, or anything speaking the same protocol. */
  baseUrl: string;
  /** Our storage: reference images stored by the API are read from it, not fetched. */
  storage: Storage;
  /** What reference image fetches may reach besides public HTTPS addresses. */
  download: DownloadPolicy;
  /** How long a call may take before its answer counts as lost (default 10 minutes, as OpenAI's own client waits). */
  callTimeoutMs?: number;
  /** How long staged images are kept after the call (default 24 h; keep it past the persist step's horizon). */
  stagedRetentionMs?: number;
  /** How long call records are kept (default 30 days). */
  recordRetentionMs?: number;
}

/** OpenAI's limit on reference images for the GPT image models. */
const maxReferenceImages = 16;
/** The reference image types the GPT image models take. */
const uploadTypes: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };
/** Housekeeping runs at most this often, from `status`. */
const purgeEveryMs = 60_000;

export class OpenAiImagesProvider implements Provider {
  private lastPurge = 0;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly options: OpenAiImagesOptions,
  ) {}

  /** Records the call; nothing is sent (that is `status`'s, inside the provider wait). */
  /** The call is made in `status`, inside the provider wait: submit only records it. */
  readonly submitsLocally = true;

  async submit(job: ProviderJob): Promise<{ jobId: string }> {
    if (!job.target) throw new PermanentError(`model ${job.model} has no provider block for OpenAI`);
    const { image, ...input } = job.target.input;
    const images = image === undefined ? [] : [image].flat();
    if (!images.every((url): url is string => typeof url === 'string'))
      throw new PermanentError(`model ${job.model}: OpenAI's image field must hold image URLs`);
    if (job.images.length > 0 && images.length === 0)
      throw new PermanentError(
        `model ${job.model} takes reference images but its provider block maps none to OpenAI's image field`,
      );
    if (images.length > maxReferenceImages)
      throw new ProviderRejection(`OpenAI takes at most ${maxReferenceImages} reference images`);
    const request: CallRequest = { model: job.target.model, input, images };
    const jobId = await recordCall(this.db, {
      jobId: `call_${randomBase62(24)}`,
      token: job.token,
      endpoint: images.length > 0 ? 'edits' : 'generations',
      request,
    });
    return { jobId };
  }

  /** The call's row by our token: a submit recorded it (found) or never did (not found). */
  async lookup(token: string): Promise<{ found: true; jobId: string } | { found: false }> {
    const jobId = await callOfToken(this.db, token);
    return jobId ? { found: true, jobId } : { found: false };
  }

  /**
   * Where the call stands, making it when it is pending. Succeeded, failed and canceled calls are
   * answered from the row; a call sent before whose outcome was never recorded is uncertain.
   */
  async status(jobId: string): Promise<ProviderStatus> {
    await this.purgeNowAndThen();
    const call = await readCall(this.db, jobId);
    if (!call) throw new PermanentError(`no OpenAI call ${jobId}`);
    if (call.state !== 'pending' || !call.request) return answerFrom(call);

    let body: { json: unknown } | { form: FormData };
    try {
      body = await this.requestBody(call.endpoint, call.request);
    } catch (error) {
      // A reference image that cannot be had, or is of a type OpenAI refuses: nothing was sent.
      if (!(error instanceof ProviderRejection)) throw error;
      await failCall(this.db, jobId, 'pending', error.message);
      return answerFrom((await readCall(this.db, jobId))!);
    }
    // The call's turn in the request budget before it is claimed: a wait, or a refusal (thrown,
    // nothing sent), leaves the call pending rather than sent.
    await takeCreateTurn();
    // Another attempt may have claimed it (or a give-up canceled it) since we read it.
    if (!(await claimCall(this.db, jobId))) return answerFrom((await readCall(this.db, jobId))!);
    return this.send(jobId, call.endpoint, body);
  }

  /** The staged bytes of one image; gone once the retention passed. */
  async fetchResult(jobId: string, index: number): Promise<{ bytes: Buffer; contentType: string }> {
    const staged = await stagedResult(this.db, jobId, index);
    if (!staged) throw new ProviderResultGone(`image ${index} of OpenAI call ${jobId} is no longer staged`);
    return staged;
  }

  /** The model list: an authenticated read that costs nothing (any answer but a refused key proves OpenAI up). */
  async probe(): Promise<void> {
    await probeProvider('OpenAI', `${this.options.baseUrl}/models`, {
      authorization: `Bearer ${this.options.apiKey}`,
    });
  }

  /** A call not sent yet is never sent. One already sent cannot be stopped: OpenAI has no handle on it. */
  async cancel(jobId: string): Promise<void> {
    await cancelCall(this.db, jobId);
  }

  /**
   * A client's cancel: a call still pending never ran and never will (pending → canceled in one
   * statement, which the wait's claim, pending → sent, cannot also win). Once claimed it may have
   * reached OpenAI, which bills it: not stopped. Found canceled already, it is this stop asked
   * again (its answer lost): stopped, so a retried activity agrees with the first.
   */
  async stopBeforeRun(jobId: string): Promise<StopAnswer> {
    if (await cancelCall(this.db, jobId)) return { stopped: true };
    return { stopped: (await readCall(this.db, jobId))?.state === 'canceled' };
  }

  /** Deletes staged images and call records past their retention. */
  async purgeExpired(): Promise<{ images: number; calls: number }> {
    return purgeCalls(this.db, {
      stagedMs: this.options.stagedRetentionMs ?? 24 * 3_600_000,
      recordsMs: this.options.recordRetentionMs ?? 30 * 24 * 3_600_000,
    });
  }

  /** Makes the claimed call, once, and records what came of it. */
  private async send(
    jobId: string,
    endpoint: CallRow['endpoint'],
    body: { json: unknown } | { form: FormData },
  ): Promise<ProviderStatus> {
    let answer: ProviderAnswer;
    try {
      answer = await callProvider('OpenAI', 'create', {
        method: 'POST',
        url: `${this.options.baseUrl}/images/${endpoint}`,
        headers: { authorization: `Bearer ${this.options.apiKey}` },
        ...('json' in body ? { json: body.json } : { body: body.form }),
        timeoutMs: this.options.callTimeoutMs ?? 600_000,
      });
    } catch (error) {
      if (error instanceof ProviderTransientError) {
        // Nothing reached OpenAI (or it refused to run it yet): the wait tries again later.
        await releaseCall(this.db, jobId, error.message);
        throw error;
      }
      if (error instanceof ProviderRejection) {
        await failCall(this.db, jobId, 'sent', error.message);
        return { state: 'failed', message: error.message, rejected: true };
      }
      const message =
        error instanceof ProviderUncertainError
          ? error.message
          : `OpenAI call ${jobId} failed after it was sent: ${error instanceof Error ? error.message : String(error)}`;
      await loseCall(this.db, jobId, message);
      throw new ProviderUncertainError(message);
    }
    const images = decodeImages(answer.body);
    if (!images) {
      // It answered, so it ran, and it bills for what it ran; but there is nothing we can store.
      const message = `OpenAI answered HTTP ${answer.status} without readable images: it may have billed the call`;
      await loseCall(this.db, jobId, message);
      throw new ProviderUncertainError(message);
    }
    await completeCall(this.db, jobId, images);
    return { state: 'succeeded', results: images.map(({ bytes: _, ...result }) => result) };
  }

  /** JSON for a generation; for an edit, a form with the reference images as files. */
  private async requestBody(
    endpoint: CallRow['endpoint'],
    request: CallRequest,
  ): Promise<{ json: unknown } | { form: FormData }> {
    if (endpoint === 'generations') return { json: { ...request.input, model: request.model } };
    const form = new FormData();
    form.append('model', request.model);
    for (const [name, value] of Object.entries(request.input)) {
      if (value === undefined || value === null) continue;
      // Form fields are text: numbers and booleans as written, anything structured as JSON.
      const text =
        typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
          ? String(value)
          : JSON.stringify(value);
      form.append(name, text);
    }
    for (const [index, url] of request.images.entries()) {
      const image = await readReferenceImage(url, this.options.storage, this.options.download);
      const type = image.contentType.split(';')[0]!.trim().toLowerCase();
      const extension = uploadTypes[type === 'image/jpg' ? 'image/jpeg' : type];
      if (!extension)
        throw new ProviderRejection(
          `reference image ${index + 1} is ${type}; OpenAI takes png, jpeg or webp`,
        );
      form.append('image[]', new Blob([image.bytes], { type }), `image-${index + 1}.${extension}`);
    }
    return { form };
  }

  private async purgeNowAndThen(): Promise<void> {
    if (Date.now() - this.lastPurge < purgeEveryMs) return;
    this.lastPurge = Date.now();
    // Housekeeping must never fail a generation's wait; the next round tries again.
    await this.purgeExpired().catch(() => undefined);
  }
}
