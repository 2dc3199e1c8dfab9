import { ApplicationFailure, Context, heartbeat, sleep } from '@temporalio/activity';
import { randomBase62 } from '../ids.js';
import {
  claimSubmit,
  markCreateAnswered,
  markCreateSent,
  markNeedsReview,
  recordProviderJob,
  releaseSubmitClaim,
  submissionState,
} from '../db/provider-submissions.js';
import {
  claimOutputPrefix,
  completeGeneration,
  contentPrefixes,
  expireGeneration,
  type StoredOutput,
} from '../db/generation-results.js';
import { refundGeneration } from '../db/credits-repository.js';
import { releaseProviderSlot, takeProviderSlot } from '../db/provider-slots.js';
import { admitGeneration, entryToSubmit, lastQuotedEntry } from './admission.js';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import { resolveOptions } from '../catalog/pricing.js';
import {
  ProviderRejection,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
  type ProviderJob,
  type ProviderResult,
} from '../providers/provider.js';
import { jobReference, parseJobReference } from '../providers/job-reference.js';
import { buildProviderInput, type ProviderName } from '../catalog/provider-mapping.js';
import { copyResult } from '../providers/result-copy.js';
import { storeThumbnails } from './thumbnails.js';
import { referenceImageFields } from '../providers/reference-images.js';
import { PermanentError } from '../errors.js';
import type { GenerationError } from '../generation.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import {
  errorTypes,
  type Admission,
  type GenerationStart,
  type KeyClaim,
} from '../workflows/generation-types.js';
import type { GenerationActivities } from '../workflows/generation-activity-contract.js';
import type { ActivityDeps } from './activity-deps.js';

type GenerationActivityDeps = Pick<
  ActivityDeps,
  'db' | 'providerFor' | 'storage' | 'concurrencyLimit' | 'persistHeartbeatMs' | 'inFlightCap' | 'metrics'
>;

/**
 * The generation workflow's activities. Each is idempotent on the generation
 * id (never on the workflow run, which a support reset replaces): whatever
 * retries, crashes or resets happen, a generation is debited, submitted and
 * refunded at most once.
 */
export function createGenerationActivities(
  deps: GenerationActivityDeps,
): GenerationActivities<ProviderResult, StoredOutput> {
  const { db, storage } = deps;
  const metrics = deps.metrics ?? noGenerationMetrics;

  return {
    /** Concurrency slot, price quote, debit and the key's record in one transaction (run as a local activity). */
    async admit(start: GenerationStart, key?: KeyClaim): Promise<Admission> {
      return admitGeneration(db, start, deps.concurrencyLimit, key ?? null, metrics);
    },

    /**
     * Hands the job to the provider, once. The first attempt marks the
     * generation before sending; any later attempt (a retry, a crashed worker,
     * a reset) waits while that create may still be answered, then asks the
     * provider whether it has the job instead of sending it again, and gives
     * up as uncertain when the provider cannot tell.
     */
    async submit(start: GenerationStart): Promise<{ jobId: string }> {
      const quoted = lastQuotedEntry(start.model);
      // A first claim also marks the create as on its way (one round trip): if it does not leave
      // after all, releasing the claim clears the mark.
      const claim = await claimSubmit(db, start.generationId, quoted?.digest ?? null, createAnswerDeadlineMs);
      // Refunded already (support refunded it, then reset the workflow): it must never run unpaid.
      if (claim.refunded) throw settledFailure(start.generationId);
      if (claim.provider_job_id) return { jobId: claim.provider_job_id };
      const entry = entryToSubmit(start.model, claim, quoted);
      if (!entry) {
        // Admission checked the model was active; its entry has since become unreadable.
        if (claim.first) await releaseSubmitClaim(db, start.generationId);
        throw new PermanentError(`model ${start.model} has no readable catalog entry`);
      }
      const providerName = entry.provider?.name ?? 'simulated';
      let provider: Provider;
      try {
        provider = deps.providerFor(providerName);
      } catch (error) {
        // This worker cannot reach that provider (no credentials): nothing left us.
        if (claim.first) await releaseSubmitClaim(db, start.generationId);
        throw error;
      }
      const token = claim.provider_token ?? `tok_${start.generationId}`;
      if (!claim.first) {
        // An earlier attempt (the one the POST's deadline abandoned, on any worker) may still be
        // waiting for the provider's answer: wait for it (it records the job) rather than take its
        // silence for a loss.
        if (claim.awaiting_answer)
          throw ApplicationFailure.create({
            type: errorTypes.providerBusy,
            message: 'an earlier submit of this generation is still waiting for the provider to answer',
            nextRetryDelay: '1 second',
          });
        let found: Awaited<ReturnType<Provider['lookup']>>;
        try {
          found = await provider.lookup(token);
        } catch (error) {
          // An earlier attempt may have reached the provider: until it answers, the job's fate is unknown.
          throw ApplicationFailure.retryable(
            `An earlier submit may have reached the provider, which could not be asked: ${messageOf(error)}`,
            errorTypes.providerUncertain,
          );
        }
        if (found.found === true) {
          const jobId = jobReference(providerName, found.jobId);
          await recordProviderJob(db, start.generationId, jobId);
          return { jobId };
        }
        if (found.found === 'unknown') {
          throw ApplicationFailure.nonRetryable(
            'An earlier submit may have reached the provider, which cannot say.',
            errorTypes.providerUncertain,
          );
        }
        // The provider does not have it: sending it now is the first submission it sees.
      }
      let sent = false;
      try {
        const job = providerJob(start, token, entry);
        await takeInFlightPlace(start.generationId, providerName);
        if (!claim.first) await markCreateSent(db, start.generationId, createAnswerDeadlineMs);
        sent = true;
        const accepted = await provider.submit(job);
        const jobId = jobReference(providerName, accepted.jobId);
        await recordProviderJob(db, start.generationId, jobId);
        return { jobId };
      } catch (error) {
        // Nothing reached the provider, or it refused the job (a rejection seen by an attempt the POST
        // abandoned must reach the workflow: the next attempt sends again and hears it): the claim
        // and the in-flight place go, so the next attempt (or the horizon) knows.
        if (!sent || error instanceof ProviderTransientError || error instanceof ProviderRejection) {
          await releaseSubmitClaim(db, start.generationId);
          await releaseProviderSlot(db, start.generationId);
        } else {
          await markCreateAnswered(db, start.generationId);
        }
        if (error instanceof ProviderRejection)
          throw ApplicationFailure.nonRetryable(error.message, errorTypes.providerRejection);
        if (error instanceof ProviderUncertainError) {
          // The next attempt will ask the provider (lookup) rather than submit again.
          throw ApplicationFailure.retryable(error.message, errorTypes.providerUncertain);
        }
        throw error;
      }
    },

    /** Where submission stands when its horizon passes: a recorded job, or whether the provider may have one. */
    async submissionState(generationId: string) {
      return submissionState(db, generationId);
    },

    /**
     * Polls the provider until the job ends; heartbeats so a lost worker is noticed in seconds. A
     * synchronous provider makes its one call inside `status`, which can take a minute: the worker
     * says it is alive on a clock meanwhile (every 5 s, under the shortest heartbeat timeout of 10 s).
     */
    async waitForProvider(
      generation: { model: string; jobId: string; generationId?: string },
      pollIntervalMs: number,
    ): Promise<
      | { state: 'succeeded'; results: ProviderResult[] }
      | { state: 'failed'; message: string; rejected?: boolean }
    > {
      const { provider, jobId } = providerOfJob(generation.jobId);
      const context = Context.current();
      let polls = 0;
      let progress: number | null = null;
      const alive = setInterval(() => context.heartbeat({ polls, progress }), 5_000);
      try {
        for (;;) {
          const status = await provider.status(jobId);
          if (status.state !== 'running') {
            // The provider's job has ended: its in-flight place is free for the next one.
            if (generation.generationId) await releaseProviderSlot(db, generation.generationId);
            return status;
          }
          progress = status.progress ?? null;
          await sleep(pollIntervalMs);
          polls += 1;
          heartbeat({ polls, progress });
        }
      } catch (error) {
        if (error instanceof ProviderUncertainError)
          throw ApplicationFailure.nonRetryable(error.message, errorTypes.providerUncertain);
        throw error;
      } finally {
        clearInterval(alive);
      }
    },

    /** Asks the provider to stop a job we gave up on; a job it no longer has is fine. */
    async cancelJob(reference: string, generationId?: string): Promise<void> {
      const { provider, jobId } = providerOfJob(reference);
      await provider.cancel(jobId);
      if (generationId) await releaseProviderSlot(db, generationId);
    },

    /** Copies each result from the provider into our storage ("persistence recovery" is this activity's retries). */
    async persistResults(
      generation: { generationId: string; model: string; jobId: string; results: ProviderResult[] },
      retentionMs: number,
    ): Promise<{ expiresAt: string; outputs: StoredOutput[] }> {
      const { provider, jobId } = providerOfJob(generation.jobId);
      const outputs: StoredOutput[] = [];
      // Alive while it copies, on a clock rather than between results: one large video can take
      // longer to download than the heartbeat timeout, and would otherwise be retried forever.
      const context = Context.current();
      const alive = setInterval(
        () => context.heartbeat({ stored: outputs.length }),
        deps.persistHeartbeatMs ?? 30_000,
      );
      try {
        // One unguessable folder per generation, chosen once and kept for every later attempt.
        const { prefix, refunded } = await claimOutputPrefix(
          db,
          generation.generationId,
          `r${randomBase62(32)}`,
        );
        if (refunded) throw settledFailure(generation.generationId);
        for (const [index, result] of generation.results.entries())
          outputs.push(
            await copyResult(
              provider,
              { jobId, reference: generation.jobId, index, result },
              storage,
              prefix,
            ),
          );
        await storeThumbnails(storage, outputs);
        const completed = await completeGeneration(db, generation.generationId, outputs, retentionMs);
        if (!completed) {
          await storage.deletePrefix(prefix);
          throw settledFailure(generation.generationId);
        }
        if (completed.completedNow) metrics.succeeded(generation.model);
        return { expiresAt: completed.expiresAt, outputs };
      } finally {
        clearInterval(alive);
      }
    },

    /** Returns the debit and marks the generation failed; retried until it commits. */
    async refund(generationId: string, error: GenerationError): Promise<void> {
      const refunded = await refundGeneration(db, generationId, error);
      if (refunded.changed) metrics.failed(refunded.model, error.code, refunded.refundedCredits);
      await releaseProviderSlot(db, generationId);
    },

    async markNeedsReview(generationId: string, error: GenerationError): Promise<void> {
      const model = await markNeedsReview(db, generationId, error);
      if (model !== null) metrics.sentToReview(model);
    },

    /** Support resolved an uncertain submission with the provider's job id. */
    async recordProviderJob(generationId: string, jobId: string): Promise<void> {
      await recordProviderJob(db, generationId, jobId);
    },

    /** Deletes stored files and nulls input and output; id, status and credit figures stay. */
    async expireContent(generationId: string): Promise<void> {
      // Files first: once the record says content_expired, its URLs are already gone.
      for (const prefix of await contentPrefixes(db, generationId)) await storage.deletePrefix(prefix);
      await expireGeneration(db, generationId);
    },
  };

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

  /** The provider holding a recorded job, and its own id for it. */
  function providerOfJob(reference: string): { provider: Provider; jobId: string } {
    const { provider, jobId } = parseJobReference(reference);
    return { provider: deps.providerFor(provider), jobId };
  }

  /** The job for the provider, built from the request and the catalog entry (a retired model still runs). */
  function providerJob(start: GenerationStart, token: string, entry: CatalogEntry): ProviderJob {
    const options = resolveOptions(entry, start.input);
    const sizeBy = entry.output_size ? String(options[entry.output_size.by]) : '';
    const longEdgePx = entry.output_size?.long_edge_px[sizeBy] ?? 1024;
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
}

function settledFailure(generationId: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(
    `generation ${generationId} was refunded already; it is not run again`,
    errorTypes.generationSettled,
  );
}

/**
 * How long later attempts wait for a create that left and has not been answered: longer than any
 * adapter's own create deadline (20 s), after which its answer can no longer come.
 */
const createAnswerDeadlineMs = 60_000;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
