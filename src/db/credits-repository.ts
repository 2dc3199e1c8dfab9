import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

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
