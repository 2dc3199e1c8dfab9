import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes on every generation workflow, so the Temporal UI
 * answers "what is stuck", "what needs review" and "whose is it".
 */
export const GenerationStatus = defineSearchAttributeKey('GenerationStatus', SearchAttributeType.KEYWORD);
export const AccountId = defineSearchAttributeKey('AccountId', SearchAttributeType.KEYWORD);
export const Model = defineSearchAttributeKey('Model', SearchAttributeType.KEYWORD);
export const NeedsReview = defineSearchAttributeKey('NeedsReview', SearchAttributeType.BOOL);
/**
 * The generation id (gen_…) a customer quotes to support: workflow ids are hashes of the API key
 * and Idempotency-Key, so this is how `GenerationId = 'gen_…'` finds the workflow. Set at start.
 */
export const GenerationId = defineSearchAttributeKey('GenerationId', SearchAttributeType.KEYWORD);

export const customSearchAttributes = [GenerationStatus, AccountId, Model, NeedsReview, GenerationId];
