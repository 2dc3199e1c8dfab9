import type http from 'node:http';
import { randomBytes } from 'node:crypto';
import { drawImage, type ImageFormat } from './fake-files.js';
import { FakeProvider, credential, faultAccepts, playFault, sendJson, type Fault } from './fake-http.js';

/**
 * A local OpenAI Images API (https://api.openai.com/v1) as OpenAI documents it for GPT image models:
 * - `POST /v1/images/generations`, JSON `{ model, prompt, n, size, quality, output_format, background, … }`;
 * - `POST /v1/images/edits`, multipart: `image` (or `image[]`, one or more files), `prompt`, optional
 *   `mask`, the same output options;
 * both with `Authorization: Bearer …`, answered synchronously (the call is the job, no id) with
 * `{ created, data: [{ b64_json }], size, quality, output_format, background, usage }`.
 * Errors are `{ error: { message, type, param, code } }`: 401 without or with a wrong key, 400
 * `invalid_request_error` for invalid parameters (OpenAI answers 400, not 422), 429, 5xx.
 * Scripted per prompt: a delay, a fault (a lost answer after the request was read, a dropped
 * connection), or an answer cut off in the middle of its body.
 */

export interface OpenAiOutcome {
  /** Wait this long before answering (or playing the fault). */
  delayMs?: number;
  /** Play this instead of the answer. */
  fault?: Fault;
  /** Send 200 and half of the body, then drop the connection. */
  truncate?: boolean;
}

export const openAiError = (
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
) => ({
  error: { message, type, param, code },
});

function errorBody(status: number): unknown {
  if (status === 400 || status === 422) return openAiError('Invalid request', 'invalid_request_error');
  if (status === 429)
    return openAiError('Rate limit reached for images per minute.', 'requests', 'rate_limit_exceeded');
  if (status === 503)
    return openAiError('The engine is currently overloaded, please try again later.', 'server_error');
  return openAiError(
    'The server had an error while processing your request. Sorry about that!',
    'server_error',
  );
}

const sizes: Record<string, { width: number; height: number }> = {
  auto: { width: 1024, height: 1024 },
  '1024x1024': { width: 1024, height: 1024 },
  '1536x1024': { width: 1536, height: 1024 },
  '1024x1536': { width: 1024, height: 1536 },
};

export interface OpenAiCall {
  endpoint: 'generations' | 'edits';
  input: Record<string, unknown>;
  /** Edits: the image files received (name, type, bytes). */
  images: Array<{ name: string; type: string; size: number }>;
}

export class OpenAiImagesServer extends FakeProvider<OpenAiOutcome> {
  models = ['gpt-image-1', 'gpt-image-1-mini', 'gpt-image-1.5'];
  private billed: OpenAiCall[] = [];

  private constructor(readonly key: string) {
    super();
  }

  static async start(options: { key?: string } = {}): Promise<OpenAiImagesServer> {
    return new OpenAiImagesServer(options.key ?? 'sk-test-key').listen();
  }

  env(): Record<string, string> {
    return { OPENAI_API_KEY: this.key, OPENAI_BASE_URL: `${this.origin}/v1` };
  }
  /** Calls OpenAI ran (and would bill): answered ones, and lost answers the fault says were accepted. */
  accepted(): OpenAiCall[] {
    return [...this.billed];
  }

  protected async handle(request: http.IncomingMessage, body: Buffer, response: http.ServerResponse) {
    const path = (request.url ?? '/').split('?')[0]!;
    const key = credential(request, 'Bearer');
    if (key === undefined) {
      const message =
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
      return sendJson(response, 401, openAiError(message, 'invalid_request_error'));
    }
    if (key !== this.key) {
      return sendJson(
        response,
        401,
        openAiError('Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key'),
      );
    }
    const endpoint =
      path === '/v1/images/generations' ? 'generations' : path === '/v1/images/edits' ? 'edits' : undefined;
    if (request.method !== 'POST' || !endpoint) {
      return sendJson(
        response,
        404,
        openAiError(`Invalid URL (${request.method} ${path})`, 'invalid_request_error'),
      );
    }
    this.creates++;
    const call = await this.parse(endpoint, request, body);
    if (!call)
      return sendJson(
        response,
        400,
        openAiError('Could not parse the request body.', 'invalid_request_error'),
      );
    const outcome = this.outcomes.take(call.input) ?? {};
    if (outcome.delayMs) await new Promise((resolve) => setTimeout(resolve, outcome.delayMs));
    if (outcome.fault) {
      if (faultAccepts(outcome.fault)) this.billed.push(call);
      return playFault(response, outcome.fault, errorBody, () => ({ 'x-request-id': requestId() }));
    }
    const invalid = this.validate(call);
    if (invalid)
      return sendJson(
        response,
        400,
        openAiError(invalid.message, 'invalid_request_error', invalid.code, invalid.param),
      );
    this.billed.push(call);
    const answer = JSON.stringify(await this.answer(call.input));
    response.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(answer),
      'x-request-id': requestId(),
    });
    if (outcome.truncate) {
      response.write(answer.slice(0, answer.length / 2));
      setTimeout(() => response.socket?.destroy(), 20);
      return;
    }
    response.end(answer);
  }

  private async parse(
    endpoint: OpenAiCall['endpoint'],
    request: http.IncomingMessage,
    body: Buffer,
  ): Promise<OpenAiCall | undefined> {
    const contentType = request.headers['content-type'] ?? '';
    try {
      if (endpoint === 'generations')
        return { endpoint, input: JSON.parse(body.toString('utf8')) as Record<string, unknown>, images: [] };
      const form = await new Request('http://fake/', {
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
      }).formData();
      const input: Record<string, unknown> = {};
      const images: OpenAiCall['images'] = [];
      for (const [name, value] of form.entries()) {
        if (typeof value !== 'string') {
          if (name === 'image' || name === 'image[]')
            images.push({ name: value.name, type: value.type, size: value.size });
          else input[name] = `<file ${value.size} bytes>`;
        } else input[name] = /^(n|output_compression)$/.test(name) ? Number(value) : value;
      }
      // The request log keeps what an adapter sent, files summarised.
      const recorded = this.requests.at(-1);
      if (recorded) recorded.body = JSON.stringify({ ...input, images });
      return { endpoint, input, images };
    } catch {
      return undefined;
    }
  }

  private validate({ endpoint, input, images }: OpenAiCall) {
    if (typeof input.prompt !== 'string' || input.prompt === '') {
      return {
        message: "Missing required parameter: 'prompt'.",
        code: 'missing_required_parameter',
        param: 'prompt',
      };
    }
    const model = input.model ?? 'dall-e-2';
    if (typeof model !== 'string' || !this.models.includes(model)) {
      return {
        message: `Invalid value for 'model': '${text(model)}'.`,
        code: 'invalid_value',
        param: 'model',
      };
    }
    if (input.size !== undefined && !(text(input.size) in sizes)) {
      return {
        message: `Invalid value: '${text(input.size)}'. Supported values are: ${Object.keys(sizes).join(', ')}.`,
        code: 'invalid_value',
        param: 'size',
      };
    }
    const n = input.n ?? 1;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) {
      return { message: 'Invalid n: must be between 1 and 10.', code: 'invalid_value', param: 'n' };
    }
    if (endpoint === 'edits' && images.length === 0) {
      return {
        message: "Missing required parameter: 'image'.",
        code: 'missing_required_parameter',
        param: 'image',
      };
    }
    const format = input.output_format ?? 'png';
    if (!['png', 'jpeg', 'webp'].includes(text(format))) {
      return {
        message: `Invalid value: '${text(format)}'.`,
        code: 'invalid_value',
        param: 'output_format',
      };
    }
    return undefined;
  }

  private async answer(input: Record<string, unknown>) {
    const size = text(input.size ?? 'auto');
    const { width, height } = sizes[size]!;
    const format = text(input.output_format ?? 'png') as ImageFormat;
    const data = [];
    for (let i = 0; i < Number(input.n ?? 1); i++)
      data.push({ b64_json: (await drawImage(width, height, format)).toString('base64') });
    return {
      created: Math.floor(Date.now() / 1000),
      background: input.background === 'transparent' ? 'transparent' : 'opaque',
      data,
      output_format: format,
      quality: input.quality === undefined || input.quality === 'auto' ? 'medium' : input.quality,
      size: `${width}x${height}`,
      usage: {
        total_tokens: 300,
        input_tokens: 20,
        output_tokens: 280,
        input_tokens_details: { text_tokens: 20, image_tokens: 0 },
      },
    };
  }
}

/** A parameter as text, whatever JSON type the client sent. */
const text = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

const requestId = () => `req_${randomBytes(16).toString('hex')}`;
