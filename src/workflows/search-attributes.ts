import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes on every generation workflow, so the Temporal UI
 * answers "what is stuck", "what needs review" and "whose is it".
 */
export const GenerationStatus = defineSearchAttributeKey('GenerationStatus', SearchAttributeType.KEYWORD);
export const AccountId = defineSearchAttributeKey('AccountId', SearchAttributeType.KEYWORD);
export const Model = defineSearchAttributeKey('Model', SearchAttributeType.KEYWORD);
export const NeedsReview = defineSearchAttributeKey('NeedsReview', SearchAttributeType.BOOL);

export const customSearchAttributes = [GenerationStatus, AccountId, Model, NeedsReview];
