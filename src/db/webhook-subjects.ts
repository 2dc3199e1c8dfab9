import { sql } from 'slonik';

/**
 * What a webhook subscription is of (migration 0029): a generation (POST /v1/generations
 * `webhook`) or a batch (POST /v1/batches `webhook`). One delivery machine serves both; it is
 * keyed by the subject's id, whose prefix says which it is.
 */
export type WebhookSubjectKind = 'generation' | 'batch';

export const webhookSubjectKind = (subjectId: string): WebhookSubjectKind =>
  subjectId.startsWith('batch_') ? 'batch' : 'generation';

/** The subject's tables: its subscriptions, the column that names it (there and in attempts and turns), its own rows. */
export function webhookSubjectTables(subjectId: string) {
  return webhookSubjectKind(subjectId) === 'batch'
    ? {
        subscriptions: sql.identifier(['batch_webhooks']),
        key: sql.identifier(['batch_id']),
        owners: sql.identifier(['batches']),
      }
    : {
        subscriptions: sql.identifier(['generation_webhooks']),
        key: sql.identifier(['generation_id']),
        owners: sql.identifier(['generations']),
      };
}
