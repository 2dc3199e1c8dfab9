import { condition, setHandler } from '@temporalio/workflow';
import type { generationEndings } from './generation-endings.js';
import { generationErrors } from './generation-errors.js';
import { resolveUpdate } from './generation-messages.js';
import type { trackProgress } from './generation-progress.js';
import type { generationSteps } from './generation-steps.js';
import type { GenerationStart, Resolution } from './generation-types.js';

/**
 * How long a generation in review waits in its active (pinned) run before it continues as its
 * review run on the current version (generation-retention.ts): support usually answers within
 * it, and a review that takes days does not hold an old version for days.
 */
export const defaultReviewHandOffMs = 10 * 60_000;

/**
 * Support's review of a generation whose provider acceptance is unknown: no speculative refund,
 * no second submission. Registers the resolve update (refused unless the generation is in review);
 * `decision()` waits for it and carries it out: refunded (null), or the provider's job to go on from.
 */
export function reviewRules(
  start: GenerationStart,
  steps: ReturnType<typeof generationSteps>,
  { progress, enter }: Pick<ReturnType<typeof trackProgress>, 'progress' | 'enter'>,
  fail: ReturnType<typeof generationEndings>['fail'],
) {
  let resolution: Resolution | undefined;
  setHandler(
    resolveUpdate,
    async (decision) => {
      resolution = decision;
      await condition(() => progress.step !== 'needs_review');
      return progress;
    },
    {
      validator: (decision: Resolution) => {
        if (progress.step !== 'needs_review')
          throw new Error(`generation is ${progress.step}, not waiting for review`);
        if (decision.action === 'succeed' && !decision.providerJobId)
          throw new Error('succeed needs providerJobId');
      },
    },
  );
  return {
    /** Marks the generation for review: its row (what the API and support read), then its search attributes. */
    async begin(): Promise<void> {
      await steps.markNeedsReview(start.generationId, generationErrors.submissionUnresolved);
      enter(
        'needs_review',
        'failed',
        'needs review: provider acceptance unknown; resolve with the support CLI',
        true,
      );
    },
    /**
     * Support's decision, carried out: null when it refunded; the provider's job id when it named
     * one (recorded); undefined when none came within `timeoutMs`.
     */
    async decision(timeoutMs?: number): Promise<string | null | undefined> {
      const decided = await (timeoutMs === undefined
        ? condition(() => resolution !== undefined).then(() => true)
        : condition(() => resolution !== undefined, timeoutMs));
      if (!decided) return undefined;
      const made = resolution!;
      resolution = undefined;
      if (made.action === 'refund') {
        await fail(generationErrors.refundedBySupport);
        return null;
      }
      await steps.recordProviderJob(start.generationId, made.providerJobId);
      return made.providerJobId;
    },
  };
}
