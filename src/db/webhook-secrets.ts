import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/** An account's webhook signing secret (migration 0017), and the previous one while it still signs. */
export interface WebhookSecretRow {
  secret: string;
  created_at: string;
  previous: { secret: string; until: string } | null;
}

const row = z.object({
  secret: z.string(),
  created_at: z.string(),
  previous_secret: z.string().nullable(),
  previous_until: z.string().nullable(),
});

const shown = (r: z.infer<typeof row>): WebhookSecretRow => ({
  secret: r.secret,
  created_at: r.created_at,
  previous:
    r.previous_secret && r.previous_until ? { secret: r.previous_secret, until: r.previous_until } : null,
});

// A previous secret past its 24 h reads as none (no job has to clear it).
const columns = sql.fragment`secret, created_at,
  CASE WHEN previous_until > now() THEN previous_secret END AS previous_secret,
  CASE WHEN previous_until > now() THEN previous_until END AS previous_until`;

/**
 * The account's secret, made with `fresh` on first read (two first reads at once agree on one).
 * When another first read's insert was in flight, this statement's insert waits for it and then
 * inserts nothing, and its own read, on the snapshot the statement started with, cannot see the
 * row just committed (read committed): the row is read again in a new statement, which does.
 */
export async function webhookSecretOf(
  db: CommonQueryMethods,
  accountId: string,
  fresh: string,
): Promise<WebhookSecretRow> {
  const found = await db.maybeOne(sql.type(row)`
    WITH made AS (
      INSERT INTO webhook_secrets (account_id, secret) VALUES (${accountId}, ${fresh})
      ON CONFLICT (account_id) DO NOTHING RETURNING ${columns}
    )
    SELECT * FROM made UNION ALL
    SELECT ${columns} FROM webhook_secrets WHERE account_id = ${accountId} AND NOT EXISTS (SELECT 1 FROM made)`);
  if (found) return shown(found);
  return shown(
    await db.one(sql.type(row)`SELECT ${columns} FROM webhook_secrets WHERE account_id = ${accountId}`),
  );
}

/**
 * Replaces the account's secret with `fresh`; the one replaced keeps signing for `keepMs` (made
 * first when there was none). A second rotation within that time replaces the previous one too.
 */
export async function rotateWebhookSecret(
  db: CommonQueryMethods,
  accountId: string,
  fresh: string,
  keepMs: number,
): Promise<WebhookSecretRow> {
  const rotated = await db.one(sql.type(row)`
    INSERT INTO webhook_secrets AS w (account_id, secret) VALUES (${accountId}, ${fresh})
    ON CONFLICT (account_id) DO UPDATE SET secret = EXCLUDED.secret, previous_secret = w.secret,
      previous_until = now() + ${sql.interval({ seconds: keepMs / 1000 })}, created_at = now()
    RETURNING ${columns}`);
  return shown(rotated);
}

/** What a delivery is signed with now: the secret, then the previous one while it is kept; none before the first read. */
export async function webhookSigningSecrets(db: CommonQueryMethods, accountId: string): Promise<string[]> {
  const found = await db.maybeOne(
    sql.type(row)`SELECT ${columns} FROM webhook_secrets WHERE account_id = ${accountId}`,
  );
  if (!found) return [];
  return [found.secret, ...(found.previous_secret ? [found.previous_secret] : [])];
}
