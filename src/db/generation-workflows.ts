import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

const row = z.object({ account_id: z.string(), workflow_id: z.string().nullable() });

/**
 * The workflow that runs a generation, and whose the generation is: the account's own only when
 * `accountId` is given (support asks with null). The workflow is null for a request that never became a job.
 */
export async function workflowOfGeneration(
  db: CommonQueryMethods,
  id: string,
  accountId: string | null,
): Promise<{ accountId: string; workflowId: string | null } | null> {
  const found = await db.maybeOne(sql.type(row)`
    SELECT account_id, workflow_id FROM generations
    WHERE id = ${id} ${accountId === null ? sql.fragment`` : sql.fragment`AND account_id = ${accountId}`}`);
  return found && { accountId: found.account_id, workflowId: found.workflow_id };
}

const waitRow = z.object({
  status: z.string(),
  needs_review: z.boolean(),
  provider_job_id: z.string().nullable(),
  workflow_id: z.string().nullable(),
});

/**
 * What a provider's push for a generation is checked against (the provider-webhook route): where
 * the generation stands, the job it recorded, and its workflow. Null when there is no such generation.
 */
export async function providerWaitOf(
  db: CommonQueryMethods,
  id: string,
): Promise<z.infer<typeof waitRow> | null> {
  return db.maybeOne(sql.type(waitRow)`
    SELECT status, needs_review, provider_job_id, workflow_id FROM generations WHERE id = ${id}`);
}
