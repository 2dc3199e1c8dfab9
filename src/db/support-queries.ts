import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { GenerationStatus } from '../vocabulary/generation.js';
import { generationColumns, generationRow } from './generation-reads.js';

/** What the support CLI lists and looks up: generations across accounts, with their workflow and provider job. */

const supportRow = generationRow.extend({
  workflow_id: z.string().nullable(),
  provider_job_id: z.string().nullable(),
  updated_at: z.string(),
});
export type SupportGenerationRow = z.infer<typeof supportRow>;

/** For support: generations across accounts that need review, or have been queued longer than a while. */
export async function findGenerationsForSupport(
  db: CommonQueryMethods,
  filter: {
    accountId?: string;
    needsReview?: boolean;
    queuedOverMinutes?: number;
    statuses?: GenerationStatus[];
    limit: number;
  },
): Promise<readonly SupportGenerationRow[]> {
  const conditions = [sql.fragment`true`];
  if (filter.accountId) conditions.push(sql.fragment`account_id = ${filter.accountId}`);
  if (filter.needsReview) conditions.push(sql.fragment`needs_review`);
  if (filter.queuedOverMinutes !== undefined) {
    conditions.push(
      sql.fragment`status = 'queued' AND created_at < now() - ${sql.interval({ minutes: filter.queuedOverMinutes })}`,
    );
  }
  if (filter.statuses) conditions.push(sql.fragment`status = ANY(${sql.array(filter.statuses, 'text')})`);
  return db.any(sql.type(supportRow)`
    SELECT ${generationColumns}, workflow_id, provider_job_id, updated_at FROM generations
    WHERE ${sql.join(conditions, sql.fragment` AND `)} ORDER BY created_at DESC, id DESC LIMIT ${filter.limit}`);
}

export async function getGenerationForSupport(
  db: CommonQueryMethods,
  id: string,
): Promise<SupportGenerationRow | null> {
  return db.maybeOne(sql.type(supportRow)`
    SELECT ${generationColumns}, workflow_id, provider_job_id, updated_at FROM generations WHERE id = ${id}`);
}
