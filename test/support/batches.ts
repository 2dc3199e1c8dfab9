import { afterAll, beforeAll, expect, inject } from 'vitest';
import { sql } from 'slonik';
import { z } from 'zod';
import { loadConfig } from '../../src/config/service-config.js';
import { createLogger } from '../../src/process/logger.js';
import { wireBatchAdmission } from '../../src/worker/batch-admission.js';
import { bearer } from './api.js';
import { useGenerationStack, type GenerationStackOptions } from './stack.js';
import type { ApiService } from '../../src/api/service.js';
import type { DatabasePool } from '../../src/db/pool.js';

/**
 * The generation stack with batches wired in its worker (admission as the worker process wires
 * it), looking in PostgreSQL every `pollIntervalMs`, its slices `sliceMs` long (5 s unless told).
 */
export function useBatchStack(
  options: GenerationStackOptions & { pollIntervalMs?: number; sliceMs?: number } = {},
) {
  const stack = useGenerationStack(options);
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const config = loadConfig({
      DATABASE_URL: stack.db.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      DATABASE_POOL_SIZE: '5',
      ...stack.worker.apiEnv,
      ...options.apiEnv,
    });
    const wired = await wireBatchAdmission(config, stack.db.pool, createLogger('batches-test', 'silent'));
    stack.worker.deps.batchLines = wired.lines;
    stack.worker.deps.batchTiming = {
      pollIntervalMs: options.pollIntervalMs ?? 100,
      sliceMs: options.sliceMs ?? 5_000,
    };
    close = () => wired.close();
  });
  afterAll(async () => {
    await close?.();
  });
  return stack;
}

/** POST /v1/batches as JSON. */
export function postBatch(api: ApiService, key: string, body: unknown, idempotencyKey?: string) {
  return api.app.inject({
    method: 'POST',
    url: '/v1/batches',
    headers: {
      ...bearer(key),
      'content-type': 'application/json',
      ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
    },
    payload: JSON.stringify(body),
  });
}

/** GET /v1/batches/{id} until `done` holds. */
export async function waitForBatch(
  api: ApiService,
  key: string,
  id: string,
  done: (batch: Record<string, any>) => boolean = (b) =>
    ['completed', 'canceled', 'expired'].includes(b.status),
  timeoutMs = 120_000,
): Promise<Record<string, any>> {
  let batch: Record<string, any> = {};
  const readBatch = async () => {
    const response = await api.app.inject({ method: 'GET', url: `/v1/batches/${id}`, headers: bearer(key) });
    batch = response.json();
    return done(batch);
  };
  try {
    await expect.poll(readBatch, { timeout: timeoutMs, interval: 200 }).toBe(true);
  } catch (error) {
    throw new Error(`batch ${id} did not get there: ${JSON.stringify(batch)}`, { cause: error });
  }
  return batch;
}

const chargesRow = z.object({
  generations: z.coerce.number(),
  lines_with_generation: z.coerce.number(),
  debits: z.coerce.number(),
  refunds: z.coerce.number(),
  net: z.coerce.number(),
  most_per_line: z.coerce.number(),
});

/** A batch's generations and their ledger rows: how many, and the credits they moved. */
export async function batchCharges(pool: DatabasePool, batchId: string) {
  return pool.one(sql.type(chargesRow)`
    SELECT (SELECT count(*) FROM generations WHERE batch_id = ${batchId}) AS generations,
           (SELECT count(*) FROM batch_lines WHERE batch_id = ${batchId} AND generation_id IS NOT NULL) AS lines_with_generation,
           (SELECT count(*) FROM credit_ledger c JOIN generations g ON g.id = c.generation_id
              WHERE g.batch_id = ${batchId} AND c.kind = 'debit') AS debits,
           (SELECT count(*) FROM credit_ledger c JOIN generations g ON g.id = c.generation_id
              WHERE g.batch_id = ${batchId} AND c.kind = 'refund') AS refunds,
           (SELECT coalesce(sum(c.subscription_delta + c.one_time_delta), 0) FROM credit_ledger c
              JOIN generations g ON g.id = c.generation_id WHERE g.batch_id = ${batchId}) AS net,
           (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM generations WHERE batch_id = ${batchId}
              GROUP BY custom_id) per_line) AS most_per_line`);
}

/** `n` request lines (lumen-pro at 1K, the cheapest picture to draw), custom_id `line-<i>`. */
export const batchLines = (n: number, prompt: (i: number) => string = (i) => `batch line ${i}`) =>
  Array.from({ length: n }, (_, i) => ({
    custom_id: `line-${i}`,
    model: 'lumen-pro',
    prompt: prompt(i),
    aspect_ratio: '1:1',
  }));

const balanceRow = z.object({ credits: z.coerce.number() });

/** The account's balance, from its rows. */
export const balanceOf = (pool: DatabasePool, accountId: string) =>
  pool.oneFirst(sql.type(balanceRow)`
    SELECT coalesce(sum(subscription_credits + one_time_credits), 0) AS credits FROM credit_balances
    WHERE account_id = ${accountId}`);
