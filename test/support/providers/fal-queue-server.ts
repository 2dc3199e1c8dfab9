import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import { FileStore } from './fake-files.js';
import { FalSigning, WebhookSender } from './fake-webhooks.js';
import {
  FakeProvider,
  credential,
  faultAccepts,
  playFault,
  Script,
  sendJson,
  type Fault,
} from './fake-http.js';
import { RequestLimiter, falRequestKind, falThrottled, type RateLimits } from './fake-rate-limits.js';

/**
 * A local fal queue (https://queue.fal.run) as fal documents it:
 * - `POST /{owner}/{app}[/{subpath}]` with `Authorization: Key …` and the model's input as JSON
 *   → `{ request_id, status_url, response_url, cancel_url, queue_position }`;
 * - `GET /{owner}/{app}/requests/{id}/status[?logs=1]` → `IN_QUEUE` (with `queue_position`) or
 *   `IN_PROGRESS` (HTTP 202), `COMPLETED` (HTTP 200, with `metrics.inference_time`);
 * - `GET /{owner}/{app}/requests/{id}` → the model's output, or, for a request COMPLETED with an
 *   error, that error's status and body (`{ detail, error_type }` and `X-Fal-Error-Type`);
 * - `PUT …/requests/{id}/cancel` → 202 `CANCELLATION_REQUESTED`, 400 `ALREADY_COMPLETED`, 404 `NOT_FOUND`.
 *   IN_QUEUE, fal removes the request; IN_PROGRESS, it signals the runner, which may stop (the
 *   request COMPLETED with the cancellation's error) or run it to its end (`ignoresCancel`). Both
 *   answer `CANCELLATION_REQUESTED`.
 * A create with `?fal_webhook=URL` has the request's end POSTed there once it is COMPLETED:
 * `{ request_id, gateway_request_id, status: "OK" | "ERROR", payload, error? }`, signed with
 * ED25519 (X-Fal-Webhook-Request-Id, -User-Id, -Timestamp, -Signature) by a key whose JWKS this
 * server serves at `/.well-known/jwks.json` (FAL_JWKS_URL in `env()`).
 * Status, result and cancel live under owner/app only (never the subpath): a client must use the
 * URLs the submit returned. Result files (PNG, or MP4 for video) are served here at `/files/…`.
 */

export interface FalOutcome {
  /** Status calls answered IN_QUEUE before the runner picks the request up (default 1). */
  pollsInQueue?: number;
  /** Status calls answered IN_PROGRESS before it completes (default 1). */
  pollsInProgress?: number;
  /** Stay IN_PROGRESS until `release(requestId)`. */
  hold?: boolean;
  /** Stay IN_QUEUE until `release(requestId)`, then COMPLETED (a runner took it and finished). */
  holdInQueue?: boolean;
  /** COMPLETED this long after the create (polls then move it from IN_QUEUE to IN_PROGRESS only). */
  runMs?: number;
  /**
   * A cancel that reaches the request IN_PROGRESS is signalled to the runner, which ignores it and
   * runs the request to its end (fal leaves stopping to the model app). Default: the runner stops,
   * and the request is COMPLETED with the cancellation's error.
   */
  ignoresCancel?: boolean;
  /** COMPLETED, but the result is this error (fal reports no separate FAILED status). */
  error?: { status: number; body: unknown };
  /** Output size; default: from the input's `image_size`. */
  size?: { width: number; height: number };
  /** A video model: the result is `{ video: { url, content_type, file_name, file_size } }`. */
  video?: { width: number; height: number; durationSeconds: number };
}

export type FalStatus = 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';

export interface FalJob {
  id: string;
  app: string;
  endpoint: string;
  input: Record<string, unknown>;
  outcome: FalOutcome;
  polls: number;
  cancelled: boolean;
  released: boolean;
  /** A runner took it out of the queue before its polls say so (`pickUp`). */
  pickedUp: boolean;
  /** A cancel reached it IN_PROGRESS and its runner went on (`ignoresCancel`). */
  cancelIgnored: boolean;
  result?: { status: number; body: unknown };
  /** The `fal_webhook` the create carried. */
  webhook?: string;
  /** When `runMs` completes it (ms since the epoch). */
  endsAt?: number;
  /** Its end was pushed to its webhook. */
  pushed?: boolean;
}

/** fal's documented `image_size` presets. */
const presets: Record<string, { width: number; height: number }> = {
  square_hd: { width: 1024, height: 1024 },
  square: { width: 512, height: 512 },
  portrait_4_3: { width: 768, height: 1024 },
  portrait_16_9: { width: 576, height: 1024 },
  landscape_4_3: { width: 1024, height: 768 },
  landscape_16_9: { width: 1024, height: 576 },
};

/** The error bodies fal documents for request failures (request-errors page). */
export const falRequestError = (errorType: string, status: number, detail = errorType) => ({
  status,
  body: { detail, error_type: errorType } as unknown,
});

/** A model validation error as fal documents it (errors page): 422 with a `detail` array. */
export const falValidationError = (field: string, msg: string, type = 'value_error') => ({
  status: 422,
  body: { detail: [{ loc: ['body', field], msg, type, url: `https://docs.fal.ai/errors#${type}` }] },
});

function errorBody(status: number): unknown {
  if (status === 422) return falValidationError('prompt', 'Invalid input').body;
  return { detail: status === 429 ? 'Too many concurrent requests' : `Upstream error ${status}` };
}

export class FalQueueServer extends FakeProvider<FalOutcome> {
  readonly files: FileStore;
  /** How long unscripted requests run (`runMs`); undefined: they end by polls. */
  defaultRunMs: number | undefined;
  /** The pushes: the signing keys (`rotate()`) and the deliveries. */
  readonly signing = new FalSigning();
  readonly webhooks = new WebhookSender(this.signing.signer);
  private jobs = new Map<string, FalJob>();
  private timers = new Set<NodeJS.Timeout>();
  private results = new Map<string, Promise<{ status: number; body: unknown }>>();
  private createFaults = new Script<unknown, Fault>();
  private pollFaults: Fault[] = [];
  private cancelFaults: Array<{ fault: Fault; then?: (requestId: string) => void }> = [];
  /**
   * Run before each cancel is handled: what happened at fal between a client's status read and its
   * cancel (a runner took the request: `pickUp`), as the real queue can.
   */
  beforeCancel: ((requestId: string) => void) | undefined;
  /** Awaited once a create is read (and its fault, if any, taken), before it is answered. */
  beforeCreateAnswer: (() => Promise<void>) | undefined;
  /** Requests by kind, and a request rate limit when started with `limits` (fal publishes none: fake-rate-limits.ts). */
  readonly limiter: RequestLimiter;

  private constructor(
    readonly key: string,
    expiredStatus: 403 | 404,
    limits?: RateLimits,
  ) {
    super();
    this.files = new FileStore(() => this.origin, expiredStatus);
    this.limiter = new RequestLimiter(falRequestKind, limits, falThrottled);
  }

  static async start(
    options: { key?: string; expiredStatus?: 403 | 404; limits?: RateLimits } = {},
  ): Promise<FalQueueServer> {
    return new FalQueueServer(
      options.key ?? 'fal-test-key',
      options.expiredStatus ?? 403,
      options.limits,
    ).listen();
  }

  /** The variables an adapter reads, pointed at this server. */
  env(): Record<string, string> {
    return {
      FAL_KEY: this.key,
      FAL_QUEUE_URL: this.origin,
      FAL_JWKS_URL: `${this.origin}/.well-known/jwks.json`,
    };
  }

  override async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    await this.webhooks.close();
    await super.close();
  }

  /** The next create whose input `match`es gets this fault instead of its answer. */
  failCreate(fault: Fault, match?: (input: unknown) => boolean): void {
    this.createFaults.add(fault, match);
  }
  /** The next status or result calls (any request) get these faults, in order. */
  failPolls(...faults: Fault[]): void {
    this.pollFaults.push(...faults);
  }
  /**
   * The next cancel call gets this fault; `accepted: true` cancels first (its answer lost). `then`
   * runs once the fault is played (say, `release`: the request leaves the queue before the retry).
   */
  failCancel(fault: Fault, then?: (requestId: string) => void): void {
    this.cancelFaults.push({ fault, then });
  }
  release(requestId: string): void {
    this.job(requestId).released = true;
    this.pushIfEnded(this.job(requestId));
  }
  /** A runner takes the request out of the queue now: IN_PROGRESS from here (until `release` with `hold`). */
  pickUp(requestId: string): void {
    this.job(requestId).pickedUp = true;
  }
  /** The requests fal holds (accepted creates), oldest first. */
  accepted(): Array<Readonly<FalJob>> {
    return [...this.jobs.values()].map((job) => ({ ...job }));
  }

  private job(id: string): FalJob {
    const job = this.jobs.get(id);
    if (!job) throw new Error(`no fal request ${id}`);
    return job;
  }

  protected async handle(request: http.IncomingMessage, body: Buffer, response: http.ServerResponse) {
    const path = (request.url ?? '/').split('?')[0]!;
    if (this.limiter.refuses(request, response)) return;
    if (request.method === 'GET' && this.files.serve(path, response)) return;
    if (request.method === 'GET' && path === '/.well-known/jwks.json')
      return sendJson(response, 200, this.signing.jwks());
    const key = credential(request, 'Key');
    if (key === undefined) return sendJson(response, 401, { detail: 'Missing authorization header' });
    if (key !== this.key) return sendJson(response, 401, { detail: 'No user found for Key ID and Secret' });

    const route = /^\/([^/]+)\/([^/]+)\/requests\/([^/]+)(\/status|\/cancel)?$/.exec(path);
    if (route) {
      const [, owner, app, id, action] = route as unknown as [string, string, string, string, string?];
      const job = this.jobs.get(id);
      if (!job || job.app !== `${owner}/${app}`) {
        return request.method === 'PUT' && action === '/cancel'
          ? sendJson(response, 404, { status: 'NOT_FOUND' })
          : sendJson(response, 404, { detail: `Request ${id} not found` });
      }
      if (request.method === 'GET' && action === '/status') return this.status(job, request, response);
      if (request.method === 'GET' && action === undefined) return this.result(job, response);
      if (request.method === 'PUT' && action === '/cancel') return this.cancel(job, response);
      return sendJson(response, 405, { detail: 'Method Not Allowed' });
    }
    if (request.method === 'POST' && path.split('/').length >= 3)
      return this.create(path.slice(1), body, response, new URL(request.url ?? '/', this.origin));
    sendJson(response, 404, { detail: 'Not Found' });
  }

  private async create(endpoint: string, body: Buffer, response: http.ServerResponse, url: URL) {
    this.creates++;
    let input: unknown;
    try {
      input = JSON.parse(body.toString('utf8'));
    } catch {
      input = undefined;
    }
    const fault = this.createFaults.take(input);
    const valid =
      typeof input === 'object' &&
      input !== null &&
      typeof (input as { prompt?: unknown }).prompt === 'string';
    if (!fault && !valid) {
      const error = falValidationError('prompt', 'Field required', 'missing');
      return sendJson(response, error.status, error.body);
    }
    const job =
      valid && (!fault || faultAccepts(fault))
        ? this.accept(endpoint, input as Record<string, unknown>, url.searchParams.get('fal_webhook'))
        : undefined;
    await this.beforeCreateAnswer?.();
    if (fault) return playFault(response, fault, errorBody);
    sendJson(response, 200, { ...this.urls(job!), gateway_request_id: job!.id, queue_position: 0 });
  }

  private accept(endpoint: string, input: Record<string, unknown>, webhook: string | null): FalJob {
    const [owner, app] = endpoint.split('/');
    const outcome = this.outcomes.take(input) ?? {};
    const runMs = outcome.runMs ?? this.defaultRunMs;
    const job: FalJob = {
      id: randomUUID(),
      app: `${owner}/${app}`,
      endpoint,
      input,
      outcome,
      polls: 0,
      cancelled: false,
      released: false,
      pickedUp: false,
      cancelIgnored: false,
      ...(webhook ? { webhook } : {}),
      ...(runMs !== undefined ? { endsAt: Date.now() + runMs } : {}),
    };
    this.jobs.set(job.id, job);
    if (runMs !== undefined) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        this.pushIfEnded(job);
      }, runMs);
      this.timers.add(timer);
    }
    return job;
  }

  /** Once a request with a webhook is COMPLETED, its end is pushed, once. */
  private pushIfEnded(job: FalJob): void {
    if (!job.webhook || job.pushed || this.statusOf(job.id) !== 'COMPLETED') return;
    job.pushed = true;
    const body = this.resultOf(job).then(({ status, body }) => {
      const ok = status >= 200 && status < 300;
      return JSON.stringify({
        request_id: job.id,
        gateway_request_id: job.id,
        status: ok ? 'OK' : 'ERROR',
        ...(ok ? {} : { error: `Invalid status code: ${status}` }),
        payload: body,
      });
    });
    this.webhooks.deliver(job.webhook, job.id, body);
  }

  private urls(job: FalJob) {
    const base = `${this.origin}/${job.app}/requests/${job.id}`;
    return {
      request_id: job.id,
      response_url: base,
      status_url: `${base}/status`,
      cancel_url: `${base}/cancel`,
    };
  }

  /** The state without counting a poll. */
  statusOf(id: string): FalStatus {
    const job = this.job(id);
    const { pollsInQueue = 1, pollsInProgress = 1, hold } = job.outcome;
    if (job.cancelled) return 'COMPLETED';
    if (job.outcome.holdInQueue && !job.pickedUp) return job.released ? 'COMPLETED' : 'IN_QUEUE';
    // A timed run completes when its time is up, however often it was polled.
    const timeUp = job.endsAt !== undefined && Date.now() >= job.endsAt && !(hold && !job.released);
    if (timeUp) return 'COMPLETED';
    if (job.polls <= pollsInQueue && !job.pickedUp) return 'IN_QUEUE';
    if (hold && !job.released) return 'IN_PROGRESS';
    if (job.endsAt !== undefined) return 'IN_PROGRESS';
    if (hold || job.polls > pollsInQueue + pollsInProgress) return 'COMPLETED';
    return 'IN_PROGRESS';
  }

  private status(job: FalJob, request: http.IncomingMessage, response: http.ServerResponse) {
    const fault = this.pollFaults.shift();
    if (fault) return playFault(response, fault, errorBody);
    job.polls++;
    const status = this.statusOf(job.id);
    this.pushIfEnded(job);
    const logs = /[?&]logs=1/.test(request.url ?? '') ? [] : null;
    const body: Record<string, unknown> = { status, ...this.urls(job), logs };
    if (status === 'IN_QUEUE') body.queue_position = Math.max(0, (job.outcome.pollsInQueue ?? 1) - job.polls);
    if (status === 'COMPLETED') body.metrics = { inference_time: 0.5 };
    sendJson(response, status === 'COMPLETED' ? 200 : 202, body);
  }

  private async result(job: FalJob, response: http.ServerResponse) {
    const fault = this.pollFaults.shift();
    if (fault) return playFault(response, fault, errorBody);
    if (this.statusOf(job.id) !== 'COMPLETED')
      return sendJson(response, 400, { detail: 'Request is still in progress' });
    const { status, body } = await this.resultOf(job);
    const errorType = (body as { error_type?: unknown }).error_type;
    sendJson(response, status, body, typeof errorType === 'string' ? { 'x-fal-error-type': errorType } : {});
  }

  /** A COMPLETED request's result: its output, the error it completed with, or its cancellation's. */
  private async resultOf(job: FalJob): Promise<{ status: number; body: unknown }> {
    // One output per request, however many reads and pushes ask at once.
    let made = this.results.get(job.id);
    if (!made) {
      made = job.cancelled
        ? Promise.resolve(falRequestError('client_cancelled', 499, 'Request cancelled'))
        : job.outcome.error
          ? Promise.resolve(job.outcome.error)
          : this.output(job).then((body) => ({ status: 200, body: body }));
      this.results.set(job.id, made);
    }
    return (job.result = await made);
  }

  private async output(job: FalJob) {
    const { video } = job.outcome;
    if (video) {
      const file = await this.files.addVideo(video.width, video.height, video.durationSeconds);
      return {
        video: { url: file.url, content_type: file.contentType, file_name: file.name, file_size: file.size },
      };
    }
    const requested = job.input.image_size;
    const size =
      job.outcome.size ??
      (typeof requested === 'string'
        ? presets[requested]
        : (requested as { width: number; height: number } | undefined)) ??
      presets.landscape_4_3!;
    const count = typeof job.input.num_images === 'number' ? job.input.num_images : 1;
    const images = [];
    for (let i = 0; i < count; i++) {
      const file = await this.files.addImage(size.width, size.height);
      images.push({ url: file.url, width: file.width, height: file.height, content_type: file.contentType });
    }
    return {
      images,
      timings: { inference: 0.5 },
      seed: 42,
      has_nsfw_concepts: images.map(() => false),
      prompt: job.input.prompt,
    };
  }

  private cancel(job: FalJob, response: http.ServerResponse) {
    this.beforeCancel?.(job.id);
    const scripted = this.cancelFaults.shift();
    if (scripted) {
      if (faultAccepts(scripted.fault) && this.statusOf(job.id) !== 'COMPLETED') job.cancelled = true;
      playFault(response, scripted.fault, errorBody);
      return scripted.then?.(job.id);
    }
    const status = this.statusOf(job.id);
    if (status === 'COMPLETED') return sendJson(response, 400, { status: 'ALREADY_COMPLETED' });
    // The same answer whether fal took it out of its queue or signalled a runner that has it.
    if (status === 'IN_PROGRESS' && job.outcome.ignoresCancel) job.cancelIgnored = true;
    else job.cancelled = true;
    this.pushIfEnded(job);
    sendJson(response, 202, { status: 'CANCELLATION_REQUESTED' });
  }
}
