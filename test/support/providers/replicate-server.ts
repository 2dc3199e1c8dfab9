import type http from 'node:http';
import { randomBytes } from 'node:crypto';
import { FileStore } from './fake-files.js';
import { ReplicateSigning, WebhookSender } from './fake-webhooks.js';
import {
  FakeProvider,
  credential,
  faultAccepts,
  playFault,
  Script,
  sendJson,
  type Fault,
} from './fake-http.js';
import {
  RequestLimiter,
  replicateRequestKind,
  replicateThrottled,
  type RateLimits,
} from './fake-rate-limits.js';

/**
 * A local Replicate HTTP API (https://api.replicate.com/v1) as Replicate documents it:
 * - `POST /v1/models/{owner}/{name}/predictions` `{ input }`, or `POST /v1/predictions`
 *   `{ version, input }`, with `Authorization: Bearer …`; 201 and the prediction. `Prefer: wait`
 *   answers with the finished prediction (unless it is held); `Cancel-After` is only recorded.
 * - `GET /v1/predictions/{id}`: `starting` → `processing` → `succeeded` | `failed` | `canceled` |
 *   `aborted`, with `output` (an array of file URLs, or one URL), `error`, `logs`, `metrics`, `urls`.
 * - `POST /v1/predictions/{id}/cancel`: 200 and the prediction, `canceled` unless already done.
 * - `GET /v1/predictions[?cursor=…]`: newest first, `{ next, previous, results }`.
 * - `GET /v1/account`: the account the token belongs to (`{ type, username, name }`).
 * - `GET /v1/webhooks/default/secret`: the account's webhook signing secret (`{ key: "whsec_…" }`).
 * A create with `webhook` (and `webhook_events_filter`, default every event) has the prediction
 * POSTed there, Standard Webhooks signed with that secret: at create for `start`, once it ends for
 * `completed` (`webhooks` steers and records the deliveries).
 * Errors are problem details (`{ title, detail, status }`); invalid input is 422.
 * Output files are PNGs this server serves at `/files/…`, gone (404) once expired.
 */

export type ReplicateStatus = 'starting' | 'processing' | 'succeeded' | 'failed' | 'canceled' | 'aborted';

export interface ReplicateOutcome {
  /** GETs answered `starting` (default 1), then `processing` (default 1). */
  pollsStarting?: number;
  pollsProcessing?: number;
  /** Stay `processing` until `release(id)`. */
  hold?: boolean;
  /** Ends this long after the create (polls then move it from `starting` to `processing` only). */
  runMs?: number;
  /** How it ends (default `succeeded`); `error` is the message of a failed one. */
  final?: 'succeeded' | 'failed' | 'canceled' | 'aborted';
  error?: string;
  /** Output size; default from the input's width/height or aspect_ratio. */
  size?: { width: number; height: number };
  /** Output one URL instead of an array of URLs (models differ). */
  outputAsString?: boolean;
  /** A video model: the output is the URL of an MP4 of this size and duration. */
  video?: { width: number; height: number; durationSeconds: number };
}

interface Prediction {
  id: string;
  model: string;
  version: string;
  input: Record<string, unknown>;
  outcome: ReplicateOutcome;
  polls: number;
  waited: boolean;
  released: boolean;
  canceled: boolean;
  /** Canceled while `starting`: it never ran. */
  neverStarted?: boolean;
  /** Picked up by a worker before its polls say so (`startNow`). */
  startedEarly?: boolean;
  createdAt: string;
  output?: string | string[] | null;
  /** What the create carried: `webhook` and `webhook_events_filter`. */
  webhook?: string;
  webhookEvents?: string[];
  /** When `runMs` ends it (ms since the epoch). */
  endsAt?: number;
  /** Its end was pushed to its webhook. */
  pushed?: boolean;
}

const problem = (status: number, title: string, detail = title) => ({ title, detail, status });

function errorBody(status: number): unknown {
  if (status === 422) return problem(422, 'Input validation failed', '- input.prompt: Invalid');
  if (status === 429)
    return problem(429, 'Request was throttled.', 'Request was throttled. Expected available in 1 second.');
  return problem(status, 'Internal Server Error', `Upstream error ${status}`);
}

export class ReplicateServer extends FakeProvider<ReplicateOutcome> {
  readonly files: FileStore;
  /** Page size of GET /v1/predictions. */
  pageSize = 100;
  /** Requests by kind, and Replicate's rate limits when started with `limits` (fake-rate-limits.ts). */
  readonly limiter: RequestLimiter;
  /** Awaited before each create is handled (a test's fault at that moment: a database restart, say). */
  beforeCreate: ((input: unknown) => Promise<void>) | undefined;
  /**
   * Run before each cancel is handled: what happened at Replicate between a client's read and its
   * cancel (a worker picked the prediction up: `startNow`), as the real service can.
   */
  beforeCancel: ((id: string) => void) | undefined;
  /** How long unscripted predictions run (`runMs`); undefined: they end by polls. */
  defaultRunMs: number | undefined;
  /** The pushes: the signing secret (`rotate()` makes a new one) and the deliveries. */
  readonly signing = new ReplicateSigning();
  readonly webhooks = new WebhookSender(this.signing.signer);
  private predictions = new Map<string, Prediction>();
  private timers = new Set<NodeJS.Timeout>();
  private outputs = new Map<string, Promise<string | string[]>>();
  private createFaults = new Script<unknown, Fault>();
  private pollFaults: Fault[] = [];

  private constructor(
    readonly token: string,
    limits?: RateLimits,
  ) {
    super();
    this.files = new FileStore(() => this.origin, 404);
    this.limiter = new RequestLimiter(replicateRequestKind, limits, replicateThrottled);
  }

  static async start(options: { token?: string; limits?: RateLimits } = {}): Promise<ReplicateServer> {
    return new ReplicateServer(options.token ?? 'r8_test_token', options.limits).listen();
  }

  env(): Record<string, string> {
    return { REPLICATE_API_TOKEN: this.token, REPLICATE_API_URL: `${this.origin}/v1` };
  }
  failCreate(fault: Fault, match?: (input: unknown) => boolean): void {
    this.createFaults.add(fault, match);
  }
  /** The next GET /v1/predictions/{id} calls get these faults, in order. */
  failPolls(...faults: Fault[]): void {
    this.pollFaults.push(...faults);
  }
  release(id: string): void {
    this.find(id).released = true;
    this.pushIfEnded(this.find(id));
  }
  /** A worker picks a `starting` prediction up now: `processing` from here (it has started_at). */
  startNow(id: string): void {
    this.find(id).startedEarly = true;
  }
  /** The predictions Replicate holds (accepted creates), oldest first. */
  accepted(): Array<{
    id: string;
    model: string;
    input: Record<string, unknown>;
    canceled: boolean;
    webhook?: string;
    webhookEvents?: string[];
    /** When `runMs` ends it (ms since the epoch). */
    endsAt?: number;
  }> {
    return [...this.predictions.values()].map(
      ({ id, model, input, canceled, webhook, webhookEvents, endsAt }) => ({
        id,
        model,
        input,
        canceled,
        ...(webhook ? { webhook } : {}),
        ...(webhookEvents ? { webhookEvents } : {}),
        ...(endsAt !== undefined ? { endsAt } : {}),
      }),
    );
  }

  override async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    await this.webhooks.close();
    await super.close();
  }

  private find(id: string): Prediction {
    const prediction = this.predictions.get(id);
    if (!prediction) throw new Error(`no prediction ${id}`);
    return prediction;
  }

  /** The status without counting a poll. */
  statusOf(id: string): ReplicateStatus {
    const p = this.find(id);
    const { pollsStarting = 1, pollsProcessing = 1, hold, final = 'succeeded' } = p.outcome;
    if (p.canceled) return 'canceled';
    const starting = p.polls <= pollsStarting && !p.startedEarly;
    if (hold) return p.released ? final : starting && !p.waited ? 'starting' : 'processing';
    if (p.endsAt !== undefined) return Date.now() >= p.endsAt ? final : starting ? 'starting' : 'processing';
    if (p.waited || p.polls > pollsStarting + pollsProcessing) return final;
    return starting ? 'starting' : 'processing';
  }

  protected async handle(request: http.IncomingMessage, body: Buffer, response: http.ServerResponse) {
    const [path, query = ''] = (request.url ?? '/').split('?') as [string, string?];
    if (this.limiter.refuses(request, response)) return;
    if (request.method === 'GET' && this.files.serve(path, response)) return;
    const token = credential(request, 'Bearer') ?? credential(request, 'Token');
    if (token !== this.token) {
      return sendJson(
        response,
        401,
        problem(401, 'Unauthenticated', 'You did not pass a valid authentication token'),
      );
    }
    const model = /^\/v1\/models\/([^/]+)\/([^/]+)\/predictions$/.exec(path);
    if (request.method === 'POST' && model)
      return this.create(`${model[1]}/${model[2]}`, request, body, response);
    if (request.method === 'POST' && path === '/v1/predictions')
      return this.create(undefined, request, body, response);
    if (request.method === 'GET' && path === '/v1/predictions')
      return this.list(new URLSearchParams(query), response);
    if (request.method === 'GET' && path === '/v1/webhooks/default/secret')
      return sendJson(response, 200, { key: this.signing.secret });
    if (request.method === 'GET' && path === '/v1/account')
      return sendJson(response, 200, { type: 'organization', username: 'acme', name: 'Acme Corp, Inc.' });
    const one = /^\/v1\/predictions\/([^/]+)(\/cancel)?$/.exec(path);
    const prediction = one ? this.predictions.get(one[1]!) : undefined;
    if (!one || !prediction) return sendJson(response, 404, problem(404, 'Not found', 'Not found.'));
    if (request.method === 'GET' && !one[2]) {
      const fault = this.pollFaults.shift();
      if (fault) return playFault(response, fault, errorBody);
      prediction.polls++;
      this.pushIfEnded(prediction);
      return sendJson(response, 200, await this.view(prediction));
    }
    if (request.method === 'POST' && one[2]) {
      this.beforeCancel?.(prediction.id);
      const status = this.statusOf(prediction.id);
      if (!['succeeded', 'failed', 'canceled', 'aborted'].includes(status)) {
        // Canceled before it started: it never runs, and keeps no started_at.
        prediction.neverStarted = status === 'starting';
        prediction.canceled = true;
      }
      this.pushIfEnded(prediction);
      return sendJson(response, 200, await this.view(prediction));
    }
    sendJson(response, 405, problem(405, 'Method Not Allowed'));
  }

  private async create(
    model: string | undefined,
    request: http.IncomingMessage,
    raw: Buffer,
    response: http.ServerResponse,
  ) {
    this.creates++;
    let body:
      { input?: unknown; version?: unknown; webhook?: unknown; webhook_events_filter?: unknown } | undefined;
    try {
      body = JSON.parse(raw.toString('utf8')) as typeof body;
    } catch {
      body = undefined;
    }
    const input = body?.input;
    await this.beforeCreate?.(input);
    const fault = this.createFaults.take(input);
    const invalid = this.invalidField(model, body);
    if (!fault && invalid) {
      return sendJson(response, 422, {
        ...problem(422, 'Input validation failed', `- ${invalid}: Required`),
        invalid_fields: [{ type: 'required', field: invalid, description: `${invalid} is required` }],
      });
    }
    const accepted = !invalid && (!fault || faultAccepts(fault));
    const prediction = accepted ? this.accept(model, body!) : undefined;
    if (fault) return playFault(response, fault, errorBody);
    if (/\bwait\b/.test(String(request.headers.prefer ?? ''))) prediction!.waited = true;
    // Without a filter Replicate sends every event; `start` is the create's.
    if (prediction!.webhook && (prediction!.webhookEvents?.includes('start') ?? true)) this.push(prediction!);
    this.pushIfEnded(prediction!);
    sendJson(response, 201, await this.view(prediction!));
  }

  private invalidField(model: string | undefined, body: { input?: unknown; version?: unknown } | undefined) {
    if (model === undefined && typeof body?.version !== 'string') return 'version';
    if (typeof body?.input !== 'object' || body.input === null) return 'input';
    if (typeof (body.input as { prompt?: unknown }).prompt !== 'string') return 'input.prompt';
    return undefined;
  }

  private accept(
    model: string | undefined,
    body: { input?: unknown; version?: unknown; webhook?: unknown; webhook_events_filter?: unknown },
  ): Prediction {
    const version = typeof body.version === 'string' ? body.version : 'hidden';
    const input = body.input as Record<string, unknown>;
    const outcome = this.outcomes.take(input) ?? {};
    const runMs = outcome.runMs ?? this.defaultRunMs;
    const events = body.webhook_events_filter;
    const prediction: Prediction = {
      id: randomBytes(13).toString('hex').slice(0, 26),
      model: model ?? (version.includes(':') ? version.split(':')[0]! : 'owner/unknown'),
      version: version.includes(':') ? version.split(':')[1]! : version,
      input,
      outcome,
      polls: 0,
      waited: false,
      released: false,
      canceled: false,
      createdAt: new Date().toISOString(),
      ...(typeof body.webhook === 'string' ? { webhook: body.webhook } : {}),
      ...(Array.isArray(events) ? { webhookEvents: events.map(String) } : {}),
      ...(runMs !== undefined ? { endsAt: Date.now() + runMs } : {}),
    };
    this.predictions.set(prediction.id, prediction);
    if (runMs !== undefined) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        this.pushIfEnded(prediction);
      }, runMs);
      this.timers.add(timer);
    }
    return prediction;
  }

  /** Once a prediction with a webhook has ended, its `completed` event is pushed, once. */
  private pushIfEnded(p: Prediction): void {
    if (!p.webhook || p.pushed || ['starting', 'processing'].includes(this.statusOf(p.id))) return;
    if (p.webhookEvents && !p.webhookEvents.includes('completed')) return;
    p.pushed = true;
    this.push(p);
  }

  /** POSTs the prediction as it now stands to its webhook. */
  private push(p: Prediction): void {
    this.webhooks.deliver(
      p.webhook!,
      p.id,
      this.view(p).then((view) => JSON.stringify(view)),
    );
  }

  private async view(p: Prediction) {
    const status = this.statusOf(p.id);
    const done = !['starting', 'processing'].includes(status);
    if (status === 'succeeded' && p.output === undefined) {
      // One output per prediction, however many reads and pushes ask at once.
      if (!this.outputs.has(p.id)) this.outputs.set(p.id, this.output(p));
      p.output = await this.outputs.get(p.id)!;
    }
    const url = `${this.origin}/v1/predictions/${p.id}`;
    return {
      id: p.id,
      model: p.model,
      version: p.version,
      input: p.input,
      logs: status === 'starting' ? '' : 'Generating image...\n',
      output: status === 'succeeded' ? p.output : null,
      data_removed: false,
      error: status === 'failed' ? (p.outcome.error ?? 'Prediction failed') : null,
      source: 'api',
      status,
      created_at: p.createdAt,
      // `aborted`: terminated before it started (Replicate's prediction lifecycle), so no started_at.
      started_at: status === 'starting' || status === 'aborted' || p.neverStarted ? null : p.createdAt,
      completed_at: done ? new Date().toISOString() : null,
      urls: { get: url, cancel: `${url}/cancel`, web: `https://replicate.com/p/${p.id}` },
      ...(done ? { metrics: { predict_time: 1.5 } } : {}),
    };
  }

  private async output(p: Prediction): Promise<string | string[]> {
    const { video } = p.outcome;
    if (video) return (await this.files.addVideo(video.width, video.height, video.durationSeconds)).url;
    const { width, height, aspect_ratio: ratio, num_outputs: count } = p.input;
    let size = p.outcome.size;
    if (!size && typeof width === 'number' && typeof height === 'number') size = { width, height };
    if (!size && typeof ratio === 'string' && /^\d+:\d+$/.test(ratio)) {
      const [a, b] = ratio.split(':').map(Number) as [number, number];
      size =
        a >= b
          ? { width: 1024, height: Math.round((1024 * b) / a) }
          : { width: Math.round((1024 * a) / b), height: 1024 };
    }
    size ??= { width: 1024, height: 1024 };
    const urls = [];
    for (let i = 0; i < (typeof count === 'number' ? count : 1); i++) {
      urls.push((await this.files.addImage(size.width, size.height)).url);
    }
    return p.outcome.outputAsString ? urls[0]! : urls;
  }

  private async list(query: URLSearchParams, response: http.ServerResponse) {
    const all = [...this.predictions.values()].reverse();
    const start = Number(query.get('cursor') ?? 0) || 0;
    const page = all.slice(start, start + this.pageSize);
    const link = (at: number) => `${this.origin}/v1/predictions?cursor=${at}`;
    const results = [];
    for (const p of page) results.push(await this.view(p));
    sendJson(response, 200, {
      next: start + this.pageSize < all.length ? link(start + this.pageSize) : null,
      previous: start > 0 ? link(Math.max(0, start - this.pageSize)) : null,
      results,
    });
  }
}
