import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AdmitResult, GenerationProgress, Resolution } from './generation-types.js';

/** POST /v1/generations: answers once admission is decided and an accepted job handed over (at once, for a repeat). */
export const admitUpdate = defineUpdate<AdmitResult>('admit');
/** Support's decision on a generation that needs review. */
export const resolveUpdate = defineUpdate<GenerationProgress, [Resolution]>('resolve');
/** Where the generation stands, as the workflow sees it. */
export const progressQuery = defineQuery<GenerationProgress>('progress');
