import type { CommonQueryMethods } from 'slonik';
import { createAccount, recordPurchase, type PurchaseKind } from '../db/accounts-repository.js';
import { createApiKey } from '../auth/api-key-issuer.js';
import { grantCredits } from '../db/credits-repository.js';

interface FundedAccountOptions {
  email: string;
  name?: string;
  /** The completed purchase that lets the account hold keys; default a credit pack. */
  kind?: PurchaseKind;
  /** Credits granted to each pool; none by default. */
  oneTime?: number;
  subscription?: number;
  /**
   * Why the credits were granted, in the ledger. Without one the purchase carries them and the
   * grants name it (`purchase <id>`), as `npm run admin -- record-purchase` does.
   */
  reason?: string;
  keyName?: string;
}

export interface FundedAccount {
  accountId: string;
  keyId: string;
  /** The key itself: only its SHA-256 is stored. */
  key: string;
}

/**
 * An account that may use the API at once, for local runs (`npm start`, tests, benchmarks): a
 * completed purchase, credits, and one API key.
 */
export async function createFundedAccount(
  db: CommonQueryMethods,
  options: FundedAccountOptions,
): Promise<FundedAccount> {
  const account = await createAccount(db, { email: options.email, name: options.name });
  const grants = [
    { pool: 'one_time' as const, amount: options.oneTime ?? 0 },
    { pool: 'subscription' as const, amount: options.subscription ?? 0 },
  ].filter((grant) => grant.amount > 0);
  const credits = grants.reduce((sum, grant) => sum + grant.amount, 0);
  const purchase = await recordPurchase(db, {
    accountId: account.id,
    kind: options.kind ?? 'credit_pack',
    status: 'completed',
    credits: options.reason === undefined ? credits : 0,
  });
  const reason = options.reason ?? `purchase ${purchase.id}`;
  for (const { pool, amount } of grants)
    await grantCredits(db, { accountId: account.id, pool, amount, reason });
  const { key, record } = await createApiKey(db, { accountId: account.id, name: options.keyName });
  return { accountId: account.id, keyId: record.id, key };
}
