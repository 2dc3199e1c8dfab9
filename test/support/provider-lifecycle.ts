import type { Client } from '@temporalio/client';
import { sql } from 'slonik';
import { expect } from 'vitest';
import { z } from 'zod';
import type { ApiService } from '../../src/api/service.js';
import type { DatabasePool } from '../../src/db/pool.js';
import { NeedsReview } from '../../src/workflows/search-attributes.js';
import { bearer } from './api.js';
import { createGeneration, pollGeneration } from './generations.js';
import { workflowIdOf } from './ledger.js';
import { chainHistory } from './workflow-runs.js';

/**
 * The scaffolding of the provider lifecycle tests (fal, Replicate: the real API, workflow and
 * worker against a local fake of the provider): one account's calls through the API. `on` names the
 * API and the account's key, asked at each call (a suite's beforeAll makes them).
 */
export function accountCalls(on: () => { api: ApiService; key: string }) {
  /** Every generation `post` made, oldest first (for the look for a secret at the end). */
  const made: string[] = [];
  return {
    made,
    /** GET /v1/credits: the account's balance. */
    balance: async () =>
      (await on().api.app.inject({ method: 'GET', url: '/v1/credits', headers: bearer(on().key) })).json()
        .credits as number,
    /** POST /v1/generations (to another API with `api`) → 202; the Generation in its body. */
    post: async (body: Record<string, unknown>, api: ApiService = on().api) => {
      const response = await createGeneration(api, on().key, body);
      expect(response.statusCode, response.body).toBe(202);
      const generation = response.json<Record<string, any>>();
      made.push(generation.id as string);
      return generation;
    },
    /** The generation once it is no longer queued. */
    finished: (id: string, timeoutMs = 30_000) =>
      pollGeneration(on().api, on().key, id, (g) => g.status !== 'queued', timeoutMs),
  };
}

/** What a failed and refunded generation matches (toMatchObject): its error's code, and message if given. */
export const refundedFailure = (code: string, message?: string) => ({
  status: 'failed',
  credits_refunded: true,
  error: message === undefined ? { code } : { code, message },
});

/** A result file that expired at the provider before it was copied: never retried, refunded. */
export const resultCopyFailed = {
  ...refundedFailure(
    'generation_failed',
    'The result could not be copied from the provider. The credits were refunded.',
  ),
  output: null,
};

/** Waits until the generation's workflow is flagged for review (its NeedsReview search attribute). */
export async function expectFlaggedForReview(
  client: Client,
  pool: DatabasePool,
  generationId: string,
): Promise<void> {
  const handle = client.workflow.getHandle(await workflowIdOf(pool, generationId));
  await expect.poll(async () => (await handle.describe()).typedSearchAttributes.get(NeedsReview)).toBe(true);
}

/**
 * A generation's workflow history (every run) as text with its payloads decoded, so that a string
 * inside them can be searched for: serialized, a history's payload bytes are base64.
 */
export async function decodedHistory(client: Client, pool: DatabasePool, generationId: string) {
  const history = await chainHistory(client, await workflowIdOf(pool, generationId));
  return JSON.stringify(JSON.parse(JSON.stringify(history)), (key, item: unknown) =>
    key === 'data' && typeof item === 'string' ? Buffer.from(item, 'base64').toString('utf8') : item,
  );
}

/**
 * Where `secret` (a provider's credential) is kept among these generations' rows, their workflow
 * histories (payloads decoded) and the API's request log: [] when nowhere.
 */
export async function placesHolding(
  secret: string,
  { pool, client, generationIds }: { pool: DatabasePool; client: Client; generationIds: string[] },
): Promise<string[]> {
  const found: string[] = [];
  for (const id of generationIds) {
    const row = await pool.oneFirst(sql.type(z.object({ row: z.string() }))`
      SELECT row_to_json(g)::text AS row FROM generations g WHERE id = ${id}`);
    if (row.includes(secret)) found.push(`the row of ${id}`);
    if ((await decodedHistory(client, pool, id)).includes(secret)) found.push(`the history of ${id}`);
  }
  const log = await pool.oneFirst(sql.type(z.object({ log: z.string().nullable() }))`
    SELECT string_agg(row_to_json(l)::text, ' ') AS log FROM api_request_log l`);
  if ((log ?? '').includes(secret)) found.push('api_request_log');
  return found;
}
