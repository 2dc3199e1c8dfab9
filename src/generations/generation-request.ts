import { createHash } from 'node:crypto';
import type { CatalogCache, CompiledModel } from '../catalog/catalog-cache.js';
import { parseImageInput } from '../catalog/image-input.js';
import { toValidationIssues } from '../catalog/request-schema.js';
import { routeRequestIssues, routesOf, type RouteRequest } from '../catalog/routes.js';
import type { GenerationWebhook } from '../db/generation-webhooks.js';
import type { ValidationIssue } from '../errors.js';
import { randomBase62 } from '../ids.js';
import { toStorableText, unstorableTextIssues } from '../storable-text.js';
import type { Storage } from '../storage/storage.js';
import { parseOptions } from '../zod-messages.js';
import { checkWebhook, type WebhookCheckRules } from './webhook-request.js';

/** Idempotency-Key: 1 to 128 printable ASCII characters, no spaces. */
const idempotencyKeyPattern = /^[\x21-\x7e]{1,128}$/;

export type IdempotencyKeyCheck = { ok: true; key: string | null } | { ok: false; issue: ValidationIssue };

export function checkIdempotencyKey(header: string | string[] | undefined): IdempotencyKeyCheck {
  if (header === undefined) return { ok: true, key: null };
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!idempotencyKeyPattern.test(value)) {
    return {
      ok: false,
      issue: {
        field: 'Idempotency-Key',
        code: 'invalid_value',
        message: 'Must be 1 to 128 printable ASCII characters without spaces.',
      },
    };
  }
  return { ok: true, key: value };
}

/**
 * The request's envelope: how the generation is to run, beside the model's input. Its fields are
 * read off the body here and nowhere else, each checked where its rules live: `provider` by the
 * model's request schema (GET /v1/models publishes it there, among the model's fields, and its
 * issues come in that order), `webhook` apart from it (its host name is resolved now, and the
 * OpenAPI document adds it beside each model's schema). Neither is part of the input; both are
 * part of the fingerprint (another webhook is another request).
 */
export interface RequestEnvelope {
  /** `webhook`: where the generation's events are posted; null: nowhere. */
  webhook: GenerationWebhook | null;
  /** `provider`: which of the model's routes may serve it; absent: the model's own routing decides. */
  routing?: RouteRequest;
}

export type RequestCheck =
  | { ok: true; model: CompiledModel; input: Record<string, unknown>; envelope: RequestEnvelope }
  | { ok: false; issues: ValidationIssue[]; model: string; mediaType: string };

/**
 * A request for a generation (its body, as any front door received it) checked against its model's
 * catalog entry and the envelope's rules: every issue, the model's first, then the webhook's. The
 * model and media type of a refused request name no text the client sent, so that it can be recorded.
 */
export async function checkRequest(
  catalog: CatalogCache,
  body: unknown,
  webhookRules: WebhookCheckRules,
): Promise<RequestCheck> {
  // `webhook` is not the model's (a strict model would refuse it): it is taken off before the
  // model's schema reads the body.
  const { webhook, ...modelBody } = isObject(body) ? body : { webhook: undefined };
  const checked = checkBody(catalog, isObject(body) ? modelBody : body);
  const hook = await checkWebhook(webhook, webhookRules);
  if (checked.ok && hook.ok) {
    // `provider` is taken off once the model's schema has read it.
    const { model: _model, provider, ...input } = checked.data;
    const routing = provider as RouteRequest | undefined;
    const envelope = { webhook: hook.webhook, ...(routing ? { routing } : {}) };
    return { ok: true, model: checked.model, input, envelope };
  }
  const issues = [...(checked.ok ? [] : checked.issues), ...(hook.ok ? [] : hook.issues)];
  if (!checked.ok) return { ...checked, issues };
  const { entry } = checked.model;
  return { ok: false, issues, model: entry.id, mediaType: entry.media_type };
}

type BodyCheck =
  | { ok: true; model: CompiledModel; data: Record<string, unknown> }
  | { ok: false; issues: ValidationIssue[]; model: string; mediaType: string };

/**
 * Validates a body (without its `webhook`) against its model's request schema: `data` is what the
 * schema accepted, `model` and `provider` included. Text that cannot be stored is refused wherever
 * it is in the body (keys and ignored fields included); the issues and the model id it gives back
 * hold none of it, so the rejection can be recorded.
 */
function checkBody(catalog: CatalogCache, body: unknown): BodyCheck {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return {
      ok: false,
      model: '',
      mediaType: 'unknown',
      issues: [{ field: '', code: 'invalid_type', message: 'The body must be a JSON object.' }],
    };
  }
  const textIssues = unstorableTextIssues(body);
  const named = new Set(textIssues.map((issue) => issue.field));
  const refuse = (issues: ValidationIssue[], model = '', mediaType = 'unknown'): BodyCheck => ({
    ok: false,
    model,
    mediaType,
    // One issue per field: the text issue, when a field has one, says the most.
    issues: [...textIssues, ...issues.filter((issue) => !named.has(issue.field))],
  });
  const modelId = (body as Record<string, unknown>).model;
  if (typeof modelId !== 'string') {
    return refuse([
      modelId === undefined
        ? { field: 'model', code: 'required', message: 'This field is required.' }
        : { field: 'model', code: 'invalid_type', message: 'Expected string.' },
    ]);
  }
  const model = catalog.get(modelId);
  if (!model) {
    return refuse(
      [
        {
          field: 'model',
          code: 'invalid_value',
          message: `Unknown model. One of: ${catalog
            .list()
            .map((m) => m.entry.id)
            .join(', ')}.`,
        },
      ],
      toStorableText(modelId.slice(0, 200)),
    );
  }
  const parsed = model.requestSchema.safeParse(body, parseOptions);
  // `provider` naming a provider the model has no route on: the request's fault, like a bad option.
  const routing = parsed.success ? (parsed.data as { provider?: RouteRequest }).provider : undefined;
  const routeIssues = routeRequestIssues(routesOf(model.entry), routing).map((issue): ValidationIssue => ({
    ...issue,
    code: 'invalid_value',
  }));
  if (!parsed.success || textIssues.length > 0 || routeIssues.length > 0) {
    return refuse(
      parsed.success ? routeIssues : toValidationIssues(parsed.error, body),
      modelId,
      model.entry.media_type,
    );
  }
  return { ok: true, model, data: parsed.data as Record<string, unknown> };
}

/**
 * The request's fingerprint: SHA-256 of its canonical JSON. Object keys are
 * sorted (their order does not matter); everything else — array order,
 * whitespace inside strings, explicit defaults, fields the model ignores,
 * inline image bytes — is part of it.
 */
export function fingerprint(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * An image a caller has already received into a file (the console's uploads, streamed to disk):
 * stored from the file like a data URI's bytes, never read into memory whole. Only code builds one;
 * no JSON body can.
 */
export class StagedImage {
  constructor(
    readonly file: string,
    readonly size: number,
    readonly mediaType: `image/${string}`,
  ) {}
}

/**
 * Stores inline (data URI) images, and staged ones, before the workflow starts, so workflow
 * payloads carry URLs, never image bytes. The folder is derived from the
 * workflow id and fingerprint when there is an Idempotency-Key, so a retry
 * rewrites the same files instead of leaving copies; otherwise it is random.
 */
export async function storeInlineImages(
  storage: Storage,
  input: Record<string, unknown>,
  folderSeed: string | null,
): Promise<{ input: Record<string, unknown>; prefix: string | null }> {
  const prefix = `i${folderSeed ? createHash('sha256').update(folderSeed).digest('hex').slice(0, 32) : randomBase62(32)}`;
  let stored = 0;
  const extensionOf = (mediaType: string) =>
    mediaType === 'image/jpeg' ? 'jpg' : mediaType.slice('image/'.length);
  const store = async (value: unknown, name: string): Promise<unknown> => {
    if (value instanceof StagedImage) {
      stored++;
      return storage.putFile(prefix, `${name}.${extensionOf(value.mediaType)}`, value.file, value.size);
    }
    if (typeof value !== 'string' || !value.startsWith('data:')) return value;
    const parsed = parseImageInput(value, true);
    if (!parsed.ok || parsed.image.kind !== 'data') return value; // validated already
    stored++;
    return storage.put(prefix, `${name}.${extensionOf(parsed.image.mediaType)}`, parsed.image.bytes);
  };
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(input)) {
    out[field] = Array.isArray(value)
      ? await Promise.all(value.map((v, i) => store(v, `${field}-${i}`)))
      : await store(value, field);
  }
  return { input: out, prefix: stored > 0 ? prefix : null };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
