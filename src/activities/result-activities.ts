import { Context } from '@temporalio/activity';
import { randomBase62 } from '../vocabulary/ids.js';
import {
  claimOutputPrefix,
  completeGeneration,
  contentPrefixes,
  discardablePrefixes,
  discardGeneration,
  expireGeneration,
  type StoredOutput,
} from '../db/generation-results.js';
import type { ProviderResult } from '../providers/provider.js';
import { parseJobReference } from '../providers/job-reference.js';
import { copyResult } from '../providers/result-copy.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { GenerationActivities } from '../workflows/contracts/generation.js';
import type { ActivityDeps } from './activity-deps.js';
import { settledFailure } from './failures.js';

type ResultDeps = Pick<ActivityDeps, 'db' | 'providerFor' | 'storage' | 'persistHeartbeatMs' | 'metrics'>;

/** A generation's files in our storage: copied in from the provider, and deleted when their time is up. */
export function createResultActivities(
  deps: ResultDeps,
): Pick<
  GenerationActivities<ProviderResult, StoredOutput>,
  'persistResults' | 'expireContent' | 'discardContent'
> {
  const { db, storage } = deps;
  const metrics = deps.metrics ?? noGenerationMetrics;

  /**
   * Copies each result from the provider into our storage ("persistence recovery" is this
   * activity's retries) and marks the generation succeeded. The gallery's thumbnails are not the
   * customer's result: its images are recorded as pending, and a sweep makes them (thumbnailsWorkflow). A run that finds the generation
   * completed already (an earlier run died before it reported) answers with what that run stored,
   * fetching nothing: an expired provider URL must not turn a delivered result into a failure.
   */
  async function persistResults(
    generation: { generationId: string; model: string; jobId: string; results: ProviderResult[] },
    retentionMs: number,
  ): Promise<{ expiresAt: string; outputs: StoredOutput[] }> {
    const outputs: StoredOutput[] = [];
    // Alive while it copies, on a clock rather than between results: one large video can take
    // longer to download than the heartbeat timeout, and would otherwise be retried forever.
    const context = Context.current();
    const alive = setInterval(
      () => context.heartbeat({ stored: outputs.length }),
      deps.persistHeartbeatMs ?? 10_000,
    );
    try {
      // One unguessable folder per generation, chosen once and kept for every later attempt.
      const claimed = await claimOutputPrefix(db, generation.generationId, `r${randomBase62(32)}`);
      if (claimed.completed) return claimed.completed;
      if (claimed.refunded) throw settledFailure(generation.generationId);
      const { provider, jobId } = parseJobReference(generation.jobId);
      for (const [index, result] of generation.results.entries())
        outputs.push(
          await copyResult(
            deps.providerFor(provider),
            { jobId, reference: generation.jobId, index, result },
            storage,
            claimed.prefix,
          ),
        );
      const completed = await completeGeneration(db, generation.generationId, outputs, retentionMs);
      if (!completed) {
        await storage.deletePrefix(claimed.prefix);
        throw settledFailure(generation.generationId);
      }
      if (completed.completedNow) {
        metrics.succeeded(generation.model);
        metrics.served(generation.model, provider);
      }
      return { expiresAt: completed.expiresAt, outputs };
    } finally {
      clearInterval(alive);
    }
  }

  /** Deletes stored files and nulls input and output; id, status and credit figures stay. */
  async function expireContent(generationId: string): Promise<void> {
    // Files first: once the record says content_expired, its URLs are already gone.
    for (const prefix of await contentPrefixes(db, generationId)) await storage.deletePrefix(prefix);
    await expireGeneration(db, generationId);
  }

  /**
   * A generation that ended without success (failed and refunded, rejected) keeps no files: its
   * inline inputs and any partial outputs are deleted, and its input and output nulled, as at
   * expiry. Retried until done. Nothing of a generation that succeeded, or is in review, is touched.
   */
  async function discardContent(generationId: string): Promise<void> {
    const prefixes = await discardablePrefixes(db, generationId);
    if (!prefixes?.length) return;
    for (const prefix of prefixes) await storage.deletePrefix(prefix);
    await discardGeneration(db, generationId);
  }

  return { persistResults, expireContent, discardContent };
}
