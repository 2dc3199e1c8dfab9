import type { BaseLogger } from 'pino';
import type { CatalogCache } from '../catalog/catalog-cache.js';
import { recordRejectedRequest } from '../db/admission-repository.js';
import type { GenerationRow } from '../db/generation-reads.js';
import {
  ApiError,
  ValidationError,
  admissionRefusal,
  idempotencyConflict,
  type ValidationIssue,
} from '../errors.js';
import { newId } from '../ids.js';
import type { ApiGenerationMetrics } from '../observability/metrics.js';
import { toStorableText } from '../storable-text.js';
import {
  checkBody,
  checkIdempotencyKey,
  fingerprint,
  type BodyCheck,
  type IdempotencyKeyCheck,
} from './generation-request.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { refusalWhileDown } from './provider-availability.js';
import { quoteOf } from './quote.js';
import { routePlanOf } from './route-plan.js';
import { startGeneration, type StartGenerationDeps, type StartOutcome } from './start-generation.js';
import { checkWebhook, type WebhookSettings } from './webhook-request.js';

/** What admission reads and acts through, configured alike in the API and the console. */
export interface AdmissionDeps extends StartGenerationDeps {
  catalog: CatalogCache;
  /** Seconds until a down provider is probed again; null when it takes requests. */
  providerDownFor?: (provider: string) => number | null;
  /** The weighted routing policy's draw (default Math.random). */
  random?: () => number;
  /** The `fastest` policy's measured p50 of a model's route, in ms (RouteDurations); undefined: unmeasured. */
  routeP50Ms?: (model: string, provider: string) => number | undefined;
  /** Counts the requests refused here (validation, a provider that is down); admission's refusals are the worker's. */
  metrics?: ApiGenerationMetrics;
  /** Webhook subscriptions (the API's; absent: the `webhook` field is checked against public addresses only). */
  webhooks?: WebhookSettings;
}

/** A request for a generation as its transport received it, from an authenticated key. */
export interface AdmissionRequest {
  principal: { accountId: string; keyId: string };
  /** The Idempotency-Key as sent (the API's header, the console form's token); undefined: none. */
  idempotencyKey: string | string[] | undefined;
  /** The body as sent, checked here against its model's catalog entry. */
  body: unknown;
  /**
   * Whether an invalid request is recorded as a rejected generation (the API: it is then listed,
   * and x-request-id names it), or only refused (the console re-renders its form with the issues).
   */
  recordInvalid: boolean;
  /**
   * Images the transport received itself (the console's uploads, staged to files): its own issues
   * about them (each field named there is not reported again), the body the fingerprint is taken
   * of (digests in place of the files), and the accepted input with the staged files in place.
   */
  uploads?: {
    issues: ValidationIssue[];
    forFingerprint(body: Record<string, unknown>): Record<string, unknown>;
    withStagedImages(input: Record<string, unknown>): Record<string, unknown>;
  };
}

/**
 * A request that reached admission and was refused there (another body under its Idempotency-Key,
 * or admission's refusal: credits, concurrency…): it names its generation, and the images it stored
 * have been deleted.
 */
export class GenerationRefused extends ApiError {
  constructor(
    refusal: ApiError,
    readonly generationId: string,
    readonly outcome: 'conflict' | 'rejected',
  ) {
    super(refusal.code, refusal.message, refusal.extra);
  }
}

/**
 * The one admission path of the API's POST and the console's playground: checks the key and body
 * (an invalid request throws a ValidationError with every issue, recorded when asked), refuses a new
 * generation while its provider is down (a retry of an accepted request is still answered), starts
 * it (startGeneration), and turns a refusal or conflict into a GenerationRefused once its stored
 * images are deleted. Every other failure is an ApiError from startGeneration (503s a retry with
 * the same key puts right). Returns the admitted generation, as startGeneration knew it.
 */
export async function admitGeneration(
  deps: AdmissionDeps,
  request: AdmissionRequest,
  log: Pick<BaseLogger, 'warn'>,
): Promise<{ generationId: string; known: GenerationRow }> {
  const { principal, uploads } = request;
  const key = checkIdempotencyKey(request.idempotencyKey);
  // `webhook` is an envelope field, not the model's (a strict model would refuse it): it is checked
  // apart, kept out of the input, and part of the fingerprint (another webhook is another request).
  const { webhook: webhookField, ...modelBody } = isObject(request.body)
    ? request.body
    : { webhook: undefined };
  const body = checkBody(deps.catalog, isObject(request.body) ? modelBody : request.body);
  const hook = await checkWebhook(webhookField, deps.webhooks ?? { allowCidrs: [] });
  if (!key.ok || !body.ok || !hook.ok || (uploads?.issues.length ?? 0) > 0)
    throw await invalid(deps, request, key, body, hook.ok ? [] : hook.issues);
  const { entry } = body.model;
  // The routes to try, decided before the debit: none usable is the 503 of a provider that is down.
  const routing = routePlanOf(entry, body.routing, {
    offers: (provider) => deps.catalog.offers(provider as ProviderName),
    downFor: (provider) => deps.providerDownFor?.(provider) ?? null,
    random: deps.random,
    p50Ms: deps.routeP50Ms,
  });
  const started = await startGeneration(
    deps,
    {
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      idempotencyKey: key.key,
      model: entry,
      // Staged uploads are stored from disk by startGeneration, never as data URIs.
      input: uploads ? uploads.withStagedImages(body.input) : body.input,
      fingerprint: fingerprint(
        uploads ? uploads.forFingerprint(request.body as Record<string, unknown>) : request.body,
      ),
      ...(hook.webhook && {
        webhook: { ...hook.webhook, retryDelaysMs: deps.webhooks?.retryDelaysMs ?? [] },
      }),
      routes: routing.plan,
      credits: quoteOf(body),
    },
    {
      // A retry of an accepted request is answered with its generation even while the provider is
      // down: only a new generation is refused (issue 19, item 3).
      refuseNew: refusalWhileDown(entry, routing.retryAfterSeconds, () =>
        deps.metrics?.rejected(entry.id, 'service_unavailable'),
      ),
    },
  );
  if (started.outcome === 'admitted') return { generationId: started.generationId, known: started.known };
  throw await refused(deps, started, log);
}

/** The error of a request that never became a job: every issue, the uploads' first; recorded if asked. */
async function invalid(
  deps: AdmissionDeps,
  request: AdmissionRequest,
  key: IdempotencyKeyCheck,
  body: BodyCheck,
  webhookIssues: ValidationIssue[],
): Promise<ValidationError> {
  const own = request.uploads?.issues ?? [];
  const issues = [
    ...own,
    ...(key.ok ? [] : [key.issue]),
    ...(body.ok ? [] : body.issues.filter((i) => !own.some((u) => u.field === i.field))),
    ...webhookIssues,
  ];
  const what = body.ok ? { model: body.model.entry.id, mediaType: body.model.entry.media_type } : body;
  // A model the catalog does not know is not a label: the client could send any text.
  deps.metrics?.rejected(body.ok || body.mediaType !== 'unknown' ? what.model : 'unknown', 'invalid_request');
  if (!request.recordInvalid) return new ValidationError(issues);
  const id = newId('gen');
  // Recorded, key not claimed: it is listed, and x-request-id names it.
  await recordRejectedRequest(deps.db, {
    id,
    accountId: request.principal.accountId,
    apiKeyId: request.principal.keyId,
    model: what.model,
    mediaType: what.mediaType,
    input: null,
    // Issues never quote what was sent; toStorableText keeps it that way should a message ever do.
    error: {
      code: 'invalid_request',
      message: toStorableText(issues.map((i) => `${i.field || 'body'}: ${i.message}`).join(' ')),
    },
  });
  return new ValidationError(issues, 'The request is invalid.', { requestId: id });
}

/**
 * The error a request that will not run answers with. Its inline images are not kept: a conflict's
 * are its own (another fingerprint, another folder), a rejected generation's are never read.
 */
async function refused(
  deps: AdmissionDeps,
  refusal: Exclude<StartOutcome, { outcome: 'admitted' }>,
  log: Pick<BaseLogger, 'warn'>,
): Promise<GenerationRefused> {
  // The answer stands if the store fails: images left behind are never read, and the bucket's
  // lifecycle rule (docs/operating.md, Object storage) removes them in the end.
  if (refusal.inputPrefix)
    await deps.storage.deletePrefix(refusal.inputPrefix).catch((error: unknown) => {
      log.warn(
        { err: error, prefix: refusal.inputPrefix },
        "a refused request's inline images could not be deleted",
      );
    });
  const error =
    refusal.outcome === 'conflict'
      ? idempotencyConflict(refusal.generationId)
      : admissionRefusal(refusal.error, refusal.generationId);
  return new GenerationRefused(error, refusal.generationId, refusal.outcome);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
