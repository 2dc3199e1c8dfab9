import { ApplicationFailure } from '@temporalio/activity';
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
import { entryToSubmit, lastQuotedEntry } from './admission.js';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import { ownValue } from '../catalog/own-value.js';
import { resolveOptions } from '../catalog/pricing.js';
import {
  OwnStorageError,
  ProviderRejection,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
  type ProviderJob,
} from '../providers/provider.js';
import { jobReference } from '../providers/job-reference.js';
import { buildProviderInput, type ProviderName } from '../catalog/provider-mapping.js';
import { referenceImageFields } from '../providers/reference-images.js';
import { PermanentError } from '../errors.js';
import { errorTypes, type GenerationStart } from '../workflows/generation-types.js';
import type { ActivityDeps } from './activity-deps.js';
import { settledFailure } from './settled-failure.js';

type SubmitDeps = Pick<ActivityDeps, 'db' | 'providerFor' | 'inFlightCap' | 'submitClaimWindowMs'>;

/**
 * How long other attempts leave a claim to a holder that stopped renewing it (died, or hangs):
 * longer than any adapter's own create deadline (20 s), after which a create's answer can no
 * longer come. A live holder renews it every quarter of that, however long its create takes to
 * prepare (large inline images from a slow bucket) or to be answered.
 */
const defaultClaimWindowMs = 60_000;

/** Handing a generation's job to its provider, once, and where that stands when its horizon passes. */
export function createSubmitActivities(deps: SubmitDeps) {
  const { db } = deps;
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
  async function submit(start: GenerationStart): Promise<{ jobId: string }> {
    const { generationId } = start;
    const attempt = `att_${randomBase62(16)}`;
    const quoted = lastQuotedEntry(start.model);
    const claim = await claimSubmit(db, generationId, attempt, quoted?.digest ?? null, windowMs);
    // Refunded already (support refunded it, then reset the workflow): it must never run unpaid.
    if (claim.refunded) throw settledFailure(generationId);
    if (claim.provider_job_id) return { jobId: claim.provider_job_id };
    if (!claim.mine)
      // Another attempt (one the POST's deadline abandoned, on any worker) is preparing or waiting
      // for the provider's answer: wait for it (it records the job) rather than take its silence for a loss.
      throw ApplicationFailure.create({
        type: errorTypes.providerBusy,
        message:
          'an earlier submit of this generation is still preparing or waiting for the provider to answer',
        nextRetryDelay: '1 second',
      });
    // Held while this attempt lives: renewed on a clock, so that a slow preparation or a slow
    // answer never looks like a dead holder, and a dead holder's claim lapses within the window.
    const renewal = setInterval(() => {
      keepSubmitClaim(db, generationId, attempt, windowMs).catch(() => {
        // The database is away: the window still runs, and the next renewal may land.
      });
    }, windowMs / 4);
    try {
      return await submitHolding(start, attempt, claim, quoted);
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
    const providerName = entry.provider?.name ?? 'simulated';
    let provider: Provider;
    try {
      provider = deps.providerFor(providerName);
    } catch (error) {
      // This worker cannot reach that provider (no credentials): another worker may.
      await stepAside();
      throw error;
    }
    const token = claim.provider_token ?? `tok_${generationId}`;
    if (claim.sent) {
      // An earlier attempt may have reached the provider: ask before sending again.
      const found = await lookUp(provider, token).finally(() =>
        markCreateAnswered(db, generationId, attempt),
      );
      if (found.found === true) {
        const jobId = jobReference(providerName, found.jobId);
        await recordSubmittedJob(db, generationId, jobId);
        return { jobId };
      }
      if (found.found === 'unknown')
        throw ApplicationFailure.nonRetryable(
          'An earlier submit may have reached the provider, which cannot say.',
          errorTypes.providerUncertain,
        );
      // The provider does not have it: sending it now is the first submission it sees.
    }
    let sent = false;
    try {
      const job = providerJob(start, token, entry);
      await takeInFlightPlace(generationId, providerName);
      // Reference images read and inlined before the create is marked sent: a holder that dies or
      // is taken over while preparing has sent nothing, and the next attempt sends as a first one
      // (not a possible create to ask the provider about, which a provider that cannot tell would
      // send to review). The mark's window then covers the create alone.
      const prepared = provider.prepare ? await provider.prepare(job) : { send: () => provider.submit(job) };
      // Taken over (this attempt was too slow to send), or no longer waiting for a job: nothing leaves.
      if (!(await markCreateSent(db, generationId, attempt, windowMs))) throw claimLost;
      sent = true;
      const accepted = await prepared.send();
      const jobId = jobReference(providerName, accepted.jobId);
      await recordSubmittedJob(db, generationId, jobId);
      return { jobId };
    } catch (error) {
      if (error === claimLost)
        // The claim, and the in-flight place, are the attempt's that holds the claim now.
        throw ApplicationFailure.create({
          type: errorTypes.providerBusy,
          message: 'this submit attempt no longer holds the claim; another attempt has the job in hand',
          nextRetryDelay: '1 second',
        });
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
      if (error instanceof ProviderRejection)
        throw ApplicationFailure.nonRetryable(error.message, errorTypes.providerRejection);
      if (error instanceof ProviderUncertainError)
        // The next attempt will ask the provider (lookup) rather than submit again.
        throw ApplicationFailure.retryable(error.message, errorTypes.providerUncertain);
      throw error;
    }
  }

  /**
   * One of the provider account's in-flight places, or a ProviderBusy failure: the job then waits
   * in our queue (the submit is retried in the background) instead of collecting the provider's 429s.
   */
  async function takeInFlightPlace(generationId: string, provider: ProviderName): Promise<void> {
    const cap = deps.inFlightCap?.(provider) ?? 0;
    if (cap <= 0 || (await takeProviderSlot(db, generationId, provider, cap))) return;
    throw ApplicationFailure.create({
      type: errorTypes.providerBusy,
      message: `provider ${provider} has ${cap} jobs in flight, its cap; this one waits for a place`,
      nextRetryDelay: '2 seconds',
    });
  }

  return { submit, submissionState: submissionStateOf };
}

/** Thrown inside submit when its claim was taken over before the create could leave. */
const claimLost = new Error('the submit claim was taken over');

/** Whether the provider has the job; a provider that cannot be asked now leaves its fate unknown (retried). */
async function lookUp(provider: Provider, token: string): ReturnType<Provider['lookup']> {
  try {
    return await provider.lookup(token);
  } catch (error) {
    throw ApplicationFailure.retryable(
      `An earlier submit may have reached the provider, which could not be asked: ${error instanceof Error ? error.message : String(error)}`,
      errorTypes.providerUncertain,
    );
  }
}

/** The job for the provider, built from the request and the catalog entry (a retired model still runs). */
function providerJob(start: GenerationStart, token: string, entry: CatalogEntry): ProviderJob {
  const options = resolveOptions(entry, start.input);
  const sizeBy = entry.output_size ? String(options[entry.output_size.by]) : '';
  const longEdgePx = (entry.output_size && ownValue(entry.output_size.long_edge_px, sizeBy)) ?? 1024;
  const prompt = typeof start.input.prompt === 'string' ? start.input.prompt : '';
  const images = Array.isArray(start.input.images) ? (start.input.images as string[]) : [];
  const target = entry.provider && {
    model: entry.provider.model,
    version: entry.provider.version,
    input: buildProviderInput(entry.provider, { prompt, images, options }),
    referenceFields: referenceImageFields(entry),
  };
  return {
    token,
    model: start.model,
    mediaType: start.mediaType,
    prompt,
    options,
    images,
    longEdgePx,
    target,
  };
}
