import type { CatalogCache, CompiledModel } from '../catalog/catalog-cache.js';
import { toValidationIssues } from '../catalog/request-schema.js';
import type { RouteRequest } from '../catalog/routes.js';
import type { GenerationWebhook } from '../db/generation-webhooks.js';
import type { ValidationIssue } from '../errors.js';
import { toStorableText, unstorableTextIssues } from '../storable-text.js';
import type { PlannedRoute } from '../workflows/generation-types.js';
import { parseOptions } from '../zod-messages.js';
import { idempotencyKeyMessage, idempotencyKeyPattern } from './idempotency-key.js';
import { quoteOf } from './quote.js';
import { checkRoutes, type ProviderKnowledge } from './route-plan.js';
import { checkWebhook, type WebhookCheckRules } from './webhook-request.js';

export { fingerprint } from './fingerprint.js';

/**
 * The keys a batch's lines are admitted with (`<batch id>:<line>`, see batchLineKey): reserved, so
 * that no request of a client's can take a line's key, and with it the line (issue 45 §5).
 */
const batchLineKeyPattern = /^batch_[A-Za-z0-9]+:\d+$/;

export type IdempotencyKeyCheck = { ok: true; key: string | null } | { ok: false; issue: ValidationIssue };

/** The Idempotency-Key header as sent; `batchLine`: the request is a batch's line (its key is its own). */
export function checkIdempotencyKey(
  header: string | string[] | undefined,
  { batchLine = false }: { batchLine?: boolean } = {},
): IdempotencyKeyCheck {
  if (header === undefined) return { ok: true, key: null };
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!idempotencyKeyPattern.test(value)) {
    return {
      ok: false,
      issue: {
        field: 'Idempotency-Key',
        code: 'invalid_value',
        message: idempotencyKeyMessage,
      },
    };
  }
  if (!batchLine && batchLineKeyPattern.test(value))
    return {
      ok: false,
      issue: {
        field: 'Idempotency-Key',
        code: 'reserved',
        message: 'Keys of the form batch_<id>:<line> are reserved for the lines of batches; use another key.',
      },
    };
  return { ok: true, key: value };
}

/**
 * The request's envelope: how the generation is to run, beside the model's input. Its fields are
 * read off the body here and nowhere else (checkRequest), each checked where its rules live:
 * `provider` by the model's request schema (GET /v1/models publishes it there, among the model's
 * fields, and its issues come in that order), then against the model's routes; `webhook` apart
 * from the schema (its host name is resolved now, and the OpenAPI document adds it beside each
 * model's schema). Neither is part of the input; both are part of the fingerprint (another webhook
 * is another request).
 */
export interface RequestEnvelope {
  /** `webhook`: where the generation's events are posted; null: nowhere. */
  webhook: GenerationWebhook | null;
  /** `provider` as sent; absent: the model's own routing decides. */
  routing?: RouteRequest;
  /** The routes a new generation would try now, in order (empty: none is usable; see routePlanOf). */
  routes: PlannedRoute[];
  /** When the routes are all down: when the first of them is probed again. */
  retryAfterSeconds: number | null;
}

export type RequestCheck =
  | {
      ok: true;
      model: CompiledModel;
      /** The accepted fields other than `model` and the envelope's; inline images are still data URIs. */
      input: Record<string, unknown>;
      /** What admission debits if it accepts now (quoteOf). */
      credits: number;
      envelope: RequestEnvelope;
    }
  | { ok: false; issues: ValidationIssue[]; model: string; mediaType: string };

/** What a request is checked against: the catalog, the providers as known now, the webhook rules. */
export interface RequestCheckDeps extends ProviderKnowledge {
  catalog: CatalogCache;
  webhooks?: WebhookCheckRules;
}

/**
 * A request for a generation (its body, as any front door received it) checked as admission and
 * the quote check it: the model's schema, storable text wherever it is in the body (keys and
 * ignored fields included), the envelope, every issue (the model's, then the webhook's); for a
 * valid one, its price and its route plan now. The model and media type of a refused request name
 * no text the client sent, so that it can be recorded.
 */
export async function checkRequest(deps: RequestCheckDeps, body: unknown): Promise<RequestCheck> {
  // `webhook` is not the model's (a strict model would refuse it): it is taken off before the
  // model's schema reads the body.
  const { webhook, ...modelBody } = isObject(body) ? body : { webhook: undefined };
  const checked = checkModelFields(deps, isObject(body) ? modelBody : body);
  const hook = await checkWebhook(webhook, deps.webhooks ?? { allowCidrs: [] });
  if (checked.ok && hook.ok) return { ...checked, envelope: { ...checked.envelope, webhook: hook.webhook } };
  const issues = [...(checked.ok ? [] : checked.issues), ...(hook.ok ? [] : hook.issues)];
  if (!checked.ok) return { ...checked, issues };
  const { entry } = checked.model;
  return { ok: false, issues, model: entry.id, mediaType: entry.media_type };
}

type ModelCheck =
  | (Omit<Extract<RequestCheck, { ok: true }>, 'envelope'> & { envelope: Omit<RequestEnvelope, 'webhook'> })
  | Extract<RequestCheck, { ok: false }>;

/** The body without its `webhook`, against its model's request schema and routes. */
function checkModelFields(deps: RequestCheckDeps, body: unknown): ModelCheck {
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
  const refuse = (issues: ValidationIssue[], model = '', mediaType = 'unknown'): ModelCheck => ({
    ok: false,
    model,
    mediaType,
    // One issue per field: the text issue, when a field has one, says the most.
    issues: [...textIssues, ...issues.filter((issue) => !named.has(issue.field))],
  });
  const modelId = (body as Record<string, unknown>).model;
  const requested = requestedModel(deps.catalog, modelId);
  if (!requested.ok)
    return refuse(
      [requested.issue],
      typeof modelId === 'string' ? toStorableText(modelId.slice(0, 200)) : '',
    );
  const { model } = requested;
  const { media_type: mediaType } = model.entry;
  const parsed = model.requestSchema.safeParse(body, parseOptions);
  if (!parsed.success) return refuse(toValidationIssues(parsed.error, body), model.entry.id, mediaType);
  // `provider` is taken off once the model's schema has read it: the envelope's, not the input.
  const { model: _model, provider, ...input } = parsed.data as Record<string, unknown>;
  const routing = provider as RouteRequest | undefined;
  // `provider` naming a provider the model has no route on: the request's fault, like a bad option.
  const routes = checkRoutes(model.entry, routing, deps);
  if (textIssues.length > 0 || !routes.ok)
    return refuse(routes.ok ? [] : routes.issues, model.entry.id, mediaType);
  const envelope = {
    ...(routing ? { routing } : {}),
    routes: routes.plan,
    retryAfterSeconds: routes.retryAfterSeconds,
  };
  return { ok: true, model, input, credits: quoteOf({ model, input }), envelope };
}

/**
 * The catalog's model a request names in `model`, or the issue with it: missing, not text, or no
 * model the catalog serves (unknown, or retired). Admission's check, and the console playground's
 * before it builds a form's request (it never puts another model in its place).
 */
export function requestedModel(
  catalog: CatalogCache,
  modelId: unknown,
): { ok: true; model: CompiledModel } | { ok: false; issue: ValidationIssue } {
  if (typeof modelId !== 'string')
    return {
      ok: false,
      issue:
        modelId === undefined
          ? { field: 'model', code: 'required', message: 'This field is required.' }
          : { field: 'model', code: 'invalid_type', message: 'Expected string.' },
    };
  const model = catalog.get(modelId);
  if (model) return { ok: true, model };
  const known = catalog
    .list()
    .map((m) => m.entry.id)
    .join(', ');
  return {
    ok: false,
    issue: { field: 'model', code: 'invalid_value', message: `Unknown model. One of: ${known}.` },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
