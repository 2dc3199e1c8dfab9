import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { GenerationError } from '../vocabulary/generation.js';

const balanceRow = z.object({ subscription_credits: z.number(), one_time_credits: z.number() });

/** The spec's Credit balance object. */
export interface CreditBalance {
  credits: number;
  subscription_credits: number;
  one_time_credits: number;
}

export async function getBalance(db: CommonQueryMethods, accountId: string): Promise<CreditBalance> {
  const row = await db.maybeOne(sql.type(balanceRow)`
    SELECT subscription_credits, one_time_credits FROM credit_balances WHERE account_id = ${accountId}`);
  const subscription = row?.subscription_credits ?? 0;
  const oneTime = row?.one_time_credits ?? 0;
  return { credits: subscription + oneTime, subscription_credits: subscription, one_time_credits: oneTime };
}

export type CreditPool = 'subscription' | 'one_time';

/** Adds credits to one pool; balance and ledger change in one transaction. */
export async function grantCredits(
  db: CommonQueryMethods,
  input: { accountId: string; pool: CreditPool; amount: number; reason: string },
): Promise<CreditBalance> {
  if (!Number.isInteger(input.amount) || input.amount <= 0)
    throw new RangeError('amount must be a positive integer');
  const subscription = input.pool === 'subscription' ? input.amount : 0;
  const oneTime = input.pool === 'one_time' ? input.amount : 0;
  return db.transaction(async (tx) => {
    await tx.query(sql.unsafe`
      INSERT INTO credit_balances (account_id, subscription_credits, one_time_credits)
      VALUES (${input.accountId}, ${subscription}, ${oneTime})
      ON CONFLICT (account_id) DO UPDATE SET
        subscription_credits = credit_balances.subscription_credits + EXCLUDED.subscription_credits,
        one_time_credits = credit_balances.one_time_credits + EXCLUDED.one_time_credits,
        updated_at = now()`);
    await tx.query(sql.unsafe`
      INSERT INTO credit_ledger (account_id, kind, subscription_delta, one_time_delta, reason)
      VALUES (${input.accountId}, 'grant', ${subscription}, ${oneTime}, ${input.reason})`);
    return getBalance(tx, input.accountId);
  });
}

/** What a refund changed: nothing (done before, or the generation succeeded: never refunded), or the generation ended failed, with the credits returned if it had a debit. */
type RefundOutcome = { changed: false } | { changed: true; model: string; refundedCredits: number | null };

const refundEndedRow = z.object({ model: z.string(), changed: z.boolean() });

const refundDebitRow = z.object({
  id: z.number(),
  account_id: z.string(),
  subscription_delta: z.number(),
  one_time_delta: z.number(),
});

const refundBeforeRow = z.object({ status: z.string(), needs_review: z.boolean() });

/**
 * Returns a generation's debit, once: ledger row, balances (to the pools it
 * came from) and the projection (failed, credits_refunded) in one
 * transaction. `credits` keeps the original debit. Refunding twice is a no-op, record included,
 * and says so (`changed: false`), so that the caller counts the outcome once. A generation that
 * succeeded is never refunded (nor failed): that too is a no-op, and the database refuses it
 * anyway (migration 0013).
 */
export async function refundGeneration(
  db: CommonQueryMethods,
  generationId: string,
  error: GenerationError,
): Promise<RefundOutcome> {
  return db.transaction(async (tx): Promise<RefundOutcome> => {
    // The row first, locked: a success committing meanwhile is seen, and wins.
    const before = await tx.maybeOne(sql.type(refundBeforeRow)`
      SELECT status, needs_review FROM generations WHERE id = ${generationId} FOR UPDATE`);
    if (before?.status === 'succeeded') return { changed: false };
    const debit = await tx.maybeOne(sql.type(refundDebitRow)`
      SELECT id, account_id, subscription_delta, one_time_delta FROM credit_ledger
      WHERE generation_id = ${generationId} AND kind = 'debit'`);
    const refunded = await tx.exists(
      sql.unsafe`SELECT 1 FROM credit_ledger WHERE generation_id = ${generationId} AND kind = 'refund'`,
    );
    // Refunded before (a retry, a support reset): the record keeps the outcome it was refunded with.
    if (refunded) return { changed: false };
    // Ended failed with its debit kept (endGenerationCharged: a cancel stopped a job the provider had
    // started and bills). That is final: a support reset re-running the story, which no longer knows
    // a cancel was asked, must not refund it. Only a generation in review may still be refunded.
    if (debit && before?.status === 'failed' && !before.needs_review) return { changed: false };
    if (debit) {
      await tx.query(sql.unsafe`
        UPDATE credit_balances SET subscription_credits = subscription_credits + ${-debit.subscription_delta},
          one_time_credits = one_time_credits + ${-debit.one_time_delta}, updated_at = now()
        WHERE account_id = ${debit.account_id}`);
      await tx.query(sql.unsafe`
        INSERT INTO credit_ledger (account_id, kind, generation_id, refund_of, subscription_delta, one_time_delta, reason)
        VALUES (${debit.account_id}, 'refund', ${generationId}, ${debit.id}, ${-debit.subscription_delta}, ${-debit.one_time_delta}, ${error.code})`);
    }
    // Without a debit there is no refund row to tell a retry: the row's state before tells it.
    const ended = await tx.maybeOne(sql.type(refundEndedRow)`
      UPDATE generations g SET status = 'failed', credits_refunded = ${debit !== null}, error = ${sql.jsonb(error as never)},
        needs_review = false, completed_at = COALESCE(g.completed_at, now()), updated_at = now()
      FROM (SELECT id, status, needs_review FROM generations WHERE id = ${generationId} FOR UPDATE) before
      WHERE g.id = before.id
      RETURNING g.model, (before.status <> 'failed' OR before.needs_review) AS changed`);
    if (!ended || (!ended.changed && !debit)) return { changed: false };
    const refundedCredits = debit ? -(debit.subscription_delta + debit.one_time_delta) : null;
    return { changed: true, model: ended.model, refundedCredits };
  });
}

const endGenerationChargedRow = z.object({ model: z.string() });

/**
 * Ends a generation failed with its debit kept: nothing is refunded, `credits_refunded` stays
 * false. For a client's cancel that stopped a job the provider had already started (the provider
 * bills the run). Once only: a generation no longer queued (succeeded, refunded, ended before) is
 * left as it is, and the answer says nothing changed.
 */
export async function endGenerationCharged(
  db: CommonQueryMethods,
  generationId: string,
  error: GenerationError,
): Promise<{ changed: false } | { changed: true; model: string }> {
  const ended = await db.maybeOne(sql.type(endGenerationChargedRow)`
    UPDATE generations SET status = 'failed', error = ${sql.jsonb(error as never)}, needs_review = false,
      completed_at = COALESCE(completed_at, now()), updated_at = now()
    WHERE id = ${generationId} AND status = 'queued' AND NOT credits_refunded
    RETURNING model`);
  return ended ? { changed: true, model: ended.model } : { changed: false };
}
