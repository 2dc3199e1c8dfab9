import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { keyPrincipalColumns, keyPrincipalRow, type KeyPrincipal } from './api-keys-repository.js';

/**
 * The console's sessions and one-time sign-in links (migration 0014). Ids and tokens arrive here
 * already hashed: their plaintext lives only in the browser's cookie or the printed link.
 */

/** Idle sessions end after this long: 12 hours (then they are deleted when next used, or by pruning). */
export const CONSOLE_SESSION_IDLE_MS = 12 * 60 * 60 * 1000;

/** The key a session acts as, with what authentication judges it by. */
export type SessionPrincipal = KeyPrincipal;

export async function openSession(
  db: CommonQueryMethods,
  input: { idSha256: string; accountId: string; apiKeyId: string },
): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO console_sessions (id_sha256, account_id, api_key_id)
    VALUES (${input.idSha256}, ${input.accountId}, ${input.apiKeyId})`);
}

/**
 * The session's key and account as they stand now, the session's idle clock restarted; null when
 * there is no such session or it has been idle longer than `idleMs` (it is then deleted).
 */
export async function touchSession(
  db: CommonQueryMethods,
  idSha256: string,
  idleMs: number,
): Promise<SessionPrincipal | null> {
  const idle = sql.interval({ seconds: idleMs / 1000 });
  const found = await db.maybeOne(sql.type(keyPrincipalRow)`
    WITH live AS (
      UPDATE console_sessions SET last_seen_at = now()
      WHERE id_sha256 = ${idSha256} AND last_seen_at > now() - ${idle}
      RETURNING api_key_id
    )
    SELECT ${keyPrincipalColumns}, k.revoked_at IS NOT NULL AS revoked
    FROM live JOIN api_keys k ON k.id = live.api_key_id JOIN accounts a ON a.id = k.account_id`);
  if (!found) await endSession(db, idSha256);
  return found;
}

export async function endSession(db: CommonQueryMethods, idSha256: string): Promise<void> {
  await db.query(sql.unsafe`DELETE FROM console_sessions WHERE id_sha256 = ${idSha256}`);
}

/** Ends every session opened with a key (it was revoked: they could no longer act anyway). */
export async function endSessionsOfKey(db: CommonQueryMethods, apiKeyId: string): Promise<void> {
  await db.query(sql.unsafe`DELETE FROM console_sessions WHERE api_key_id = ${apiKeyId}`);
}

const createSignInLinkRow = z.object({ expiresAt: z.string() });

export async function createSignInLink(
  db: CommonQueryMethods,
  input: { tokenSha256: string; accountId: string; apiKeyId: string; validMs: number },
): Promise<{ expiresAt: string }> {
  return db.one(sql.type(createSignInLinkRow)`
    INSERT INTO console_sign_in_links (token_sha256, account_id, api_key_id, expires_at)
    VALUES (${input.tokenSha256}, ${input.accountId}, ${input.apiKeyId},
            now() + ${sql.interval({ seconds: input.validMs / 1000 })})
    RETURNING expires_at AS "expiresAt"`);
}

const redeemSignInLinkRow = z.object({ accountId: z.string(), apiKeyId: z.string() });

/** Uses a sign-in link: its key's id the first time, within its validity; null ever after. */
export async function redeemSignInLink(
  db: CommonQueryMethods,
  tokenSha256: string,
): Promise<{ accountId: string; apiKeyId: string } | null> {
  return db.maybeOne(sql.type(redeemSignInLinkRow)`
    UPDATE console_sign_in_links SET used_at = now()
    WHERE token_sha256 = ${tokenSha256} AND used_at IS NULL AND expires_at > now()
    RETURNING account_id AS "accountId", api_key_id AS "apiKeyId"`);
}

/**
 * Marks a once-only form (see migration 0015) as sent, inside the transaction that does its work:
 * true the first time; false when it was sent before (then nothing may be done again).
 */
export async function claimForm(
  db: CommonQueryMethods,
  input: { formSha256: string; accountId: string },
): Promise<boolean> {
  const claimed = await db.maybeOne(sql.unsafe`
    INSERT INTO console_form_uses (form_sha256, account_id) VALUES (${input.formSha256}, ${input.accountId})
    ON CONFLICT (form_sha256) DO NOTHING
    RETURNING 1`);
  return claimed !== null;
}

/** Records the key a once-only form created, for the answer to a later resending of it. */
export async function recordFormKey(
  db: CommonQueryMethods,
  formSha256: string,
  apiKeyId: string,
): Promise<void> {
  await db.query(
    sql.unsafe`UPDATE console_form_uses SET api_key_id = ${apiKeyId} WHERE form_sha256 = ${formSha256}`,
  );
}

const keyOfFormRow = z.object({ api_key_id: z.string() });

/** The key a form of this account created when it was first sent (null: none, or another account's form). */
export async function keyOfForm(
  db: CommonQueryMethods,
  input: { formSha256: string; accountId: string },
): Promise<string | null> {
  return db.maybeOneFirst(sql.type(keyOfFormRow)`
    SELECT api_key_id FROM console_form_uses
    WHERE form_sha256 = ${input.formSha256} AND account_id = ${input.accountId} AND api_key_id IS NOT NULL`);
}

const pruneConsoleRecordsRow = z.object({ n: z.number() });

/**
 * Pruning: sessions idle past `idleMs`, sign-in links past their expiry, form uses older than a
 * day, and the authorization server's rows (oauth_store), every one of which goes by one of these:
 * past its expiry (codes, tokens, grants, interactions, sessions); a registered client (Dynamic
 * Client Registration is open) over a week old that no live grant uses; a registration access token
 * (none is made since issue 44: nothing reads one); a row of a grant that no live app record holds
 * (revoked, or never recorded), an hour after it was written. An approved app (oauth_grants) left
 * without a live code or token an hour after its approval (never redeemed, or its refresh token
 * unused past its lifetime) is revoked: Connected apps lists no app that cannot call. At most
 * `limit` rows of each; the number deleted or revoked.
 */
export async function pruneConsoleRecords(
  db: CommonQueryMethods,
  idleMs: number,
  limit: number,
): Promise<number> {
  const idle = sql.interval({ seconds: idleMs / 1000 });
  return db.oneFirst(sql.type(pruneConsoleRecordsRow)`
    WITH sessions AS (
      DELETE FROM console_sessions WHERE id_sha256 IN (
        SELECT id_sha256 FROM console_sessions WHERE last_seen_at < now() - ${idle}
        ORDER BY last_seen_at LIMIT ${limit})
      RETURNING 1
    ), links AS (
      DELETE FROM console_sign_in_links WHERE token_sha256 IN (
        SELECT token_sha256 FROM console_sign_in_links WHERE expires_at < now() LIMIT ${limit})
      RETURNING 1
    ), forms AS (
      DELETE FROM console_form_uses WHERE form_sha256 IN (
        SELECT form_sha256 FROM console_form_uses WHERE used_at < now() - interval '1 day'
        ORDER BY used_at LIMIT ${limit})
      RETURNING 1
    ), oauth AS (
      DELETE FROM oauth_store WHERE (model, id_sha256) IN (
        SELECT model, id_sha256 FROM oauth_store WHERE expires_at < now() LIMIT ${limit})
      RETURNING 1
    ), unheld AS (
      DELETE FROM oauth_store WHERE (model, id_sha256) IN (
        SELECT s.model, s.id_sha256 FROM oauth_store s
        WHERE (s.expires_at IS NULL OR s.expires_at >= now())
          AND (s.model = 'RegistrationAccessToken'
               OR (s.grant_id IS NOT NULL AND s.created_at < now() - interval '1 hour'
                   AND NOT EXISTS (SELECT 1 FROM oauth_grants g
                                   WHERE g.grant_id = s.grant_id AND g.revoked_at IS NULL)))
        LIMIT ${limit})
      RETURNING 1
    ), tokenless AS (
      UPDATE oauth_grants SET revoked_at = now()
      WHERE grant_id IN (
        SELECT g.grant_id FROM oauth_grants g
        WHERE g.revoked_at IS NULL AND g.created_at < now() - interval '1 hour'
          AND NOT EXISTS (SELECT 1 FROM oauth_store s
                          WHERE s.grant_id = g.grant_id
                            AND s.model IN ('AuthorizationCode', 'AccessToken', 'RefreshToken')
                            AND s.expires_at > now())
        LIMIT ${limit})
      RETURNING api_key_id
    ), tokenless_keys AS (
      UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
      WHERE id IN (SELECT api_key_id FROM tokenless)
    ), clients AS (
      DELETE FROM oauth_store WHERE (model, id_sha256) IN (
        SELECT s.model, s.id_sha256 FROM oauth_store s
        WHERE s.model = 'Client' AND s.created_at < now() - interval '7 days'
          AND NOT EXISTS (SELECT 1 FROM oauth_grants g
                          WHERE g.client_id = s.payload->>'client_id' AND g.revoked_at IS NULL)
        LIMIT ${limit})
      RETURNING 1
    )
    SELECT ((SELECT count(*) FROM sessions) + (SELECT count(*) FROM links) + (SELECT count(*) FROM forms)
            + (SELECT count(*) FROM oauth) + (SELECT count(*) FROM unheld) + (SELECT count(*) FROM tokenless)
            + (SELECT count(*) FROM clients))::int AS n`);
}
