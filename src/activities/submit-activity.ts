import { randomBase62 } from '../ids.js';
import { claimSubmit, keepSubmitClaim, submissionState } from '../db/provider-submissions.js';
import { leaveRoute } from '../db/route-attempts.js';
import { entryToSubmit, lastQuotedEntry } from './admission.js';
import { parseJobReference } from '../providers/job-reference.js';
import type { CatalogEntry } from '../catalog/catalog-entry.js';
import type { Provider } from '../providers/provider.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { GenerationStart, ProviderWaitPlan, SubmittedJob } from '../workflows/generation-types.js';
import type { GenerationActivities } from '../workflows/generation-activity-contract.js';
import type { ActivityDeps } from './activity-deps.js';
import { providerBusy, routeNotAccepted, settledFailure } from './failures.js';
import { submitHolding } from './submit-holding.js';

type SubmitDeps = Pick<
  ActivityDeps,
  | 'db'
  | 'providerFor'
  | 'inFlightCap'
  | 'batchProviderShare'
  | 'submitClaimWindowMs'
  | 'metrics'
  | 'providerWebhookBaseUrl'
  | 'fallbackReadIntervalMs'
>;

/** How long a model's job runs when its catalog entry does not say (expected_run_seconds). */
const defaultRunSeconds = { image: 20, video: 180 };
/** The fallback reads' interval with a push expected (PROVIDER_FALLBACK_READ_INTERVAL_MS). */
const defaultFallbackReadMs = 30_000;
/** The most the first fallback read waits beyond the model's expected run time for the push. */
const pushGraceMs = 10_000;

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
  async function submit(start: GenerationStart, position = 0): Promise<SubmittedJob> {
    const { generationId } = start;
    const attempt = `att_${randomBase62(16)}`;
    const quoted = lastQuotedEntry(start.model);
    const claim = await claimSubmit(db, generationId, attempt, quoted?.digest ?? null, windowMs, position);
    // Refunded already (support refunded it, then reset the workflow): it must never run unpaid.
    if (claim.refunded) throw settledFailure(generationId);
    const submitted = (jobId: string): SubmittedJob => ({
      jobId,
      wait: waitPlan(jobId, entryToSubmit(start.model, claim, quoted), start.mediaType),
    });
    if (claim.provider_job_id) return submitted(claim.provider_job_id);
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
      const { jobId } = await submitHolding({
        deps: { ...deps, metrics },
        windowMs,
        start,
        attempt,
        claim,
        quoted,
        position,
      });
      return submitted(jobId);
    } finally {
      clearInterval(renewal);
    }
  }

  /**
   * How the wait reads a submitted job: a push is expected when its provider pushes every job's
   * end (the simulated provider) or was sent our webhook URL with the create (fal, Replicate with
   * PROVIDER_WEBHOOK_BASE_URL); then the first fallback read comes after the model's expected run
   * time and a grace, the next every fallback interval.
   */
  function waitPlan(
    jobId: string,
    entry: CatalogEntry | null,
    mediaType: 'image' | 'video',
  ): ProviderWaitPlan {
    const everyMs = deps.fallbackReadIntervalMs ?? defaultFallbackReadMs;
    let provider: Provider | undefined;
    try {
      provider = deps.providerFor(parseJobReference(jobId).provider);
    } catch {
      // A provider this worker has no credentials for: its job is read at the poll interval.
    }
    const push =
      provider?.pushesWithoutUrl === true || (provider?.pushes === true && !!deps.providerWebhookBaseUrl);
    const runMs =
      entry?.expected_run_seconds !== undefined
        ? entry.expected_run_seconds * 1000
        : (provider?.expectedRunMs ?? defaultRunSeconds[entry?.media_type ?? mediaType] * 1000);
    return {
      push,
      firstReadMs: Math.round(runMs) + Math.min(pushGraceMs, everyMs),
      everyMs,
      // A synchronous provider's read is its call, which lasts as long as the image takes.
      shortReads: provider !== undefined && provider.submitsLocally !== true,
    };
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
