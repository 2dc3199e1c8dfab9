import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { newId } from '../vocabulary/ids.js';
import { NotFound, qualifyingPurchaseSql } from './accounts-repository.js';

const MAX_ACTIVE_KEYS = 5;

const apiKeyRow = z.object({
  id: z.string(),
  account_id: z.string(),
  display_prefix: z.string(),
  name: z.string().nullable(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
});
export type ApiKeyRecord = z.infer<typeof apiKeyRow>;

/** Why a key could not be created, in words fit for the person creating it. */
export class KeyCreationRefused extends Error {
  override readonly name = 'KeyCreationRefused';
  constructor(
    readonly reason: 'payment_required' | 'insufficient_credits' | 'too_many_keys' | 'api_access_disabled',
    message: string,
  ) {
    super(message);
  }
}

const storeApiKeyRow = z.object({
  paid: z.boolean(),
  credits: z.number(),
  active_keys: z.number(),
  api_access_enabled: z.boolean(),
});

/**
 * Stores a new key for an account that may have one: a completed paid purchase, a positive
 * balance and fewer than 5 active keys. Only the key's hash and display prefix are given (the
 * key is minted by auth, and its plaintext never reaches the database).
 */
export async function storeApiKey(
  db: CommonQueryMethods,
  input: { accountId: string; name?: string; keySha256: string; displayPrefix: string },
): Promise<ApiKeyRecord> {
  return db.transaction(async (tx) => {
    const account = await tx.maybeOne(sql.type(storeApiKeyRow)`
      SELECT ${qualifyingPurchaseSql} AS paid,
             COALESCE(b.subscription_credits + b.one_time_credits, 0) AS credits,
             (SELECT count(*) FROM api_keys k WHERE k.account_id = a.id AND k.kind = 'key' AND k.revoked_at IS NULL)::int AS active_keys,
             a.api_access_enabled
      FROM accounts a LEFT JOIN credit_balances b ON b.account_id = a.id
      WHERE a.id = ${input.accountId}
      FOR UPDATE OF a`);
    if (!account) throw new NotFound(`no account ${input.accountId}`);
    if (!account.paid) {
      throw new KeyCreationRefused(
        'payment_required',
        'API keys need a completed credit-pack or subscription purchase.',
      );
    }
    if (account.credits <= 0)
      throw new KeyCreationRefused('insufficient_credits', 'API keys need a positive credit balance.');
    if (account.active_keys >= MAX_ACTIVE_KEYS) {
      throw new KeyCreationRefused(
        'too_many_keys',
        `An account has at most ${MAX_ACTIVE_KEYS} active keys; revoke one first.`,
      );
    }
    return tx.one(sql.type(apiKeyRow)`
      INSERT INTO api_keys (id, account_id, key_sha256, display_prefix, name)
      VALUES (${newId('key')}, ${input.accountId}, ${input.keySha256}, ${input.displayPrefix}, ${input.name ?? null})
      RETURNING id, account_id, display_prefix, name, created_at, revoked_at`);
  });
}

/** Revokes a key at once; revoking a revoked key keeps its first revocation time. */
export async function revokeApiKey(db: CommonQueryMethods, keyId: string): Promise<ApiKeyRecord> {
  const record = await db.maybeOne(sql.type(apiKeyRow)`
    UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = ${keyId}
    RETURNING id, account_id, display_prefix, name, created_at, revoked_at`);
  if (!record) throw new NotFound(`no API key ${keyId}`);
  return record;
}

/** The account's keys (an approved app's principal is not one: see oauth-grants-repository.ts). */
export async function listApiKeys(
  db: CommonQueryMethods,
  accountId: string,
): Promise<readonly ApiKeyRecord[]> {
  return db.any(sql.type(apiKeyRow)`
    SELECT id, account_id, display_prefix, name, created_at, revoked_at
    FROM api_keys WHERE account_id = ${accountId} AND kind = 'key' ORDER BY created_at DESC, id`);
}

/**
 * Everything authentication needs to know about a key row (a pasted key, a console session's key,
 * an app's access token), in the query that finds it: whether it may act, and its own rules
 * (migration 0034: read-only access, a list of models; its spend limit is the debit's to check).
 */
export const keyPrincipalRow = z.object({
  key_id: z.string(),
  account_id: z.string(),
  revoked: z.boolean(),
  api_access_enabled: z.boolean(),
  paid: z.boolean(),
  access: z.enum(['full', 'read_only']),
  models: z.array(z.string()).nullable(),
});
export type KeyPrincipal = z.infer<typeof keyPrincipalRow>;
/** keyPrincipalRow's columns from `k` (api_keys) and `a` (accounts); `revoked` is the caller's. */
export const keyPrincipalColumns = sql.fragment`k.id AS key_id, k.account_id, a.api_access_enabled,
  ${qualifyingPurchaseSql} AS paid, k.access, k.models`;

export async function findKeyPrincipal(
  db: CommonQueryMethods,
  keySha256: string,
): Promise<KeyPrincipal | null> {
  return db.maybeOne(sql.type(keyPrincipalRow)`
    SELECT ${keyPrincipalColumns}, k.revoked_at IS NOT NULL AS revoked
    FROM api_keys k JOIN accounts a ON a.id = k.account_id
    WHERE k.key_sha256 = ${keySha256} AND k.kind = 'key'`);
}

/** The same facts for keys named by id (the open event streams' keys, checked again after a change). */
export async function findKeyPrincipalsById(
  db: CommonQueryMethods,
  keyIds: readonly string[],
): Promise<readonly KeyPrincipal[]> {
  return db.any(sql.type(keyPrincipalRow)`
    SELECT ${keyPrincipalColumns}, k.revoked_at IS NOT NULL AS revoked
    FROM api_keys k JOIN accounts a ON a.id = k.account_id
    WHERE k.id = ANY(${sql.array([...keyIds], 'text')})`);
}
