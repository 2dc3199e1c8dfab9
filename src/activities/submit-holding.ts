import type { SubmitClaim } from '../db/provider-submissions.js';
import {
  markCreateAnswered,
  markCreateSent,
  recordSubmittedJob,
  releaseSubmitClaim,
  submissionState,
} from '../db/provider-submissions.js';
import { releaseProviderSlot, takeProviderSlot, type PlaceClaim } from '../db/provider-slots.js';
import { endRoute, providerIsDown } from '../db/route-attempts.js';
import { entryToSubmit, type lastQuotedEntry } from './admission.js';
import {
  OwnStorageError,
  ProviderRejection,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
} from '../providers/provider.js';
import { jobReference } from '../providers/job-reference.js';
import { providerWebhookUrl } from '../providers/provider-push.js';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import type { ModelRoute } from '../catalog/routes.js';
import { PermanentError } from '../errors.js';
import type { GenerationMetrics } from '../observability/metrics.js';
import type { GenerationStart } from '../workflows/generation-types.js';
import type { ActivityDeps } from './activity-deps.js';
import {
  cancelAfterPassed,
  isRouteNotAccepted,
  providerBusy,
  providerRejected,
  providerUncertain,
  routeNotAccepted,
} from './failures.js';
import { plannedRoute, providerJob } from './submit-job.js';

/** What a submit attempt holding the generation's submit claim works with (see createSubmitActivities). */
export interface HeldSubmit {
  deps: Pick<
    ActivityDeps,
    'db' | 'providerFor' | 'inFlightCap' | 'batchProviderShare' | 'providerWebhookBaseUrl'
  > & {
    metrics: GenerationMetrics;
  };
  /** The claim's window (see defaultClaimWindowMs). */
  windowMs: number;
  start: GenerationStart;
  /** This attempt's id, under which it holds the claim. */
  attempt: string;
  claim: SubmitClaim;
  quoted: ReturnType<typeof lastQuotedEntry>;
  /** The plan position of the route it submits to. */
  position: number;
}

/**
 * The rest of a submit attempt, holding the claim: the route's provider, asked first when an
 * earlier attempt may have sent the create, then the create itself (sendCreate).
 */
export async function submitHolding(held: HeldSubmit): Promise<{ jobId: string }> {
  const { deps, start, attempt, claim, position } = held;
  const { db } = deps;
  const { generationId } = start;
  /** Leaves the claim to the next attempt at once: this one sent nothing, or knows no more. */
  const stepAside = () =>
    claim.sent
      ? markCreateAnswered(db, generationId, attempt)
      : releaseSubmitClaim(db, generationId, attempt);

  const entry = entryToSubmit(start.model, claim, held.quoted);
  if (!entry) {
    // Admission checked the model was active; its entry has since become unreadable.
    await stepAside();
    throw new PermanentError(`model ${start.model} has no readable catalog entry`);
  }
  const planned = plannedRoute(start, entry, position);
  if (!planned) {
    await stepAside();
    throw new PermanentError(`model ${start.model} has no route ${position} in its catalog entry`);
  }
  const { route, hasNext } = planned;
  const providerName = route.provider;
  const { recordJob, moveOn } = routeRecords(held, planned.index, providerName);
  let provider: Provider;
  try {
    provider = deps.providerFor(providerName);
  } catch (error) {
    // This worker cannot reach that provider (no credentials): another worker may.
    await stepAside();
    throw error;
  }
  // Each route its own token: a provider that looks jobs up by token never confuses two routes' creates.
  const firstToken = claim.provider_token ?? `tok_${generationId}`;
  const token = position === 0 ? firstToken : `${firstToken}.r${position}`;
  if (claim.sent) {
    // An earlier attempt may have reached the provider: ask before sending again.
    const found = await lookUp(provider, token).finally(() => markCreateAnswered(db, generationId, attempt));
    if (found.found === true) return { jobId: await recordJob(jobReference(providerName, found.jobId)) };
    if (found.found === 'unknown')
      throw providerUncertain('An earlier submit may have reached the provider, which cannot say.', {
        retryable: false,
      });
    // The provider does not have it: sending it now is the first submission it sees.
  }
  // With a next route, a breaker open here moves on at once (admission skipped it if it was open then).
  if (hasNext && !claim.sent && (await providerIsDown(db, providerName)))
    await moveOn('its circuit breaker is open');
  return sendCreate(held, { provider, providerName, token, entry, route, hasNext }, { recordJob, moveOn });
}

/**
 * What an attempt records of its route (`index` in the model's routes, on `providerName`) while it
 * holds the claim: the job it got, or the route's end when the provider proved it does not take it.
 */
function routeRecords(held: HeldSubmit, index: number, providerName: ProviderName) {
  const { deps, start, attempt, position } = held;
  const { db, metrics } = deps;
  const { generationId } = start;
  const routeOf = { position, route: index, provider: providerName };
  /** Counted once, by the statement that recorded this route's attempt: on a later route, a failover too. */
  const counted = (outcome: 'accepted' | 'not_accepted') => {
    metrics.routeAttempt(providerName, outcome);
    const from = position > 0 ? start.routes?.[position - 1]?.provider : undefined;
    if (from) metrics.failover(start.model, from, providerName);
  };
  /** Records the job and the route's accepted attempt, while this attempt holds the claim on this route. */
  const recordJob = async (jobId: string): Promise<string> => {
    if (await recordSubmittedJob(db, generationId, jobId, routeOf, attempt)) {
      counted('accepted');
      return jobId;
    }
    const recorded = (await submissionState(db, generationId)).jobId;
    // Not this attempt's to record (its claim taken over, its route left): the holder's job stands.
    if (recorded === null) throw notHoldingClaim();
    return recorded;
  };
  /** This route proved it does not take the job: its end recorded and the claim moved on, then the workflow is told. */
  const moveOn = async (reason: string): Promise<never> => {
    if (!(await endRoute(db, generationId, attempt, { ...routeOf, reason }))) throw notHoldingClaim();
    counted('not_accepted');
    throw routeNotAccepted(position, `${providerName} did not take the job: ${reason}`);
  };
  return { recordJob, moveOn };
}

/** The create itself: an in-flight place, the job prepared, marked sent under the claim, sent, and recorded. */
async function sendCreate(
  held: HeldSubmit,
  to: {
    provider: Provider;
    providerName: ProviderName;
    token: string;
    entry: CatalogEntry;
    route: ModelRoute;
    hasNext: boolean;
  },
  records: ReturnType<typeof routeRecords>,
): Promise<{ jobId: string }> {
  const { deps, start, attempt, windowMs } = held;
  const { db } = deps;
  const { generationId } = start;
  const { provider, providerName, token, entry, route, hasNext } = to;
  const { recordJob, moveOn } = records;
  let sent = false;
  try {
    const job = providerJob(
      start,
      token,
      entry,
      route,
      webhookUrlFor(deps, provider, providerName, generationId),
    );
    // Past its Cancel-After nothing leaves: neither a wait for a place nor a create (checked again
    // once the create is prepared, before it is marked sent).
    checkDeadline(start);
    await takeInFlightPlace(deps, start, providerName, hasNext ? moveOn : undefined);
    // Reference images read and inlined before the create is marked sent: a holder that dies or
    // is taken over while preparing has sent nothing, and the next attempt sends as a first one
    // (not a possible create to ask the provider about, which a provider that cannot tell would
    // send to review). The mark's window then covers the create alone.
    const prepared = provider.prepare ? await provider.prepare(job) : { send: () => provider.submit(job) };
    checkDeadline(start);
    // Taken over (this attempt was too slow to send), or no longer waiting for a job: nothing leaves.
    if (!(await markCreateSent(db, generationId, attempt, windowMs, providerName))) throw claimLost;
    sent = true;
    const accepted = await prepared.send();
    return { jobId: await recordJob(jobReference(providerName, accepted.jobId)) };
  } catch (error) {
    if (isRouteNotAccepted(error)) throw error;
    // The provider's own proof that it did not take the job (classified by its adapter): the next route.
    if (hasNext && error instanceof ProviderTransientError && error.provesNotAccepted)
      await moveOn(error.message);
    if (error === claimLost)
      // The claim, and the in-flight place, are the attempt's that holds the claim now.
      throw notHoldingClaim();
    if (
      !sent ||
      error instanceof ProviderTransientError ||
      error instanceof ProviderRejection ||
      error instanceof OwnStorageError
    ) {
      // Nothing reached the provider (our storage failing while the create was prepared sent
      // nothing), or it refused the job (a rejection seen by an attempt the POST abandoned must
      // reach the workflow: the next attempt sends again and hears it). The in-flight place goes
      // with the claim, and only while this attempt still holds it.
      await releaseSubmitClaim(db, generationId, attempt);
    } else {
      await markCreateAnswered(db, generationId, attempt);
    }
    if (error instanceof ProviderRejection) throw providerRejected(error.message);
    if (error instanceof ProviderUncertainError)
      // The next attempt will ask the provider (lookup) rather than submit again.
      throw providerUncertain(error.message, { retryable: true });
    throw error;
  }
}

/**
 * One of the provider account's in-flight places, or a ProviderBusy failure: the job then waits
 * in our queue (the submit is retried in the background) instead of collecting the provider's 429s.
 * Places go in the fair order (takeProviderSlot): interactive generations first, batch lines
 * round-robin between accounts, within their share of the cap.
 */
async function takeInFlightPlace(
  deps: HeldSubmit['deps'],
  start: GenerationStart,
  provider: ProviderName,
  /** With a next route: a full cap moves on to it rather than wait here. */
  moveOn?: (reason: string) => Promise<never>,
): Promise<void> {
  const cap = deps.inFlightCap?.(provider) ?? 0;
  if (cap <= 0) return;
  const claim: PlaceClaim = start.batch
    ? { lane: 'batch', accountId: start.accountId, batchId: start.batch.batchId }
    : { lane: 'interactive', accountId: start.accountId };
  const rules = { cap, batchShare: deps.batchProviderShare ?? 1 };
  if (await takeProviderSlot(deps.db, start.generationId, provider, claim, rules)) return;
  if (moveOn) {
    // It will not wait here: its turn is given up, so that it holds no one back.
    await releaseProviderSlot(deps.db, start.generationId);
    await moveOn(`its ${cap} in-flight places are taken`);
  }
  throw providerBusy(
    `provider ${provider} has ${cap} jobs in flight, its cap; this one waits for a place`,
    '2 seconds',
  );
}

/**
 * A generation past its Cancel-After deadline is not sent (CancelAfterPassed): checked under the
 * claim, after an earlier attempt's possible create was looked up, so a job a provider may have is
 * never abandoned for it. Then the claim and the place are released as for any create not sent.
 */
function checkDeadline(start: GenerationStart): void {
  if (start.cancelAfter !== undefined && Date.now() >= Date.parse(start.cancelAfter))
    throw cancelAfterPassed(start.cancelAfter);
}

/**
 * The webhook URL a job is sent with: for a provider that pushes to a URL (fal, Replicate) when
 * PROVIDER_WEBHOOK_BASE_URL is set; never for OpenAI (synchronous) nor the simulated provider
 * (which signals the workflow itself).
 */
function webhookUrlFor(
  deps: HeldSubmit['deps'],
  provider: Provider,
  providerName: ProviderName,
  generationId: string,
): string | undefined {
  const base = deps.providerWebhookBaseUrl;
  if (!base || !provider.pushes || provider.pushesWithoutUrl || providerName === 'simulated')
    return undefined;
  return providerWebhookUrl(base, providerName, generationId);
}

/** Thrown inside submit when its claim was taken over before the create could leave. */
const claimLost = new Error('the submit claim was taken over');

/** This attempt no longer holds the claim: the attempt that does has the job in hand. */
const notHoldingClaim = () =>
  providerBusy(
    'this submit attempt no longer holds the claim; another attempt has the job in hand',
    '1 second',
  );

/** Whether the provider has the job; a provider that cannot be asked now leaves its fate unknown (retried). */
async function lookUp(provider: Provider, token: string): ReturnType<Provider['lookup']> {
  try {
    return await provider.lookup(token);
  } catch (error) {
    throw providerUncertain(
      `An earlier submit may have reached the provider, which could not be asked: ${error instanceof Error ? error.message : String(error)}`,
      { retryable: true },
    );
  }
}
