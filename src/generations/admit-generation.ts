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
  checkIdempotencyKey,
  checkRequest,
  fingerprint,
  type IdempotencyKeyCheck,
  type RequestCheck,
} from './generation-request.js';
import { refusalWhileDown } from './provider-availability.js';
import { quoteOf } from './quote.js';
import { routePlanOf, type ProviderKnowledge } from './route-plan.js';
import { startGeneration, type StartGenerationDeps, type StartOutcome } from './start-generation.js';
import type { WebhookSettings } from './webhook-request.js';

/**
 * What admission reads and acts through, wired once (wireAdmission) for every process that admits:
 * the catalog, what is known of the providers, the Temporal client and the rest of the start.
 */
export interface AdmissionDeps extends StartGenerationDeps, ProviderKnowledge {
  catalog: CatalogCache;
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
  const checked = await checkRequest(deps.catalog, request.body, deps.webhooks ?? { allowCidrs: [] });
  if (!key.ok || !checked.ok || (uploads?.issues.length ?? 0) > 0)
    throw await invalid(deps, request, key, checked);
  const { entry } = checked.model;
  // The routes to try, decided before the debit: none usable is the 503 of a provider that is down.
  const routing = routePlanOf(entry, checked.envelope.routing, deps);
  const { webhook } = checked.envelope;
  const started = await startGeneration(
    deps,
    {
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      idempotencyKey: key.key,
      model: entry,
      // Staged uploads are stored from disk by startGeneration, never as data URIs.
      input: uploads ? uploads.withStagedImages(checked.input) : checked.input,
      fingerprint: fingerprint(
        uploads ? uploads.forFingerprint(request.body as Record<string, unknown>) : request.body,
      ),
      ...(webhook && { webhook: { ...webhook, retryDelaysMs: deps.webhooks?.retryDelaysMs ?? [] } }),
      routes: routing.plan,
      credits: quoteOf(checked),
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

/** What a create with this body would debit now, and the provider it would try first. */
export interface GenerationQuote {
  model: string;
  credits: number;
  /** The route a create would try first now: admission plans again when it comes (`weighted` draws anew). */
  provider: string | null;
}

/**
 * Admission answering without starting: the body checked exactly as admitGeneration checks it
 * (an invalid one throws the same ValidationError, neither recorded nor counted: it is no request
 * for a generation), its price as admission computes it, and its route plan now. Nothing is
 * charged, started, stored or fetched.
 */
export async function quoteGeneration(
  deps: Pick<AdmissionDeps, 'catalog' | 'webhooks' | keyof ProviderKnowledge>,
  body: unknown,
): Promise<GenerationQuote> {
  const checked = await checkRequest(deps.catalog, body, deps.webhooks ?? { allowCidrs: [] });
  if (!checked.ok) throw new ValidationError(checked.issues);
  const credits = quoteOf(checked);
  const { plan } = routePlanOf(checked.model.entry, checked.envelope.routing, deps);
  return { model: checked.model.entry.id, credits, provider: plan[0]?.provider ?? null };
}

/** The error of a request that never became a job: every issue, the uploads' first; recorded if asked. */
async function invalid(
  deps: AdmissionDeps,
  request: AdmissionRequest,
  key: IdempotencyKeyCheck,
  checked: RequestCheck,
): Promise<ValidationError> {
  const own = request.uploads?.issues ?? [];
  const issues = [
    ...own,
    ...(key.ok ? [] : [key.issue]),
    ...(checked.ok ? [] : checked.issues.filter((i) => !own.some((u) => u.field === i.field))),
  ];
  const what = checked.ok
    ? { model: checked.model.entry.id, mediaType: checked.model.entry.media_type }
    : checked;
  // A model the catalog does not know is not a label: the client could send any text.
  deps.metrics?.rejected(what.mediaType !== 'unknown' ? what.model : 'unknown', 'invalid_request');
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
