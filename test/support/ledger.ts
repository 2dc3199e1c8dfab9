import { sql } from 'slonik';
import { z } from 'zod';
import type { DatabasePool } from '../../src/db/pool.js';

/** The ledger rows of one generation, and what the simulated provider saw of it. */
export async function chargesOf(pool: DatabasePool, generationId: string) {
  const rows = await pool.any(sql.type(
    z.object({ kind: z.string(), subscription_delta: z.number(), one_time_delta: z.number() }),
  )`
    SELECT kind, subscription_delta, one_time_delta FROM credit_ledger WHERE generation_id = ${generationId} ORDER BY id`);
  const submissions = await pool.maybeOneFirst(sql.type(z.object({ submissions: z.number() }))`
    SELECT submissions FROM sim_provider_jobs WHERE token = ${`tok_${generationId}`}`);
  return {
    debits: rows.filter((r) => r.kind === 'debit').length,
    refunds: rows.filter((r) => r.kind === 'refund').length,
    net: rows.reduce((n, r) => n + r.subscription_delta + r.one_time_delta, 0),
    submissions: submissions ?? 0,
  };
}

export async function workflowIdOf(pool: DatabasePool, generationId: string): Promise<string> {
  return pool.oneFirst(
    sql.type(
      z.object({ workflow_id: z.string() }),
    )`SELECT workflow_id FROM generations WHERE id = ${generationId}`,
  );
}

export async function providerJobIdOf(pool: DatabasePool, generationId: string): Promise<string> {
  return pool.oneFirst(
    sql.type(
      z.object({ job_id: z.string() }),
    )`SELECT job_id FROM sim_provider_jobs WHERE token = ${`tok_${generationId}`}`,
  );
}

/** The gallery rows a generation's stored images made in its account. */
export async function galleryOf(pool: DatabasePool, generationId: string) {
  return pool.any(sql.type(
    z.object({ account_id: z.string(), url: z.string(), width: z.number(), height: z.number() }),
  )`
    SELECT account_id, url, width, height FROM gallery_images WHERE generation_id = ${generationId} ORDER BY id`);
}
