import { Context } from '@temporalio/activity';
import type { ProviderName } from '../catalog/provider-mapping.js';
import { markNeedsReview, resumeWithProviderJob } from '../db/provider-submissions.js';
import type { StoredOutput } from '../db/generation-results.js';
import { endGenerationCharged, refundGeneration } from '../db/credits-repository.js';
import { releaseProviderSlot } from '../db/provider-slots.js';
import { settleDebit } from './debit.js';
import { ProviderUncertainError, type Provider, type ProviderResult } from '../providers/provider.js';
import { parseJobReference } from '../providers/job-reference.js';
import type { GenerationError } from '../vocabulary/generation.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { DebitOutcome, GenerationStart, KeyClaim } from '../workflows/generation-types.js';
import type { GenerationActivities } from '../workflows/contracts/generation.js';
import type { ActivityDeps } from './activity-deps.js';
import { providerUncertain } from './failures.js';
import { createStagingActivities } from './image-staging.js';
import { createSubmitActivities } from './submit-activity.js';
import { createResultActivities } from './result-activities.js';

type GenerationActivityDeps = Pick<
  ActivityDeps,
  | 'db'
  | 'providerFor'
  | 'storage'
  | 'concurrencyLimit'
  | 'persistHeartbeatMs'
  | 'inFlightCap'
  | 'metrics'
  | 'referenceImageFetch'
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
  const { db } = deps;
  const metrics = deps.metrics ?? noGenerationMetrics;

  return {
    /** Concurrency slot, price quote, debit and the key's record in one transaction (run as a local activity). */
    async debit(start: GenerationStart, key?: KeyClaim): Promise<DebitOutcome> {
      return settleDebit(db, start, deps.concurrencyLimit, key ?? null, metrics);
    },

    ...createStagingActivities(deps),

    ...createSubmitActivities(deps),

    /**
     * One read of the job at the provider. A synchronous provider makes its one call inside
     * `status`, which can take minutes: the worker says it is alive on a clock meanwhile (every
     * 5 s, under the step's heartbeat timeout of 15 s); a short read runs as a local activity, which
     * has no heartbeat. An ended job frees its in-flight place.
     */
    async readProviderJob(generation, reason) {
      const { provider, jobId, name } = providerOfJob(generation.jobId);
      const context = Context.current();
      const alive = context.info.isLocal ? undefined : setInterval(() => context.heartbeat(), 5_000);
      try {
        const status = await provider.status(jobId, reason);
        if (status.state === 'running') return { state: 'running' };
        // A fallback read found the end a push should have brought (lost, late, or never sent).
        if (reason === 'fallback') metrics.fallbackReadFoundEnd(name);
        // The provider's job has ended: its in-flight place is free for the next one.
        if (generation.generationId) await releaseProviderSlot(db, generation.generationId);
        return status;
      } catch (error) {
        if (error instanceof ProviderUncertainError)
          throw providerUncertain(error.message, { retryable: false });
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

    ...createResultActivities(deps),

    /** Returns the debit and marks the generation failed; retried until it commits. */
    async refund(generationId: string, error: GenerationError): Promise<void> {
      const refunded = await refundGeneration(db, generationId, error);
      if (refunded.changed) metrics.failed(refunded.model, error.code, refunded.refundedCredits);
      await releaseProviderSlot(db, generationId);
    },

    /** Failed with the debit kept (a cancel stopped a job the provider had started and bills); once. */
    async endCharged(generationId: string, error: GenerationError): Promise<void> {
      const ended = await endGenerationCharged(db, generationId, error);
      if (ended.changed) metrics.failed(ended.model, error.code, null);
      await releaseProviderSlot(db, generationId);
    },

    async markNeedsReview(generationId: string, error: GenerationError): Promise<void> {
      const model = await markNeedsReview(db, generationId, error);
      if (model !== null) metrics.sentToReview(model);
    },

    /** Support resolved an uncertain submission with the provider's job id: out of review, queued again. */
    async recordProviderJob(generationId: string, jobId: string): Promise<void> {
      await resumeWithProviderJob(db, generationId, jobId);
    },
  };

  /** The provider holding a recorded job, and its own id for it. */
  function providerOfJob(reference: string): { provider: Provider; jobId: string; name: ProviderName } {
    const { provider, jobId } = parseJobReference(reference);
    return { provider: deps.providerFor(provider), jobId, name: provider };
  }
}
