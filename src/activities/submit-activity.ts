import { randomBase62 } from '../ids.js';
import {
  claimSubmit,
  keepSubmitClaim,
  markCreateAnswered,
  markCreateSent,
  recordSubmittedJob,
  releaseSubmitClaim,
  submissionState,
  type SubmitClaim,
} from '../db/provider-submissions.js';
import { takeProviderSlot } from '../db/provider-slots.js';
import { endRoute, leaveRoute, providerIsDown } from '../db/route-attempts.js';
import { entryToSubmit, lastQuotedEntry } from './admission.js';
import {
  OwnStorageError,
  ProviderRejection,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
} from '../providers/provider.js';
import { jobReference } from '../providers/job-reference.js';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { PermanentError } from '../errors.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { GenerationStart } from '../workflows/generation-types.js';
import type { GenerationActivities } from '../workflows/generation-activity-contract.js';
import type { ActivityDeps } from './activity-deps.js';
import {
  isRouteNotAccepted,
  providerBusy,
  providerRejected,
  providerUncertain,
  routeNotAccepted,
  settledFailure,
} from './failures.js';
import { plannedRoute, providerJob } from './submit-job.js';

type SubmitDeps = Pick<
  ActivityDeps,
  'db' | 'providerFor' | 'inFlightCap' | 'submitClaimWindowMs' | 'metrics'
>;

/**
 * How long other attempts leave a claim to a holder that stopped renewing it (died, or hangs):
 * longer than any adapter's own create deadline (20 s), after which a create's answer can no
 * longer come. A live holder renews it every quarter of that, however long its create takes to
 * prepare (large inline images from a slow bucket) or to be answered.
 */
const defaultClaimWindowMs = 60_000;

/** Handing a generation's job to its provider, once, and where that stands when its horizon passes. */
export function createSubmitActivities(
  deps: SubmitDeps,
): Pick<GenerationActivities, 'submit' | 'submissionState' | 'leaveRoute'> {
  const { db } = deps;
  const metrics = deps.metrics ?? noGenerationMetrics;
  const windowMs = deps.submitClaimWindowMs ?? defaultClaimWindowMs;

  /** The submit horizon passed: a recorded job, or whether a create may have reached the provider. */
  async function submissionStateOf(generationId: string) {
    return submissionState(db, generationId);
  }

  /**
   * Hands the job to the provider, once. Each attempt takes the generation's submit claim (or
   * waits, ProviderBusy, while another attempt holds it: preparing, or its create awaiting its
   * answer). A create leaves only under the claim, marked as sent first; a claim taken over from
   * an attempt that may have sent asks the provider before sending again, and gives up as
   * uncertain when the provider cannot tell. Only the attempt that sent frees the claim, and only
   * when the provider proved nothing was created.
   */
  async function submit(start: GenerationStart, position = 0): Promise<{ jobId: string }> {
    const { generationId } = start;
    const attempt = `att_${randomBase62(16)}`;
    const quoted = lastQuotedEntry(start.model);
    const claim = await claimSubmit(db, generationId, attempt, quoted?.digest ?? null, windowMs, position);
    // Refunded already (support refunded it, then reset the workflow): it must never run unpaid.
    if (claim.refunded) throw settledFailure(generationId);
    if (claim.provider_job_id) return { jobId: claim.provider_job_id };
    // A late attempt for a route whose end is recorded (the workflow has moved on, or will).
    if (claim.route_position > position) throw routeNotAccepted(position, 'its end was recorded earlier');
    if (!claim.mine)
      // Another attempt (one the POST's deadline abandoned, on any worker) is preparing or waiting
      // for the provider's answer: wait for it (it records the job) rather than take its silence for a loss.
      throw providerBusy(
        'an earlier submit of this generation is still preparing or waiting for the provider to answer',
        '1 second',
      );
    // Held while this attempt lives: renewed on a clock, so that a slow preparation or a slow
    // answer never looks like a dead holder, and a dead holder's claim lapses within the window.
    const renewal = setInterval(() => {
      keepSubmitClaim(db, generationId, attempt, windowMs).catch(() => {
        // The database is away: the window still runs, and the next renewal may land.
      });
    }, windowMs / 4);
    try {
      return await submitHolding(start, attempt, claim, quoted, position);
    } finally {
      clearInterval(renewal);
    }
  }

  /** The rest of a submit attempt, holding the claim. */
  async function submitHolding(
    start: GenerationStart,
    attempt: string,
    claim: SubmitClaim,
    quoted: ReturnType<typeof lastQuotedEntry>,
    position: number,
  ): Promise<{ jobId: string }> {
    const { generationId } = start;
    /** Leaves the claim to the next attempt at once: this one sent nothing, or knows no more. */
    const stepAside = () =>
      claim.sent
        ? markCreateAnswered(db, generationId, attempt)
        : releaseSubmitClaim(db, generationId, attempt);

    const entry = entryToSubmit(start.model, claim, quoted);
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
    const routeOf = { position, route: planned.index, provider: providerName };
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
      const found = await lookUp(provider, token).finally(() =>
        markCreateAnswered(db, generationId, attempt),
      );
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
    let sent = false;
    try {
      const job = providerJob(start, token, entry, route);
      await takeInFlightPlace(generationId, providerName, hasNext ? moveOn : undefined);
      // Reference images read and inlined before the create is marked sent: a holder that dies or
      // is taken over while preparing has sent nothing, and the next attempt sends as a first one
      // (not a possible create to ask the provider about, which a provider that cannot tell would
      // send to review). The mark's window then covers the create alone.
      const prepared = provider.prepare ? await provider.prepare(job) : { send: () => provider.submit(job) };
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
   */
  async function takeInFlightPlace(
    generationId: string,
    provider: ProviderName,
    /** With a next route: a full cap moves on to it rather than wait here. */
    moveOn?: (reason: string) => Promise<never>,
  ): Promise<void> {
    const cap = deps.inFlightCap?.(provider) ?? 0;
    if (cap <= 0 || (await takeProviderSlot(db, generationId, provider, cap))) return;
    if (moveOn) await moveOn(`its ${cap} in-flight places are taken`);
    throw providerBusy(
      `provider ${provider} has ${cap} jobs in flight, its cap; this one waits for a place`,
      '2 seconds',
    );
  }

  /** A job that never started: its route left (see leaveRoute in route-attempts.ts). */
  async function leaveRouteOf(
    generationId: string,
    ended: { position: number; jobId: string; reason: string },
  ): Promise<{ moved: boolean }> {
    const left = await leaveRoute(db, generationId, ended);
    if (left.leftNow) metrics.routeAttempt(left.leftNow, 'never_started');
    return { moved: left.moved };
  }

  return { submit, submissionState: submissionStateOf, leaveRoute: leaveRouteOf };
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
