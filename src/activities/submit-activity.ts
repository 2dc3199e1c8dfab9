import { randomBase62 } from '../ids.js';
import { claimSubmit, keepSubmitClaim, submissionState } from '../db/provider-submissions.js';
import { leaveRoute } from '../db/route-attempts.js';
import { lastQuotedEntry } from './admission.js';
import { noGenerationMetrics } from '../observability/metrics.js';
import type { GenerationStart } from '../workflows/generation-types.js';
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
      return await submitHolding({
        deps: { ...deps, metrics },
        windowMs,
        start,
        attempt,
        claim,
        quoted,
        position,
      });
    } finally {
      clearInterval(renewal);
    }
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
