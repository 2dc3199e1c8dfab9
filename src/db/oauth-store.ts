import { hash } from 'node:crypto';
import { errors } from 'oidc-provider';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { revokeGrantRecord } from './oauth-grants-repository.js';

/**
 * oidc-provider's storage on PostgreSQL (its adapter interface; migration 0025): one row of
 * `oauth_store` per model and id. Every id (a token's id is the token itself), uid and user code is
 * stored only as its SHA-256, and the payload is stored without its `jti` (the id again), which
 * `find` puts back from the id it was asked for: a copy of the table hands out no working token.
 * `grant_id` names the grant a row belongs to: a token's or code's, and a Grant's own id (grant ids
 * are no secret: oauth_grants keeps them), so that pruning finds every row of a grant no app holds.
 */

/** A stored model's payload, as oidc-provider reads and writes it. */
export type OAuthPayload = Record<string, unknown> & {
  grantId?: string;
  uid?: string;
  userCode?: string;
  consumed?: number;
  jti?: string;
};

const storedRow = z.object({ payload: z.record(z.string(), z.unknown()), consumed: z.number().nullable() });

const consumedRow = z.object({ won: z.boolean(), grant_id: z.string().nullable() });
const labels: Record<string, string> = {
  AuthorizationCode: 'authorization code',
  RefreshToken: 'refresh token',
};

export function oauthIdHash(id: string): string {
  return hash('sha256', id, 'hex');
}

/**
 * Ends oidc-provider's sign-in session `uid` (its Session row; the browser's cookie then names
 * none), as its end-session endpoint would: the next sign-in through it starts a new one.
 */
export async function endOAuthSession(db: CommonQueryMethods, uid: string): Promise<void> {
  await db.query(sql.unsafe`
    DELETE FROM oauth_store WHERE model = 'Session' AND uid_sha256 = ${oauthIdHash(uid)}`);
}

/** The adapter oidc-provider makes one of per model (`new Adapter('AccessToken')`). */
export interface OAuthAdapter {
  upsert(id: string, payload: OAuthPayload, expiresIn?: number): Promise<void>;
  find(id: string): Promise<OAuthPayload | undefined>;
  findByUid(uid: string): Promise<OAuthPayload | undefined>;
  findByUserCode(userCode: string): Promise<OAuthPayload | undefined>;
  consume(id: string): Promise<void>;
  destroy(id: string): Promise<void>;
  revokeByGrantId(grantId: string): Promise<void>;
}

/** The adapter class for oidc-provider's `adapter` option, on this pool. */
export function oauthAdapterClass(db: CommonQueryMethods): new (model: string) => OAuthAdapter {
  return class PostgresOAuthAdapter implements OAuthAdapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: OAuthPayload, expiresIn?: number): Promise<void> {
      const { jti: _jti, consumed: _consumed, ...stored } = payload;
      const expires =
        typeof expiresIn === 'number' && expiresIn > 0
          ? sql.fragment`now() + ${sql.interval({ seconds: expiresIn })}`
          : sql.fragment`NULL`;
      await db.query(sql.unsafe`
        INSERT INTO oauth_store (model, id_sha256, payload, grant_id, uid_sha256, user_code_sha256, expires_at)
        VALUES (${this.model}, ${oauthIdHash(id)}, ${sql.jsonb(stored as Parameters<typeof sql.jsonb>[0])},
                ${payload.grantId ?? (this.model === 'Grant' ? id : null)},
                ${payload.uid ? oauthIdHash(payload.uid) : null},
                ${payload.userCode ? oauthIdHash(payload.userCode) : null}, ${expires})
        ON CONFLICT (model, id_sha256) DO UPDATE SET
          payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id, uid_sha256 = EXCLUDED.uid_sha256,
          user_code_sha256 = EXCLUDED.user_code_sha256, expires_at = EXCLUDED.expires_at`);
    }

    async find(id: string): Promise<OAuthPayload | undefined> {
      return this.findWhere(sql.fragment`id_sha256 = ${oauthIdHash(id)}`, id);
    }

    async findByUid(uid: string): Promise<OAuthPayload | undefined> {
      // Sessions are looked up by uid; their id is the cookie's value, which the payload keeps as jti.
      return this.findWhere(sql.fragment`uid_sha256 = ${oauthIdHash(uid)}`, null);
    }

    async findByUserCode(userCode: string): Promise<OAuthPayload | undefined> {
      return this.findWhere(sql.fragment`user_code_sha256 = ${oauthIdHash(userCode)}`, null);
    }

    /**
     * Marks a code or refresh token used, once: oidc-provider read it unused a moment ago, but a
     * second request with the same code may have read it too. Only one UPDATE finds it unused; the
     * other is a reuse, answered as oidc-provider answers one (OAuth 2.1 §4.1.3, §4.3.1): the grant
     * and every token made from it are revoked, and the request gets `invalid_grant`.
     */
    async consume(id: string): Promise<void> {
      const idSha256 = oauthIdHash(id);
      const outcome = await db.one(sql.type(consumedRow)`
        WITH won AS (
          UPDATE oauth_store SET consumed_at = now()
          WHERE model = ${this.model} AND id_sha256 = ${idSha256} AND consumed_at IS NULL
          RETURNING 1)
        SELECT EXISTS (SELECT 1 FROM won) AS won,
               (SELECT grant_id FROM oauth_store
                WHERE model = ${this.model} AND id_sha256 = ${idSha256}) AS grant_id`);
      if (outcome.won) return;
      // Used meanwhile, or already gone with its grant (another request's reuse revoked it).
      if (outcome.grant_id) await revokeGrantRecord(db, outcome.grant_id);
      throw new errors.InvalidGrant(`${labels[this.model] ?? this.model} already used`);
    }

    async destroy(id: string): Promise<void> {
      await db.query(sql.unsafe`
        DELETE FROM oauth_store WHERE model = ${this.model} AND id_sha256 = ${oauthIdHash(id)}`);
      // A grant destroyed by oidc-provider (a reused refresh token, a revocation) ends its app's access.
      if (this.model === 'Grant') await revokeGrantRecord(db, id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await db.query(sql.unsafe`
        DELETE FROM oauth_store WHERE model = ${this.model} AND grant_id = ${grantId}`);
    }

    private async findWhere(
      where: ReturnType<typeof sql.fragment>,
      id: string | null,
    ): Promise<OAuthPayload | undefined> {
      const row = await db.maybeOne(sql.type(storedRow)`
        SELECT payload, extract(epoch FROM consumed_at)::float8 AS consumed
        FROM oauth_store
        WHERE model = ${this.model} AND ${where} AND (expires_at IS NULL OR expires_at > now())`);
      if (!row) return undefined;
      const payload: OAuthPayload = { ...row.payload };
      if (id !== null) payload.jti = id;
      if (row.consumed !== null) payload.consumed = Math.floor(row.consumed);
      return payload;
    }
  };
}
