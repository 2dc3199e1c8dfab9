import { hash, randomBytes } from 'node:crypto';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { newId } from '../vocabulary/ids.js';
import { setKeyRules, type KeyRules } from './key-limits.js';
import { keyPrincipalColumns, keyPrincipalRow } from './api-keys-repository.js';

/**
 * The apps an account approved (migration 0025): each grant acts as an API key row of kind
 * 'oauth', so the API's rate limits, paid-purchase rule, request log and ledger treat its calls
 * exactly as a key's. That row's key_sha256 is the hash of random bytes nobody is given, and keys
 * are looked up among 'key' rows only: the principal can never be presented as a key.
 */

const grantRow = z.object({
  grant_id: z.string(),
  account_id: z.string(),
  api_key_id: z.string(),
  client_id: z.string(),
  client_name: z.string().nullable(),
  resource: z.string(),
  scope: z.string(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
});
export type OAuthGrantRecord = z.infer<typeof grantRow>;

const grantIdRow = z.object({ grant_id: z.string() });

const grantColumns = sql.fragment`
  g.grant_id, g.account_id, g.api_key_id, g.client_id, g.client_name, g.resource, g.scope,
  g.created_at, g.revoked_at,
  (SELECT max(l.created_at) FROM api_request_log l WHERE l.api_key_id = g.api_key_id) AS last_used_at`;

/** The account's live grant for a client, if it approved that client before (one per client). */
export async function liveGrantOf(
  db: CommonQueryMethods,
  accountId: string,
  clientId: string,
): Promise<string | null> {
  const row = await db.maybeOne(sql.type(grantIdRow)`
    SELECT grant_id FROM oauth_grants
    WHERE account_id = ${accountId} AND client_id = ${clientId} AND revoked_at IS NULL`);
  return row?.grant_id ?? null;
}

/**
 * Records an approved grant and makes the key row it acts as. `displayName`: how the request log
 * and the pages name it (the app's name or host).
 */
export async function recordGrant(
  db: CommonQueryMethods,
  input: {
    grantId: string;
    accountId: string;
    clientId: string;
    clientName: string | null;
    displayName: string;
    resource: string;
    scope: string;
    /** The limits the user chose on the consent page (the key's rules; none given: none). */
    rules?: Partial<KeyRules>;
  },
): Promise<void> {
  await db.transaction(async (tx) => {
    const keyId = newId('key');
    await tx.query(sql.unsafe`
      INSERT INTO api_keys (id, account_id, key_sha256, display_prefix, name, kind)
      VALUES (${keyId}, ${input.accountId}, ${hash('sha256', randomBytes(32), 'hex')},
              'oauth', ${input.displayName.slice(0, 100)}, 'oauth')`);
    await tx.query(sql.unsafe`
      INSERT INTO oauth_grants (grant_id, account_id, api_key_id, client_id, client_name, resource, scope)
      VALUES (${input.grantId}, ${input.accountId}, ${keyId}, ${input.clientId}, ${input.clientName},
              ${input.resource}, ${input.scope})`);
    if (input.rules) await setKeyRules(tx, keyId, input.rules);
  });
}

export async function listGrants(
  db: CommonQueryMethods,
  accountId: string,
): Promise<readonly OAuthGrantRecord[]> {
  return db.any(sql.type(grantRow)`
    SELECT ${grantColumns} FROM oauth_grants g
    WHERE g.account_id = ${accountId} ORDER BY g.revoked_at IS NULL DESC, g.created_at DESC`);
}

export async function findGrant(
  db: CommonQueryMethods,
  accountId: string,
  grantId: string,
): Promise<OAuthGrantRecord | null> {
  return db.maybeOne(sql.type(grantRow)`
    SELECT ${grantColumns} FROM oauth_grants g
    WHERE g.account_id = ${accountId} AND g.grant_id = ${grantId}`);
}

/** A grant by its id, whatever its account (support). */
export async function grantById(db: CommonQueryMethods, grantId: string): Promise<OAuthGrantRecord | null> {
  return db.maybeOne(
    sql.type(grantRow)`SELECT ${grantColumns} FROM oauth_grants g WHERE g.grant_id = ${grantId}`,
  );
}

/**
 * Ends a grant at once: its record and key row revoked (the key row's change is announced, so every
 * API process drops what it cached), and every token, code and the grant itself deleted from the
 * authorization server's storage. Revoking a revoked grant changes nothing.
 */
export async function revokeGrantRecord(db: CommonQueryMethods, grantId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(sql.unsafe`DELETE FROM oauth_store WHERE grant_id = ${grantId}`);
    await tx.query(sql.unsafe`
      DELETE FROM oauth_store WHERE model = 'Grant' AND id_sha256 = ${hash('sha256', grantId, 'hex')}`);
    await tx.query(sql.unsafe`
      WITH ended AS (
        UPDATE oauth_grants SET revoked_at = now()
        WHERE grant_id = ${grantId} AND revoked_at IS NULL RETURNING api_key_id)
      UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
      WHERE id IN (SELECT api_key_id FROM ended)`);
  });
}

const tokenPrincipalRow = keyPrincipalRow.extend({
  /** The token's scopes, space-separated (`mcp`, the only one the MCP endpoint takes). */
  scope: z.string(),
});
/** What authentication needs to know about a presented access token: its key row's facts and its scopes. */
export type TokenPrincipal = z.infer<typeof tokenPrincipalRow>;

/**
 * The key row an unexpired access token acts as, if the token was issued for `resource`; null when
 * no such token exists (unknown, expired, revoked, or for another resource).
 */
export async function findAccessTokenPrincipal(
  db: CommonQueryMethods,
  tokenSha256: string,
  resource: string,
): Promise<TokenPrincipal | null> {
  return db.maybeOne(sql.type(tokenPrincipalRow)`
    SELECT ${keyPrincipalColumns}, (k.revoked_at IS NOT NULL OR g.revoked_at IS NOT NULL) AS revoked,
           COALESCE(t.payload->>'scope', '') AS scope
    FROM oauth_store t
    JOIN oauth_grants g ON g.grant_id = t.grant_id
    JOIN api_keys k ON k.id = g.api_key_id
    JOIN accounts a ON a.id = k.account_id
    WHERE t.model = 'AccessToken' AND t.id_sha256 = ${tokenSha256}
      AND t.expires_at > now() AND t.payload->'aud' @> to_jsonb(${resource}::text)`);
}
