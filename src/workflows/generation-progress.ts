import { setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { GenerationStatus } from '../vocabulary/generation.js';
import type { GenerationProgress } from './generation-types.js';
import { GenerationStatus as GenerationStatusKey, NeedsReview } from './search-attributes.js';

/** A generation's progress as its workflow sees it, and the one way it moves on (`enter`). */
interface ProgressTracker {
  /** What the progress query answers: the same object, kept current. */
  progress: GenerationProgress;
  /**
   * Every step change: the step, the status and review flag operators search by, and the line the
   * Temporal UI shows for the run.
   */
  enter: (
    step: GenerationProgress['step'],
    status: GenerationStatus,
    details: string,
    needsReview?: boolean,
  ) => void;
  /**
   * A run that answered for an earlier generation holding its Idempotency-Key (see DebitOutcome): it
   * is no generation, so it drops the status it was indexed with and ends.
   */
  stepAside: (details: string) => void;
}

/**
 * `carried`: where a run continued from an earlier one of the generation stands (see
 * generation-retention.ts), with the status and review flag that run indexed (continue-as-new
 * carries the search attributes over).
 */
export function trackProgress(
  generationId: string,
  carried?: { progress: GenerationProgress; status: GenerationStatus; needsReview: boolean },
): ProgressTracker {
  // What is indexed: at start what the API set (queued, not needing review); upserted again only when it changes.
  const indexed: { status: GenerationStatus; needsReview: boolean } = carried
    ? { status: carried.status, needsReview: carried.needsReview }
    : { status: 'queued', needsReview: false };
  const progress: GenerationProgress = carried
    ? { ...carried.progress }
    : { generationId, step: 'admitting', providerJobId: null, expiresAt: null };
  return {
    progress,
    enter(step, status, details, needsReview = false) {
      progress.step = step;
      // Search attributes change with the status only (each upsert is a visibility write), not with every step.
      if (status !== indexed.status || needsReview !== indexed.needsReview) {
        upsertSearchAttributes([
          { key: GenerationStatusKey, value: status },
          { key: NeedsReview, value: needsReview },
        ]);
        indexed.status = status;
        indexed.needsReview = needsReview;
      }
      setCurrentDetails(details);
    },
    stepAside(details) {
      progress.step = 'key_held';
      upsertSearchAttributes([
        { key: GenerationStatusKey, value: null },
        { key: NeedsReview, value: null },
      ]);
      setCurrentDetails(details);
    },
  };
}
