import type { BaseLogger } from 'pino';
import type { CatalogCache } from '../../catalog/catalog-cache.js';
import type { GenerationRow } from '../../db/generation-reads.js';
import { ValidationError } from '../../vocabulary/errors.js';
import type { ApiGenerationMetrics } from '../../observability/metrics.js';
import type { AdmissionRequest } from './admission-request.js';
import { checkCancelAfter } from './cancel-after.js';
import { fingerprint } from './fingerprint.js';
import { checkIdempotencyKey, checkRequest } from './generation-request.js';
import { invalidRequest } from './invalid-request.js';
import { checkKeyModel, type KeyModels } from './key-rules.js';
import { refusalWhileDown } from './provider-availability.js';
import { refused } from './refusal.js';
import type { ProviderKnowledge } from './route-plan.js';
import { startGeneration, type StartGenerationDeps } from './start-generation.js';
import type { WebhookSettings } from './webhook-request.js';

export type { AdmissionRequest } from './admission-request.js';
export { GenerationRefused } from './refusal.js';

/*
 * Admission: what every front door (the API's POST and quote, the console's playground, and the
 * front doors to come) answers a request for a generation through. A front door only adapts:
 * it hands over the principal, the Idempotency-Key and the body as it received them, and answers
 * in its own terms. In the order a request meets them: its check (generation-request.ts: the key,
 * the model's fields, the envelope, the price, the route plan, the webhook), the record of an
 * invalid one (invalid-request.ts), the fingerprint, the start or the meeting of the generation
 * its key names (start-generation.ts), the refusal (refusal.ts). wireAdmission (admission-wiring.ts)
 * builds what it reads and acts through, once per process.
 */

/** What admission reads and acts through: wireAdmission builds it for every process that admits. */
export interface AdmissionDeps extends StartGenerationDeps, ProviderKnowledge {
  catalog: CatalogCache;
  /** Counts the requests refused here (validation, a provider that is down); admission's refusals are the worker's. */
  metrics?: ApiGenerationMetrics;
  /** Webhook subscriptions (the API's; absent: the `webhook` field is checked against public addresses only). */
  webhooks?: WebhookSettings;
  /** The shortest Cancel-After accepted, in seconds (CANCEL_AFTER_MIN_SECONDS; default 5). */
  cancelAfterMinSeconds?: number;
}

/**
 * Admits a request for a generation: checks the key and body (an invalid request throws a
 * ValidationError with every issue, recorded when asked), refuses a new generation while its
 * provider is down (a retry of an accepted request is still answered), starts it (startGeneration),
 * and turns a refusal or conflict into a GenerationRefused once its stored images are deleted.
 * Every other failure is an ApiError from startGeneration (503s a retry with the same key puts
 * right). Returns the admitted generation, as startGeneration knew it.
 */
export async function admitGeneration(
  deps: AdmissionDeps,
  request: AdmissionRequest,
  log: Pick<BaseLogger, 'warn'>,
): Promise<{ generationId: string; known: GenerationRow }> {
  const { principal, uploads } = request;
  checkKeyModel(principal, request.body);
  const key = checkIdempotencyKey(request.idempotencyKey, { batchLine: request.batch !== undefined });
  const deadline = checkCancelAfter(request.cancelAfter, deps.cancelAfterMinSeconds ?? 5);
  const checked = await checkRequest(deps, request.body);
  if (!key.ok || !deadline.ok || !checked.ok || (uploads?.issues.length ?? 0) > 0) {
    const headerIssues = [...(key.ok ? [] : [key.issue]), ...(deadline.ok ? [] : [deadline.issue])];
    throw await invalidRequest(deps, request, headerIssues, checked);
  }
  const cancelAfterSeconds = deadline.seconds;
  const { model, envelope } = checked;
  const { webhook } = envelope;
  const fingerprintOf = uploads
    ? uploads.forFingerprint(request.body as Record<string, unknown>)
    : request.body;
  // The routes were planned before the debit: none usable is the 503 of a provider that is down. A
  // retry of an accepted request is answered with its generation even while the provider is down:
  // only a new generation is refused (issue 19, item 3).
  const refuseNew = refusalWhileDown(model.entry, envelope.retryAfterSeconds, () =>
    deps.metrics?.rejected(model.entry.id, 'service_unavailable'),
  );
  const started = await startGeneration(
    deps,
    {
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      idempotencyKey: key.key,
      model: model.entry,
      // Staged uploads are stored from disk by startGeneration, never as data URIs.
      input: uploads ? uploads.withStagedImages(checked.input) : checked.input,
      // The deadline is part of the request: the same key with another Cancel-After is a conflict.
      // Without one the fingerprint is the body's alone, as it always was.
      fingerprint: fingerprint(
        cancelAfterSeconds === null ? fingerprintOf : [fingerprintOf, { 'Cancel-After': cancelAfterSeconds }],
      ),
      ...(webhook && { webhook: { ...webhook, retryDelaysMs: deps.webhooks?.retryDelaysMs ?? [] } }),
      routes: envelope.routes,
      credits: checked.credits,
      ...(request.batch ? { batch: request.batch } : {}),
      ...(cancelAfterSeconds === null ? {} : { cancelAfterSeconds }),
    },
    { refuseNew },
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
  principal: KeyModels = {},
): Promise<GenerationQuote> {
  checkKeyModel(principal, body);
  const checked = await checkRequest(deps, body);
  if (!checked.ok) throw new ValidationError(checked.issues);
  const { entry } = checked.model;
  return {
    model: entry.id,
    credits: checked.credits,
    provider: checked.envelope.routes[0]?.provider ?? null,
  };
}
