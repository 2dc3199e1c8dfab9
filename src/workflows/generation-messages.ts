import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CancelOutcome } from './generation-cancel.js';
import type { AdmitResult, GenerationProgress, ProviderJobEnded, Resolution } from './generation-types.js';

/** POST /v1/generations: answers once the debit is decided and an accepted job handed over (at once, for a repeat). */
export const admitUpdate = defineUpdate<AdmitResult>('admit');
/** Support's decision on a generation that needs review. */
export const resolveUpdate = defineUpdate<GenerationProgress, [Resolution]>('resolve');
/** A client's, support's or an operator's cancel: the workflow decides (see cancelRules). */
export const cancelUpdate = defineUpdate<CancelOutcome, [generationId: string]>('cancel');
/** Where the generation stands, as the workflow sees it. */
export const progressQuery = defineQuery<GenerationProgress>('progress');
/**
 * The provider says the job ended (its verified webhook, or the simulated provider): the waiting
 * generation reads what it came to now rather than at its next fallback read. A push for another
 * generation or job, or one that comes late, changes nothing.
 */
export const providerJobEndedSignal = defineSignal<[ProviderJobEnded]>('providerJobEnded');
