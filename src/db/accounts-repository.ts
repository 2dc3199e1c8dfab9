import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { newId } from '../vocabulary/ids.js';

export const purchaseKinds = ['credit_pack', 'monthly_subscription', 'yearly_subscription', 'gift'] as const;
export type PurchaseKind = (typeof purchaseKinds)[number];
export const purchaseStatuses = ['pending', 'completed', 'failed', 'refunded'] as const;
export type PurchaseStatus = (typeof purchaseStatuses)[number];

/** Purchases that qualify an account for API access: completed and paid (gifts never count). */
export const qualifyingPurchaseSql = sql.fragment`
  EXISTS (SELECT 1 FROM purchases p
          WHERE p.account_id = a.id AND p.status = 'completed' AND p.kind <> 'gift')`;

const accountRow = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  api_access_enabled: z.boolean(),
  has_paid_purchase: z.boolean(),
  created_at: z.string(),
});
type Account = z.infer<typeof accountRow>;

const purchaseRow = z.object({
  id: z.string(),
  account_id: z.string(),
  kind: z.enum(purchaseKinds),
  status: z.enum(purchaseStatuses),
  credits: z.number(),
  created_at: z.string(),
  completed_at: z.string().nullable(),
});
type Purchase = z.infer<typeof purchaseRow>;

export async function createAccount(
  db: CommonQueryMethods,
  input: { email: string; name?: string },
): Promise<Account> {
  return db.transaction(async (tx) => {
    const id = newId('acct');
    await tx.query(
      sql.unsafe`INSERT INTO accounts (id, email, name) VALUES (${id}, ${input.email}, ${input.name ?? null})`,
    );
    await tx.query(sql.unsafe`INSERT INTO credit_balances (account_id) VALUES (${id})`);
    return getAccountOrThrow(tx, id);
  });
}

export async function findAccount(db: CommonQueryMethods, idOrEmail: string): Promise<Account | null> {
  return db.maybeOne(sql.type(accountRow)`
    SELECT a.id, a.email, a.name, a.api_access_enabled, ${qualifyingPurchaseSql} AS has_paid_purchase, a.created_at
    FROM accounts a WHERE a.id = ${idOrEmail} OR a.email = ${idOrEmail}`);
}

export async function getAccountOrThrow(db: CommonQueryMethods, idOrEmail: string): Promise<Account> {
  const account = await findAccount(db, idOrEmail);
  if (!account) throw new NotFound(`no account ${idOrEmail}`);
  return account;
}

export async function recordPurchase(
  db: CommonQueryMethods,
  input: { accountId: string; kind: PurchaseKind; status: PurchaseStatus; credits?: number },
): Promise<Purchase> {
  const id = newId('pur');
  return db.one(sql.type(purchaseRow)`
    INSERT INTO purchases (id, account_id, kind, status, credits, completed_at)
    VALUES (${id}, ${input.accountId}, ${input.kind}, ${input.status}, ${input.credits ?? 0},
            ${input.status === 'completed' ? sql.fragment`now()` : null})
    RETURNING id, account_id, kind, status, credits, created_at, completed_at`);
}

export async function listPurchases(db: CommonQueryMethods, accountId: string): Promise<readonly Purchase[]> {
  return db.any(sql.type(purchaseRow)`
    SELECT id, account_id, kind, status, credits, created_at, completed_at
    FROM purchases WHERE account_id = ${accountId} ORDER BY created_at DESC`);
}

export async function setApiAccess(
  db: CommonQueryMethods,
  accountId: string,
  enabled: boolean,
): Promise<void> {
  const result = await db.query(
    sql.unsafe`UPDATE accounts SET api_access_enabled = ${enabled} WHERE id = ${accountId}`,
  );
  if (result.rowCount === 0) throw new NotFound(`no account ${accountId}`);
}

/** A record the caller named does not exist. */
export class NotFound extends Error {
  override readonly name = 'NotFound';
}
